package audit

import (
	"context"
	"slices"
	"testing"

	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"orderly.dev/orderly/internal/scheme"
)

// Before, one forbidden namespaced list failed the whole audit (exit 1).
func TestReadRecordsForbiddenLists(t *testing.T) {
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	crd := newCRD("widgets.example.com", "Widget", "widgets").version("v1", true, specSchema(1)).build()
	dep := newDeployment("ops", "op", "op", 2).hardened().build()
	cr := clusterRole("op", rule(l("widgets.example.com"), l("widgets/status"), l("patch")))
	crb := clusterBinding("op", "op", saSubject("ops", "op"))
	forbidden := func(resource string) error {
		return apierrors.NewForbidden(schema.GroupResource{Group: "policy", Resource: resource}, "", nil)
	}
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(&crd, &dep, &cr, &crb).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*policyv1.PodDisruptionBudgetList); ok {
				return forbidden("poddisruptionbudgets")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	snap, err := ReadWith(context.Background(), c)
	if err != nil {
		t.Fatalf("ReadWith: %v", err)
	}
	if len(snap.Unread) != 1 || snap.Unread[0].Permission() != "list poddisruptionbudgets.policy in namespace ops" {
		t.Fatalf("unread = %+v", snap.Unread)
	}
	r := Audit(snap, Options{})
	if len(r.Operators) != 1 {
		t.Fatalf("operators = %+v", r.Operators)
	}
	o := r.Operators[0]
	if !slices.Equal(o.Unknown, l("availability.pdb")) || o.Grade == "" || len(r.Unread) != 1 {
		t.Errorf("unknown %q grade %q unread %+v: want the PDB check unknown and the rest graded", o.Unknown, o.Grade, r.Unread)
	}

	// What the audit cannot run without still stops it, saying what it could not read.
	c = fake.NewClientBuilder().WithScheme(s).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*rbacv1.RoleBindingList); ok {
				return forbidden("rolebindings")
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	if _, err := ReadWith(context.Background(), c); err == nil {
		t.Error("ReadWith succeeded without RoleBindings")
	}
}
