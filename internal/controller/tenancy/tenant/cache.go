package tenant

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Cache narrows the manager's cache to what this controller needs.
//
// The kinds Tenant writes inside tenant namespaces (RoleBindings, quotas, LimitRanges,
// NetworkPolicies) are selected by Orderly's managed-by label, which anyone who may
// create them in any namespace can also set; so the cache keeps only the metadata
// Tenant needs of them (childMetadata), at a small, fixed size per object whatever an
// object carries, and Tenant reads their content from the API server when it needs it
// (ensureChild). Every reader of these kinds through the cache gets metadata only.
//
// Namespaces are cached whole, named here so that a controller asking to strip their
// managed fields is refused at start-up: the managed fields say which labels and
// annotations are Orderly's. Only cluster administrators (and Orderly) create
// namespaces, so their number is not in a namespace user's hands.
func Cache() kit.CacheRules {
	child := cache.ByObject{
		Label:     k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue}),
		Transform: childMetadata,
	}
	// The cluster-scoped objects of self-service are few (a handful per Tenant) and
	// only cluster administrators can create such kinds: cached whole, by Orderly's
	// label (the same rule as LabelPolicy's for the admission kinds).
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue})}
	return kit.CacheRules{
		&admissionv1.ValidatingAdmissionPolicy{}:        managed,
		&admissionv1.ValidatingAdmissionPolicyBinding{}: managed,
		&rbacv1.ClusterRole{}:                           managed,
		&rbacv1.ClusterRoleBinding{}:                    managed,
		&corev1.Namespace{}:                             {},
		&rbacv1.RoleBinding{}:                           child,
		&corev1.ResourceQuota{}:                         child,
		&corev1.LimitRange{}:                            child,
		&networkingv1.NetworkPolicy{}:                   child,
	}
}

// childKinds are the kinds of the objects Tenant puts in tenant namespaces.
var childKinds = map[string]schema.GroupVersionKind{
	kindRoleBinding:   rbacv1.SchemeGroupVersion.WithKind(kindRoleBinding),
	kindResourceQuota: corev1.SchemeGroupVersion.WithKind(kindResourceQuota),
	kindLimitRange:    corev1.SchemeGroupVersion.WithKind(kindLimitRange),
	kindNetworkPolicy: networkingv1.SchemeGroupVersion.WithKind(kindNetworkPolicy),
}

// fieldsDigestKey is where the cache keeps, in place of a child's managed fields, a
// digest of them (fieldsDigest). Only the cached copy carries it: it is never written
// to the API server, and a value an object carries there is replaced.
const fieldsDigestKey = "tenancy.orderly.dev/cached-fields-digest"

// fieldsDigest identifies who set which fields of an object's main resource (not of
// its status): a digest of its managed fields entries other than subresources'. A
// write that changes a field Orderly set takes that field from Orderly's entry (an
// update or a forced apply moves ownership to the writer), so any change to what
// Orderly set changes the digest; a status write (the quota controller's, after
// every pod) does not.
func fieldsDigest(entries []metav1.ManagedFieldsEntry) string {
	h := sha256.New()
	for _, e := range entries {
		if e.Subresource != "" {
			continue
		}
		_, _ = fmt.Fprintf(h, "%s\x00%s\x00%s\x00", e.Manager, e.Operation, e.APIVersion)
		if e.FieldsV1 != nil {
			_, _ = h.Write(e.FieldsV1.GetRawBytes())
		}
		_, _ = h.Write([]byte{0})
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// fieldsOf is obj's fieldsDigest: computed from its managed fields when it has them
// (an object read from the API server), else the one the cache kept.
func fieldsOf(obj client.Object) string {
	if mf := obj.GetManagedFields(); len(mf) > 0 {
		return fieldsDigest(mf)
	}
	return obj.GetAnnotations()[fieldsDigestKey]
}

// childMetadata is the cache transform of the kinds Tenant writes in tenant
// namespaces: it keeps what the watches and ensureChild read (identity, version, the
// two labels the cache selects by, the controller reference, the digest of the
// managed fields) and drops everything else, content, annotations, managed fields and
// further labels and owner references included. Objects are transformed in place
// (client-go hands the transform objects no one else holds yet); a typed object is
// replaced by an empty one of its type with the same metadata, so a typed read
// through the cache cannot be mistaken for the object's content. Idempotent.
func childMetadata(in any) (any, error) {
	obj, ok := in.(client.Object)
	if !ok {
		return in, nil // a tombstone: its object was transformed when it was stored
	}
	kept := map[string]string{}
	for _, key := range []string{labels.ManagedBy, tenancyv1alpha1.TenantLabel} {
		if v, ok := obj.GetLabels()[key]; ok {
			kept[key] = v
		}
	}
	meta := metav1.ObjectMeta{
		Name:              obj.GetName(),
		Namespace:         obj.GetNamespace(),
		UID:               obj.GetUID(),
		ResourceVersion:   obj.GetResourceVersion(),
		Generation:        obj.GetGeneration(),
		CreationTimestamp: obj.GetCreationTimestamp(),
		DeletionTimestamp: obj.GetDeletionTimestamp(),
	}
	if len(kept) > 0 {
		meta.Labels = kept
	}
	meta.Annotations = map[string]string{fieldsDigestKey: fieldsOf(obj)}
	if ref := metav1.GetControllerOfNoCopy(obj); ref != nil {
		meta.OwnerReferences = []metav1.OwnerReference{*ref}
	}
	if p, ok := obj.(*metav1.PartialObjectMetadata); ok {
		p.ObjectMeta = meta
		return p, nil
	}
	if q, ok := obj.(*corev1.ResourceQuota); ok {
		// A quota keeps its limits and usage too: spec.totalQuota is planned from them
		// and status reports them. At most quotaCacheResources of each, so that an
		// object anyone labels managed-by cannot grow the cache.
		return &corev1.ResourceQuota{
			TypeMeta:   q.TypeMeta,
			ObjectMeta: meta,
			Spec:       corev1.ResourceQuotaSpec{Hard: boundedResources(q.Spec.Hard)},
			Status:     corev1.ResourceQuotaStatus{Hard: boundedResources(q.Status.Hard), Used: boundedResources(q.Status.Used)},
		}, nil
	}
	out := reflect.New(reflect.TypeOf(obj).Elem())
	out.Elem().FieldByName("TypeMeta").Set(reflect.ValueOf(obj).Elem().FieldByName("TypeMeta"))
	out.Elem().FieldByName("ObjectMeta").Set(reflect.ValueOf(meta))
	return out.Interface(), nil
}

// quotaCacheResources is the most resources of each list the cache keeps of a quota:
// a Tenant's quota names those of quota.hard and totalQuota.hard.
const quotaCacheResources = 64

// boundedResources is the first quotaCacheResources entries of l, by name.
func boundedResources(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return nil
	}
	names := make([]string, 0, len(l))
	for r := range l {
		names = append(names, string(r))
	}
	slices.Sort(names)
	out := make(corev1.ResourceList, min(len(names), quotaCacheResources))
	for _, n := range names[:min(len(names), quotaCacheResources)] {
		out[corev1.ResourceName(n)] = l[corev1.ResourceName(n)].DeepCopy()
	}
	return out
}

// quotaStatusChanged lets through the updates of a quota whose enforced limits or
// usage changed: the quota controller's and the API server's status writes, which
// ownedChanged leaves out.
var quotaStatusChanged = predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*corev1.ResourceQuota)
		n, ok2 := e.ObjectNew.(*corev1.ResourceQuota)
		return ok1 && ok2 && (!equality.Semantic.DeepEqual(o.Status.Used, n.Status.Used) || !equality.Semantic.DeepEqual(o.Status.Hard, n.Status.Hard))
	},
}

