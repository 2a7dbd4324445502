package labelpolicy

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// The webhook never fills anything in in the manager's namespace or a kube-*
// namespace, even when a configuration (an old one, or one edited by hand) sends it a
// request from there.
func TestHandlerLeavesProtectedNamespacesAlone(t *testing.T) {
	p := &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cost"},
		Spec:       policyv1alpha1.LabelPolicySpec{Label: "cost-center", Action: policyv1alpha1.ActionDefault, DefaultValue: "shared"},
	}
	h := &Handler{Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).Build(), Namespace: "orderly-system"}
	ctx := context.WithValue(context.Background(), policyNameKey{}, "cost")
	for ns, wantPatched := range map[string]bool{"shop": true, "orderly-system": false, "kube-system": false, "kube-flannel": false} {
		d := appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Name: "web",
			Kind:   metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Object: runtime.RawExtension{Raw: raw},
		}})
		if !resp.Allowed {
			t.Errorf("namespace %s: refused: %v", ns, resp.Result)
		}
		if patched := len(resp.Patches) > 0; patched != wantPatched {
			t.Errorf("namespace %s: patched %v, want %v (%v)", ns, patched, wantPatched, resp.Patches)
		}
	}
}

// With defaultFromTenant, the webhook fills in the costCenter of the namespace's
// Tenant (label and owner-uid annotation both matching), before the namespace's own
// label, as the MutatingAdmissionPolicy does.
func TestHandlerDefaultsFromTheTenant(t *testing.T) {
	p := &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cost"},
		Spec: policyv1alpha1.LabelPolicySpec{Label: "cost-center", Action: policyv1alpha1.ActionDefault,
			DefaultValue: "unassigned", DefaultFromTenant: true},
	}
	tenant := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team-a", UID: "uid-a"},
		Spec: tenancyv1alpha1.TenantSpec{CostCenter: "cc-a"}}
	ns := func(name, uid string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{tenancyv1alpha1.TenantLabel: "team-a", "cost-center": "cc-drifted"}}}
		if uid != "" {
			n.Annotations = map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: uid}
		}
		return n
	}
	h := &Handler{Reader: fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(p, tenant, ns("a-dev", "uid-a"), ns("a-fake", "")).Build(), Namespace: "orderly-system"}
	ctx := context.WithValue(context.Background(), policyNameKey{}, "cost")
	for namespace, want := range map[string]string{"a-dev": "cc-a", "a-fake": "cc-drifted"} {
		d := appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: "web"}}
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: namespace, Name: "web",
			Kind:   metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Object: runtime.RawExtension{Raw: raw},
		}})
		if !resp.Allowed {
			t.Fatalf("namespace %s: refused: %v", namespace, resp.Result)
		}
		patched, _ := json.Marshal(resp.Patches)
		if !strings.Contains(string(patched), `"`+want+`"`) {
			t.Errorf("namespace %s: patches %s, want the value %s", namespace, patched, want)
		}
	}
}
