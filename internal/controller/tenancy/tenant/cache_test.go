package tenant

import (
	"reflect"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// bulkyMeta is what anyone who may create RoleBindings somewhere can put on one that
// carries Orderly's managed-by label: large annotations, many labels and owners.
func bulkyMeta() metav1.ObjectMeta {
	m := metav1.ObjectMeta{
		Namespace: "anywhere", Name: "bulky", UID: "u1", ResourceVersion: "42", Generation: 3,
		Labels:      map[string]string{labels.ManagedBy: labels.ManagedByValue, tenancyv1alpha1.TenantLabel: "team"},
		Annotations: map[string]string{"padding": strings.Repeat("x", 200_000)},
		Finalizers:  []string{"example.com/keep"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "someone", Operation: metav1.ManagedFieldsOperationApply,
			FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{}}`)}},
		OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "ConfigMap", Name: "a", UID: "o1"},
			{APIVersion: "tenancy.orderly.dev/v1alpha1", Kind: "Tenant", Name: "team", UID: "t1", Controller: ptr.To(true)},
		},
	}
	for i := range 100 {
		m.Labels[strings.Repeat("l", 10)+string(rune('a'+i%26))+strings.Repeat("z", i)] = "v"
	}
	return m
}

func checkStripped(t *testing.T, m metav1.Object) {
	t.Helper()
	if m.GetName() != "bulky" || m.GetNamespace() != "anywhere" || m.GetUID() != "u1" || m.GetResourceVersion() != "42" {
		t.Errorf("identity or version lost: %s/%s %s %s", m.GetNamespace(), m.GetName(), m.GetUID(), m.GetResourceVersion())
	}
	if len(m.GetManagedFields()) != 0 || len(m.GetFinalizers()) != 0 {
		t.Errorf("kept managed fields (%d) or finalizers (%d)", len(m.GetManagedFields()), len(m.GetFinalizers()))
	}
	wantAnnotations := map[string]string{fieldsDigestKey: fieldsDigest(bulkyMeta().ManagedFields)}
	if !reflect.DeepEqual(m.GetAnnotations(), wantAnnotations) {
		t.Errorf("annotations = %d keys, want only the digest of the managed fields", len(m.GetAnnotations()))
	}
	want := map[string]string{labels.ManagedBy: labels.ManagedByValue, tenancyv1alpha1.TenantLabel: "team"}
	if !reflect.DeepEqual(m.GetLabels(), want) {
		t.Errorf("labels = %v, want only %v", m.GetLabels(), want)
	}
	if refs := m.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "t1" {
		t.Errorf("owner references = %v, want only the controller", refs)
	}
}

func TestChildMetadataKeepsOnlyWhatTenantReads(t *testing.T) {
	partial := &metav1.PartialObjectMetadata{ObjectMeta: bulkyMeta()}
	partial.SetGroupVersionKind(childKinds[kindRoleBinding])
	out, err := childMetadata(partial)
	if err != nil {
		t.Fatal(err)
	}
	checkStripped(t, out.(*metav1.PartialObjectMetadata))
	if out.(*metav1.PartialObjectMetadata).Kind != kindRoleBinding {
		t.Errorf("kind lost")
	}
	again, _ := childMetadata(out)
	checkStripped(t, again.(*metav1.PartialObjectMetadata))

	// A typed read through the cache gets no content either.
	typed := &rbacv1.RoleBinding{ObjectMeta: bulkyMeta(), RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"},
		Subjects: make([]rbacv1.Subject, 1000)}
	out, err = childMetadata(typed)
	if err != nil {
		t.Fatal(err)
	}
	rb := out.(*rbacv1.RoleBinding)
	checkStripped(t, rb)
	if len(rb.Subjects) != 0 || rb.RoleRef != (rbacv1.RoleRef{}) {
		t.Errorf("typed object kept its content: %d subjects, roleRef %v", len(rb.Subjects), rb.RoleRef)
	}

	tomb := toolscache.DeletedFinalStateUnknown{Key: "anywhere/bulky"}
	if out, err := childMetadata(tomb); err != nil || out != tomb {
		t.Errorf("a tombstone is passed through: %v, %v", out, err)
	}
}

func TestConvergedChildren(t *testing.T) {
	c := newConvergedChildren()
	live := &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: quotaName, UID: "u1", ResourceVersion: "5",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "orderly", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:hard":{"f:pods":{}}}}`)}}}}
	want := digest(&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Name: "view"}})
	other := digest(&rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Name: "edit"}})
	if c.converged(kindResourceQuota, live, want) {
		t.Fatalf("nothing remembered yet")
	}
	c.remember(kindResourceQuota, live, want)
	if !c.converged(kindResourceQuota, live, want) {
		t.Errorf("the remembered version is converged")
	}
	if c.converged(kindResourceQuota, live, other) {
		t.Errorf("a changed desired object is not converged")
	}
	if c.converged(kindLimitRange, live, want) {
		t.Errorf("another kind of the same name is not converged")
	}
	// The quota controller writes status: converged still.
	status := live.DeepCopy()
	status.ResourceVersion = "6"
	status.ManagedFields = append(status.ManagedFields, metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate,
		Subresource: "status", FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:used":{}}}`)})
	if !c.converged(kindResourceQuota, status, want) {
		t.Errorf("a status write is not a change of what Orderly set")
	}
	// Someone changes a field Orderly set: it leaves Orderly's entry, for theirs.
	edited := live.DeepCopy()
	edited.ResourceVersion = "7"
	edited.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "orderly", Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:hard":{}}}`)},
		{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:hard":{"f:pods":{}}}}`)},
	}
	if c.converged(kindResourceQuota, edited, want) {
		t.Errorf("a write to what Orderly set is not converged")
	}
	recreated := live.DeepCopy()
	recreated.UID = types.UID("u2")
	if c.converged(kindResourceQuota, recreated, want) {
		t.Errorf("an object deleted and made again (new UID) is not converged")
	}
	// What the cache keeps of live is as good as live.
	cached, _ := childMetadata(live.DeepCopy())
	if !c.converged(kindResourceQuota, cached.(*metav1.PartialObjectMetadata), want) {
		t.Errorf("the cached copy of the remembered object is not converged")
	}
	c.forgetNamespace("other")
	if c.size() != 1 {
		t.Errorf("forgetting another namespace forgot this one")
	}
	c.forgetNamespace("ns")
	if c.size() != 0 || c.converged(kindResourceQuota, live, want) {
		t.Errorf("forgetNamespace left entries")
	}
	c.remember(kindResourceQuota, live, want)
	c.forget(kindResourceQuota, live)
	if c.size() != 0 {
		t.Errorf("forget left the entry")
	}
}