// convergedChildren remembers, for each child, what Orderly last saw hold exactly what
// it wanted: its UID, the digest of its managed fields (fieldsDigest) and a digest of
// the desired object. While the cached metadata shows the same UID and fields and the
// desired object is unchanged, the child is converged without reading its content
// from the API server; a write by anyone to what Orderly set changes the fields
// digest and so brings one read. Entries exist only for objects controlled by a
// Tenant, so their number is that of Orderly's own children.
type convergedChildren struct {
	mu   sync.Mutex
	seen map[childKey]convergedVersion
}

type childKey struct{ kind, namespace, name string }

type convergedVersion struct {
	uid    types.UID
	fields string
	want   [sha256.Size]byte
}

func newConvergedChildren() *convergedChildren {
	return &convergedChildren{seen: map[childKey]convergedVersion{}}
}

func keyOf(kind string, obj client.Object) childKey {
	return childKey{kind: kind, namespace: obj.GetNamespace(), name: obj.GetName()}
}

// digest identifies what Orderly wants of a child.
func digest(desired client.Object) [sha256.Size]byte {
	raw, err := json.Marshal(desired)
	if err != nil {
		return [sha256.Size]byte{} // never equal to a remembered digest of a real object
	}
	return sha256.Sum256(raw)
}

// converged reports whether live (its cached metadata is enough) is as remembered for
// want.
func (c *convergedChildren) converged(kind string, live client.Object, want [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.seen[keyOf(kind, live)]
	return ok && v.uid == live.GetUID() && v.fields == fieldsOf(live) && v.want == want && want != [sha256.Size]byte{}
}

// remember records that live holds what want describes.
func (c *convergedChildren) remember(kind string, live client.Object, want [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen[keyOf(kind, live)] = convergedVersion{uid: live.GetUID(), fields: fieldsOf(live), want: want}
}

// forget drops what is remembered of one child.
func (c *convergedChildren) forget(kind string, obj client.Object) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.seen, keyOf(kind, obj))
}

// forgetNamespace drops what is remembered of the children in namespace.
func (c *convergedChildren) forgetNamespace(namespace string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for k := range c.seen {
		if k.namespace == namespace {
			delete(c.seen, k)
		}
	}
}

// size is the number of children remembered.
func (c *convergedChildren) size() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.seen)
}

// ownedChanged lets through the updates of a child that may matter to Tenant: a change
// of what anyone set on its main resource (its fields digest), its UID or its
// deletion. Status writes, such as the quota controller's after every pod, do not
// make the Tenant reconcile.
var ownedChanged = predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
	o, n := e.ObjectOld, e.ObjectNew
	return o.GetUID() != n.GetUID() || fieldsOf(o) != fieldsOf(n) ||
		!o.GetDeletionTimestamp().Equal(n.GetDeletionTimestamp()) ||
		!reflect.DeepEqual(o.GetOwnerReferences(), n.GetOwnerReferences()) ||
		!reflect.DeepEqual(o.GetLabels(), n.GetLabels())
}}
