package audit

import (
	"context"
	"slices"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
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

// objectsOf are a snapshot's objects, to serve from a fake API server.
func objectsOf(s *Snapshot) []client.Object {
	var out []client.Object
	for i := range s.CRDs {
		out = append(out, &s.CRDs[i])
	}
	for i := range s.Deployments {
		out = append(out, &s.Deployments[i])
	}
	for i := range s.ClusterRoles {
		out = append(out, &s.ClusterRoles[i])
	}
	for i := range s.ClusterRoleBindings {
		out = append(out, &s.ClusterRoleBindings[i])
	}
	for i := range s.RoleBindings {
		out = append(out, &s.RoleBindings[i])
	}
	for i := range s.Services {
		out = append(out, &s.Services[i])
	}
	return out
}

// Strimzi installed in kafka, read by an account that may not list Leases there:
// leader election is still answered from its spec, and nothing is unknown but the
// list.
func TestReadWithoutLeasesOnStrimzi(t *testing.T) {
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c := fake.NewClientBuilder().WithScheme(s).WithObjects(objectsOf(fromManifests(t, "kafka", "strimzi.yaml"))...).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			if _, ok := list.(*coordinationv1.LeaseList); ok {
				return apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "", nil)
			}
			return c.List(ctx, list, opts...)
		},
	}).Build()
	snap, err := ReadWith(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	if len(snap.Unread) != 1 || snap.Unread[0].Permission() != "list leases.coordination.k8s.io in namespace kafka" {
		t.Fatalf("unread = %+v", snap.Unread)
	}
	r := Audit(snap, Options{})
	if len(r.Operators) != 1 || len(r.Operators[0].Unknown) != 0 || r.Operators[0].Grade != "B" {
		t.Fatalf("operators %+v: want Strimzi graded B with nothing unknown", r.Operators)
	}
	if f := findingOf(r.Operators[0], "availability.leader-election"); f.Result != Pass || !strings.Contains(f.Message, "STRIMZI_LEADER_ELECTION_ENABLED=true") {
		t.Errorf("leader election: %+v", f)
	}
}

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
