package tenant

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// fields builds one managed fields entry.
func fields(manager string, op metav1.ManagedFieldsOperationType, raw string) metav1.ManagedFieldsEntry {
	return metav1.ManagedFieldsEntry{Manager: manager, Operation: op, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(raw)}
}

const bindingFields = `{"f:metadata":{"f:labels":{".":{},"f:app.kubernetes.io/managed-by":{},"f:tenancy.orderly.dev/tenant":{}},` +
	`"f:ownerReferences":{".":{},"k:{\"uid\":\"u1\"}":{}}},"f:roleRef":{},"f:subjects":{}}`

func wantedBinding() *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: ownersBindingName,
			Labels:          map[string]string{labels.ManagedBy: labels.ManagedByValue, tenancyv1alpha1.TenantLabel: "team"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "tenancy.orderly.dev/v1alpha1", Kind: "Tenant", Name: "team", UID: "u1", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: tenancyv1alpha1.TenantAdminClusterRole},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: "ann"}},
	}
}

// liveBinding is the binding as the API server returns it after Orderly created it
// and someone else added a label of their own.
func liveBinding(orderlyOp metav1.ManagedFieldsOperationType) *rbacv1.RoleBinding {
	b := wantedBinding()
	b.UID, b.ResourceVersion = "b1", "7"
	b.Labels["theirs"] = "x"
	b.ManagedFields = []metav1.ManagedFieldsEntry{
		fields("kubectl-label", metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:theirs":{}}}}`),
		fields(labels.FieldManager, orderlyOp, bindingFields),
	}
	for i := range b.ManagedFields {
		b.ManagedFields[i].APIVersion = "rbac.authorization.k8s.io/v1"
	}
	return b
}

// Whether an apply is needed is decided on the fields Orderly owns alone: a converged
// object is never written again, whoever else wrote to it, and a change to Orderly's
// fields is always written.
func TestSameFieldsDecidesWhetherToApply(t *testing.T) {
	tests := []struct {
		name      string
		live      func() *rbacv1.RoleBinding
		want      func() *rbacv1.RoleBinding
		wantApply bool
	}{
		{"converged after an apply", func() *rbacv1.RoleBinding { return liveBinding(metav1.ManagedFieldsOperationApply) }, wantedBinding, false},
		{"converged after a create (Update entry)", func() *rbacv1.RoleBinding { return liveBinding(metav1.ManagedFieldsOperationUpdate) }, wantedBinding, false},
		{"desired subjects changed", func() *rbacv1.RoleBinding { return liveBinding(metav1.ManagedFieldsOperationApply) }, func() *rbacv1.RoleBinding {
			b := wantedBinding()
			b.Subjects[0].Name = "bob"
			return b
		}, true},
		{"a label Orderly set is no longer wanted", func() *rbacv1.RoleBinding { return liveBinding(metav1.ManagedFieldsOperationApply) }, func() *rbacv1.RoleBinding {
			b := wantedBinding()
			delete(b.Labels, tenancyv1alpha1.TenantLabel)
			return b
		}, true},
		{"someone else took the subjects over", func() *rbacv1.RoleBinding {
			b := liveBinding(metav1.ManagedFieldsOperationApply)
			b.Subjects = []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: "mallory"}}
			b.ManagedFields[1].FieldsV1 = metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{"f:app.kubernetes.io/managed-by":{},"f:tenancy.orderly.dev/tenant":{}},"f:ownerReferences":{"k:{\"uid\":\"u1\"}":{}}},"f:roleRef":{}}`)
			b.ManagedFields = append(b.ManagedFields, fields("someone", metav1.ManagedFieldsOperationUpdate, `{"f:subjects":{}}`))
			b.ManagedFields[2].APIVersion = "rbac.authorization.k8s.io/v1"
			return b
		}, wantedBinding, true},
		{"no managed fields at all", func() *rbacv1.RoleBinding {
			b := liveBinding(metav1.ManagedFieldsOperationApply)
			b.ManagedFields = nil
			return b
		}, wantedBinding, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			owned, err := orderlyFields(tt.live(), extractRoleBinding)
			if err != nil {
				t.Fatal(err)
			}
			if got := !sameFields(owned, tt.want()); got != tt.wantApply {
				t.Errorf("apply needed = %v, want %v; Orderly's fields: %+v", got, tt.wantApply, owned)
			}
		})
	}
}

func TestLegacyCleanup(t *testing.T) {
	live := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: "ns",
		Labels: map[string]string{
			"keep": "1", "example.com/retired": "1", "co-owned": "1", tenancyv1alpha1.TenantLabel: "team", "never-listed": "1",
		},
		Annotations: map[string]string{
			"kept-anno": "1", "retired-anno": "1",
			legacyManagedKeysAnnotation: `{"labels":["co-owned","example.com/retired","example.com/retired","gone-already","keep","tenancy.orderly.dev/tenant"],"annotations":["kept-anno","retired-anno"]}`,
		},
		ManagedFields: []metav1.ManagedFieldsEntry{
			fields(labels.FieldManager, metav1.ManagedFieldsOperationUpdate, `{"f:metadata":{"f:labels":{"f:keep":{},"f:example.com/retired":{},"f:co-owned":{}}}}`),
			fields("gitops", metav1.ManagedFieldsOperationApply, `{"f:metadata":{"f:labels":{"f:co-owned":{}}}}`),
		},
	}}
	want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        "ns",
		Labels:      map[string]string{"keep": "1", tenancyv1alpha1.TenantLabel: "team"},
		Annotations: map[string]string{"kept-anno": "1"},
	}}
	got := legacyCleanup(live, want)
	wantOps := []patchOp{
		{Op: "remove", Path: "/metadata/labels/example.com~1retired"},
		{Op: "remove", Path: "/metadata/annotations/retired-anno"},
		{Op: "remove", Path: "/metadata/annotations/tenancy.orderly.dev~1managed-keys"},
	}
	if len(got) != len(wantOps) {
		t.Fatalf("ops = %+v, want %+v", got, wantOps)
	}
	for i := range got {
		if got[i] != wantOps[i] {
			t.Errorf("op %d = %+v, want %+v", i, got[i], wantOps[i])
		}
	}

	live.Annotations[legacyManagedKeysAnnotation] = "{not json"
	if got := legacyCleanup(live, want); len(got) != 1 || got[0].Path != "/metadata/annotations/tenancy.orderly.dev~1managed-keys" {
		t.Errorf("a mangled annotation is still removed, and nothing else: %+v", got)
	}
	delete(live.Annotations, legacyManagedKeysAnnotation)
	if got := legacyCleanup(live, want); got != nil {
		t.Errorf("nothing to migrate: %+v", got)
	}
}

func TestDesiredNamespace(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "u1"}, Spec: tenancyv1alpha1.TenantSpec{CostCenter: "cc"}}
	spec := &tenancyv1alpha1.TenantNamespace{Name: "ns", Labels: map[string]string{"env": "dev"}, Annotations: map[string]string{"note": "n"}}
	withMarkers := func(uid, origin string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: map[string]string{
			tenancyv1alpha1.OwnerUIDAnnotation: uid, tenancyv1alpha1.OriginAnnotation: origin,
		}}}
	}
	tests := []struct {
		name          string
		live          *corev1.Namespace
		wantOrigin    string
		wantManagedBy bool
	}{
		{"about to be created", nil, tenancyv1alpha1.OriginCreated, true},
		{"created by this Tenant", withMarkers("u1", tenancyv1alpha1.OriginCreated), tenancyv1alpha1.OriginCreated, true},
		{"created by another Tenant, being adopted", withMarkers("u0", tenancyv1alpha1.OriginCreated), tenancyv1alpha1.OriginAdopted, false},
		{"adopted before", withMarkers("u1", tenancyv1alpha1.OriginAdopted), tenancyv1alpha1.OriginAdopted, false},
		{"origin edited by hand", withMarkers("u1", "whatever"), tenancyv1alpha1.OriginAdopted, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := desiredNamespace(tn, spec, tt.live)
			if got := ns.Annotations[tenancyv1alpha1.OriginAnnotation]; got != tt.wantOrigin {
				t.Errorf("origin = %q, want %q", got, tt.wantOrigin)
			}
			if _, got := ns.Labels[labels.ManagedBy]; got != tt.wantManagedBy {
				t.Errorf("managed-by label = %v, want %v", got, tt.wantManagedBy)
			}
			if ns.Labels[tenancyv1alpha1.TenantLabel] != "team" || ns.Labels[tenancyv1alpha1.CostCenterLabel] != "cc" || ns.Labels["env"] != "dev" ||
				ns.Annotations["note"] != "n" || ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] != "u1" {
				t.Errorf("namespace = %+v", ns.ObjectMeta)
			}
			if _, ok := ns.Annotations[legacyManagedKeysAnnotation]; ok {
				t.Errorf("Orderly keeps no bookkeeping annotation")
			}
		})
	}
	if _, ok := spec.Labels[tenancyv1alpha1.TenantLabel]; ok {
		t.Errorf("desiredNamespace changed the Tenant's spec")
	}
}