func TestOwnedChangedIgnoresStatusWrites(t *testing.T) {
	meta := func(mf ...metav1.ManagedFieldsEntry) client.Object {
		out, _ := childMetadata(&metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: quotaName, UID: "u1", ManagedFields: mf}})
		return out.(client.Object)
	}
	orderly := metav1.ManagedFieldsEntry{Manager: "orderly", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:hard":{"f:pods":{}}}}`)}
	status := metav1.ManagedFieldsEntry{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)}
	edit := metav1.ManagedFieldsEntry{Manager: "kubectl-edit", Operation: metav1.ManagedFieldsOperationUpdate, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:hard":{"f:pods":{}}}}`)}
	if ownedChanged.Update(event.UpdateEvent{ObjectOld: meta(orderly), ObjectNew: meta(orderly, status)}) {
		t.Errorf("a status write makes the Tenant reconcile")
	}
	if !ownedChanged.Update(event.UpdateEvent{ObjectOld: meta(orderly), ObjectNew: meta(metav1.ManagedFieldsEntry{Manager: "orderly", Operation: metav1.ManagedFieldsOperationApply, FieldsV1: metav1.NewFieldsV1(`{"f:spec":{"f:hard":{}}}`)}, edit)}) {
		t.Errorf("an edit of what Orderly set does not make the Tenant reconcile")
	}
	deleting := meta(orderly)
	deleting.SetDeletionTimestamp(ptr.To(metav1.Now()))
	if !ownedChanged.Update(event.UpdateEvent{ObjectOld: meta(orderly), ObjectNew: deleting}) {
		t.Errorf("a deletion does not make the Tenant reconcile")
	}
}

func TestNamespaceSelectorRefusesForgeableLabels(t *testing.T) {
	tests := []struct {
		name string
		sel  tenancyv1alpha1.TenantNamespaceSelector
		want *metav1.LabelSelector
	}{
		{"empty selects every namespace", tenancyv1alpha1.TenantNamespaceSelector{}, &metav1.LabelSelector{}},
		{"by name", tenancyv1alpha1.TenantNamespaceSelector{MatchLabels: map[string]string{tenancyv1alpha1.NamespaceNameLabel: "ingress"}},
			&metav1.LabelSelector{MatchLabels: map[string]string{tenancyv1alpha1.NamespaceNameLabel: "ingress"}}},
		{"by tenant, as an expression", tenancyv1alpha1.TenantNamespaceSelector{MatchExpressions: []tenancyv1alpha1.TenantNamespaceSelectorRequirement{{Key: tenancyv1alpha1.TenantLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}},
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: tenancyv1alpha1.TenantLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}},
		{"a label any Tenant can set lets no one in", tenancyv1alpha1.TenantNamespaceSelector{MatchLabels: map[string]string{tenancyv1alpha1.NamespaceNameLabel: "monitoring", "team": "monitoring"}}, nil},
		{"an expression on such a label lets no one in", tenancyv1alpha1.TenantNamespaceSelector{MatchExpressions: []tenancyv1alpha1.TenantNamespaceSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpExists}}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := namespaceSelector(tt.sel)
			if ok != (tt.want != nil) || !reflect.DeepEqual(got, tt.want) {
				t.Errorf("namespaceSelector = %v, %v; want %v", got, ok, tt.want)
			}
		})
	}
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	tn.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{MatchLabels: map[string]string{"team": "x"}}}
	if peers := buildChildren(tn, "ns", nil).networkPolicy.Spec.Ingress[0].From; len(peers) != 1 {
		t.Errorf("peers = %d, want only the tenant's own namespaces", len(peers))
	}
}
