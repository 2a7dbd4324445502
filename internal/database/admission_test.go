package database

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func TestAdmitNamespace(t *testing.T) {
	ns := func(name string, lbls map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	}
	var reads []string
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(ns("team-a", map[string]string{"databases": "yes"}), ns("team-b", nil), ns("kube-system", map[string]string{"databases": "yes"}),
			ns("orderly-system", map[string]string{"databases": "yes"})).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			reads = append(reads, key.Name)
			return c.Get(ctx, key, obj, opts...)
		}}).Build()
	server := func(sel *metav1.LabelSelector) *datav1alpha1.DatabaseServer {
		return &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: datav1alpha1.DatabaseServerSpec{AllowedNamespaces: sel}}
	}
	allowed := &metav1.LabelSelector{MatchLabels: map[string]string{"databases": "yes"}}
	for _, tc := range []struct {
		name      string
		server    *datav1alpha1.DatabaseServer
		namespace string
		wantErr   error
		wantMsg   string
		wantReads int
		wantRetry bool
	}{
		{name: "every namespace", server: server(nil), namespace: "team-b"},
		{name: "selected", server: server(allowed), namespace: "team-a", wantReads: 1},
		{name: "not selected", server: server(allowed), namespace: "team-b", wantErr: ErrNamespaceNotAllowed, wantReads: 1,
			wantMsg: "DatabaseServer shared does not allow namespace team-b (allowedNamespaces: databases=yes)"},
		{name: "an empty selector selects all", server: server(&metav1.LabelSelector{}), namespace: "team-b", wantReads: 1},
		{name: "kube-*, even selected", server: server(allowed), namespace: "kube-system", wantErr: ErrNamespaceNotAllowed,
			wantMsg: "namespace kube-system is protected"},
		{name: "kube-*, on a server for every namespace", server: server(nil), namespace: "kube-public", wantErr: ErrNamespaceNotAllowed},
		{name: "the manager's, even selected", server: server(allowed), namespace: "orderly-system", wantErr: ErrNamespaceNotAllowed,
			wantMsg: "namespace orderly-system is protected"},
		{name: "an invalid selector", namespace: "team-a", wantErr: ErrNamespaceNotAllowed, wantMsg: "has an invalid allowedNamespaces",
			server: server(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "databases", Operator: "Near"}}})},
		{name: "a namespace that cannot be read", server: server(allowed), namespace: "gone", wantReads: 1, wantRetry: true,
			wantMsg: "reading namespace gone"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			reads = nil
			err := AdmitNamespace(context.Background(), c, tc.server, tc.namespace, "orderly-system")
			switch {
			case tc.wantRetry:
				if err == nil || errors.Is(err, ErrNamespaceNotAllowed) {
					t.Errorf("err = %v, want an error to retry", err)
				}
			case !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil):
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("err = %q, want it to say %q", err, tc.wantMsg)
			}
			if len(reads) != tc.wantReads {
				t.Errorf("read %v, want %d reads", reads, tc.wantReads)
			}
		})
	}
}

func TestCheckNamespace(t *testing.T) {
	for _, tc := range []struct {
		namespace, manager string
		wantRefused        bool
	}{
		{"team-a", "orderly-system", false},
		{"kube-system", "orderly-system", true},
		{"kube-flannel", "", true},
		{"orderly-system", "orderly-system", true},
		{"orderly-system", "", false},
		{"kubernetes-dashboard", "orderly-system", false},
	} {
		err := CheckNamespace(tc.namespace, tc.manager)
		if refused := errors.Is(err, ErrNamespaceNotAllowed); refused != tc.wantRefused || (err != nil && !refused) {
			t.Errorf("CheckNamespace(%q, %q) = %v, want refused %v", tc.namespace, tc.manager, err, tc.wantRefused)
		}
	}
}
