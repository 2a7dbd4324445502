package tenant

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	networkingv1ac "k8s.io/client-go/applyconfigurations/networking/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// Names of the objects Orderly puts in every tenant namespace.
const (
	ownersBindingName                    = "orderly-tenant-owners"
	extraBindingPrefix                   = "orderly-tenant-binding-"
	quotaName                            = "orderly-tenant-quota"
	limitRangeName                       = "orderly-tenant-limits"
	networkPolicyName                    = "orderly-tenant-isolation"
	rbacAPIGroup                         = "rbac.authorization.k8s.io"
	kindRoleBinding                      = "RoleBinding"
	kindResourceQuota                    = "ResourceQuota"
	kindLimitRange                       = "LimitRange"
	kindNetworkPolicy                    = "NetworkPolicy"
	kindNamespace                        = "Namespace"
	kindClusterRole                      = "ClusterRole"
	kindClusterRoleBinding               = "ClusterRoleBinding"
	kindValidatingAdmissionPolicyBinding = "ValidatingAdmissionPolicyBinding"
	// maxAdditionalRoleBindings is the API's MaxItems of additionalRoleBindings: the
	// extra bindings are named extraBindingPrefix 0 to 31, and the manager's RBAC
	// names each of them.
	maxAdditionalRoleBindings = 32
)

// childNames are the names Tenant gives its objects in a namespace, by kind. Tenant
// changes and deletes objects of these names only, and the manager's RBAC allows
// get, patch and delete on these names only.
func childNames() map[string][]string {
	bindings := []string{ownersBindingName}
	for i := range maxAdditionalRoleBindings {
		bindings = append(bindings, fmt.Sprintf("%s%d", extraBindingPrefix, i))
	}
	return map[string][]string{
		kindRoleBinding:   bindings,
		kindResourceQuota: {quotaName},
		kindLimitRange:    {limitRangeName},
		kindNetworkPolicy: {networkPolicyName},
	}
}

// isChildName reports whether name is one Tenant gives objects of kind.
func isChildName(kind, name string) bool {
	switch kind {
	case kindRoleBinding:
		if name == ownersBindingName {
			return true
		}
		i, ok := extraBindingIndex(name)
		return ok && i >= 0 && i < maxAdditionalRoleBindings && name == fmt.Sprintf("%s%d", extraBindingPrefix, i)
	case kindResourceQuota:
		return name == quotaName
	case kindLimitRange:
		return name == limitRangeName
	case kindNetworkPolicy:
		return name == networkPolicyName
	}
	return false
}

// desiredChildren is everything Orderly wants in one tenant namespace.
type desiredChildren struct {
	roleBindings  []*rbacv1.RoleBinding
	quota         *corev1.ResourceQuota
	limitRange    *corev1.LimitRange
	networkPolicy *networkingv1.NetworkPolicy
}

func childMeta(t *tenancyv1alpha1.Tenant, namespace, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:      name,
		Namespace: namespace,
		Labels: map[string]string{
			labels.ManagedBy:            labels.ManagedByValue,
			tenancyv1alpha1.TenantLabel: t.Name,
		},
	}
}

// normalizeSubjects applies the API server's defaulting (User and Group subjects get
// the RBAC API group), so that what Orderly applies and what is stored compare equal
// and a converged binding is not written again.
func normalizeSubjects(in []rbacv1.Subject) []rbacv1.Subject {
	out := make([]rbacv1.Subject, len(in))
	for i, s := range in {
		if s.APIGroup == "" && (s.Kind == rbacv1.UserKind || s.Kind == rbacv1.GroupKind) {
			s.APIGroup = rbacAPIGroup
		}
		out[i] = s
	}
	return out
}

// buildChildren computes the desired objects of namespace ns; planned is the limit of
// each totalQuota resource in ns (planQuotas). Pure, so it is unit tested.
func buildChildren(t *tenancyv1alpha1.Tenant, ns string, planned corev1.ResourceList) desiredChildren {
	var d desiredChildren
	if len(t.Spec.Owners) > 0 {
		d.roleBindings = append(d.roleBindings, &rbacv1.RoleBinding{
			ObjectMeta: childMeta(t, ns, ownersBindingName),
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: tenancyv1alpha1.TenantAdminClusterRole},
			Subjects:   normalizeSubjects(t.Spec.Owners),
		})
	}
	for i, b := range t.Spec.AdditionalRoleBindings {
		d.roleBindings = append(d.roleBindings, &rbacv1.RoleBinding{
			ObjectMeta: childMeta(t, ns, fmt.Sprintf("%s%d", extraBindingPrefix, i)),
			RoleRef:    b.RoleRef,
			Subjects:   normalizeSubjects(b.Subjects),
		})
	}
	if hard := quotaHard(t, planned); hard != nil {
		d.quota = &corev1.ResourceQuota{
			ObjectMeta: childMeta(t, ns, quotaName),
			Spec:       corev1.ResourceQuotaSpec{Hard: hard},
		}
	}
	if lr := t.Spec.LimitRange; lr != nil {
		// The API server defaults a missing request to the limit; doing the same here
		// keeps desired and stored equal, so converged means no writes.
		req := lr.DefaultRequest.DeepCopy()
		for name, limit := range lr.Default {
			if _, ok := req[name]; !ok {
				if req == nil {
					req = corev1.ResourceList{}
				}
				req[name] = limit.DeepCopy()
			}
		}
		d.limitRange = &corev1.LimitRange{
			ObjectMeta: childMeta(t, ns, limitRangeName),
			Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{
				Type:           corev1.LimitTypeContainer,
				Default:        lr.Default.DeepCopy(),
				DefaultRequest: req,
			}}},
		}
	}
	if t.Spec.NetworkPolicy.Isolation != tenancyv1alpha1.IsolationNone {
		peers := []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenancyv1alpha1.TenantLabel: t.Name}},
		}}
		for _, sel := range t.Spec.NetworkPolicy.AllowFrom {
			if ls, ok := namespaceSelector(sel); ok {
				peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: ls})
			}
		}
		// Only Ingress is restricted: egress, and with it DNS, is never blocked.
		d.networkPolicy = &networkingv1.NetworkPolicy{
			ObjectMeta: childMeta(t, ns, networkPolicyName),
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: peers}},
			},
		}
	}
	return d
}

// allowFromLabels are the namespace labels allowFrom may select by: no Tenant can set
// them (the CRD refuses other keys).
var allowFromLabels = []string{tenancyv1alpha1.NamespaceNameLabel, tenancyv1alpha1.TenantLabel}

// namespaceSelector is sel as a label selector, and false when sel selects by a label
// a Tenant could set (a Tenant stored before the API refused them): such a selector
// lets no one in, rather than whoever labels a namespace to match.
func namespaceSelector(sel tenancyv1alpha1.TenantNamespaceSelector) (*metav1.LabelSelector, bool) {
	out := &metav1.LabelSelector{}
	for k, v := range sel.MatchLabels {
		if !slices.Contains(allowFromLabels, k) {
			return nil, false
		}
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		out.MatchLabels[k] = v
	}
	for _, req := range sel.MatchExpressions {
		if !slices.Contains(allowFromLabels, req.Key) {
			return nil, false
		}
		out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: req.Key, Operator: req.Operator, Values: slices.Clone(req.Values)})
	}
	return out, true
}

// reconcileChildren converges the objects in one namespace. It returns a message when
// an object of the same name that Orderly does not own is in the way (left alone), or
// when the API server refuses a RoleBinding because the manager may not bind its role.
// The additionalRoleBindings whose indexes are in skip are refused: they are not
// created, and removed if they exist.
func (r *Reconciler) reconcileChildren(ctx context.Context, t *tenancyv1alpha1.Tenant, ns string, skip sets.Set[int], planned corev1.ResourceList) (string, error) {
	d := buildChildren(t, ns, planned)
	keep := map[string]bool{}
	var conflicts []string
	// A binding the API server refuses to let the manager create does not hold up the
	// quota, limits and isolation of the namespace.
	var refusedMsg string
	var refusedErr error
	note := func(kind, name, conflict string, err error) error {
		keep[kind+"/"+name] = true
		if conflict != "" {
			conflicts = append(conflicts, conflict)
		}
		return err
	}
	for _, rb := range d.roleBindings {
		if i, extra := extraBindingIndex(rb.Name); extra && skip.Has(i) {
			continue
		}
		c, err := ensureChild(ctx, r, t, rb, &rbacv1.RoleBinding{}, extractRoleBinding, roleRefChanged)
		if msg := forbiddenBinding(rb, err); msg != "" {
			if refusedMsg == "" {
				refusedMsg, refusedErr = msg, err
			}
			c, err = "", nil
		}
		if err := note(kindRoleBinding, rb.Name, c, err); err != nil {
			return "", err
		}
	}
	if d.quota != nil {
		c, err := ensureChild(ctx, r, t, d.quota, &corev1.ResourceQuota{}, extractQuota, nil)
		if err := note(kindResourceQuota, d.quota.Name, c, err); err != nil {
			return "", err
		}
	}
	if d.limitRange != nil {
		c, err := ensureChild(ctx, r, t, d.limitRange, &corev1.LimitRange{}, extractLimitRange, nil)
		if err := note(kindLimitRange, d.limitRange.Name, c, err); err != nil {
			return "", err
		}
	}
	if d.networkPolicy != nil {
		c, err := ensureChild(ctx, r, t, d.networkPolicy, &networkingv1.NetworkPolicy{}, extractNetworkPolicy, nil)
		if err := note(kindNetworkPolicy, d.networkPolicy.Name, c, err); err != nil {
			return "", err
		}
	}
	if err := r.pruneChildren(ctx, t, ns, keep); err != nil {
		return "", err
	}
	if refusedMsg != "" {
		return refusedMsg, refusedErr
	}
	if len(conflicts) > 0 {
		return fmt.Sprintf("%s (%d object(s) in the way)", conflicts[0], len(conflicts)), nil
	}
	return "", nil
}

// extraBindingIndex returns the index of additionalRoleBindings a binding name stands
// for, and whether it is one of those.
func extraBindingIndex(name string) (int, bool) {
	n, ok := strings.CutPrefix(name, extraBindingPrefix)
	if !ok {
		return 0, false
	}
	i, err := strconv.Atoi(n)
	return i, err == nil
}

// Extractors of the fields Orderly applied, one per kind of child.
var (
	extractRoleBinding   = extractWith(rbacv1ac.ExtractRoleBinding)
	extractQuota         = extractWith(corev1ac.ExtractResourceQuota)
	extractLimitRange    = extractWith(corev1ac.ExtractLimitRange)
	extractNetworkPolicy = extractWith(networkingv1ac.ExtractNetworkPolicy)
)

// roleRefChanged reports whether a RoleBinding must be replaced rather than applied:
// its roleRef cannot be changed in place.
func roleRefChanged(current, desired *rbacv1.RoleBinding) bool {
	return current.RoleRef != desired.RoleRef
}

// ensureChild creates desired, or brings the fields Orderly owns on the existing
// object to it with server-side apply (fields another writer added stay). An object
// of the same name that the Tenant does not control is never touched: a conflict
// message is returned instead. replace, when set, says when the existing object must
// be deleted and created again because an immutable field changed.
//
// The cache holds only the children's metadata. A child whose cached version is the
// one last seen holding desired is converged without a read; otherwise its content
// is read from the API server, compared, and written only when it differs.
func ensureChild[T client.Object](ctx context.Context, r *Reconciler, t *tenancyv1alpha1.Tenant, desired, current T, extract extractor[T], replace func(current, desired T) bool) (string, error) {
	kind := kindOf(desired)
	if err := controllerutil.SetControllerReference(t, desired, r.Scheme()); err != nil {
		return "", err
	}
	key := client.ObjectKeyFromObject(desired)
	want := digest(desired)
	cached := &metav1.PartialObjectMetadata{}
	cached.SetGroupVersionKind(childKinds[kind])
	err := r.Get(ctx, key, cached)
	switch {
	case apierrors.IsNotFound(err):
		r.converged.forget(kind, desired)
		// The cache holds only Orderly's objects: a foreign one of the same name shows
		// up as AlreadyExists here, and is then read from the API server. A create, not
		// an apply, because an apply would take the foreign object over.
		created := desired.DeepCopyObject().(T)
		err = r.createOwn(ctx, kind, created)
		if err == nil {
			r.converged.remember(kind, created, want)
			if wasReady(t, key.Namespace) {
				r.repaired(ctx, t, desired, kind, "Recreated deleted")
			}
			return "", nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %s %s: %w", kind, key, err)
		}
	case err != nil:
		return "", fmt.Errorf("reading %s %s from the cache: %w", kind, key, err)
	case !metav1.IsControlledBy(cached, t):
		return notManaged(kind, key), nil
	case r.converged.converged(kind, cached, want):
		return "", nil
	}
	if err := r.APIReader.Get(ctx, key, current); err != nil {
		return "", fmt.Errorf("reading %s %s: %w", kind, key, err)
	}
	if !metav1.IsControlledBy(current, t) {
		return notManaged(kind, key), nil
	}
	if replace != nil && replace(current, desired) {
		uid := current.GetUID()
		r.converged.forget(kind, current)
		if err := r.Delete(ctx, current, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return "", fmt.Errorf("replacing %s %s: %w", kind, key, err)
		}
		created := desired.DeepCopyObject().(T)
		if err := r.createOwn(ctx, kind, created); err != nil {
			return "", fmt.Errorf("replacing %s %s: %w", kind, key, err)
		}
		r.converged.remember(kind, created, want)
	} else {
		wrote, err := applyOwned(ctx, r.Client, current, desired, extract, nil)
		if err != nil {
			r.converged.forget(kind, current)
			return "", fmt.Errorf("updating %s %s: %w", kind, key, err)
		}
		if !wrote {
			r.converged.remember(kind, current, want)
			return "", nil
		}
		// The apply's result is not at hand: the next reconcile reads it once.
		r.converged.forget(kind, current)
	}
	// Under totalQuota a quota's limits move with usage: a write is a rebalance, not
	// the repair of someone's change.
	if wasReady(t, key.Namespace) && (kind != kindResourceQuota || t.Spec.TotalQuota == nil) {
		r.repaired(ctx, t, desired, kind, "Reverted changes to")
	}
	return "", nil
}

func notManaged(kind string, key client.ObjectKey) string {
	return fmt.Sprintf("%s %s already exists and is not managed by this Tenant; rename or remove it", kind, key)
}

// wasReady reports whether the last status said namespace ns was Ready for the
// current spec. Only then is an object found missing or changed drift that someone
// caused: otherwise it may never have been written (a reconcile that failed half-way,
// e.g. while the API server restarted, still writes its status), and writing it now
// is no repair.
func wasReady(t *tenancyv1alpha1.Tenant, ns string) bool {
	if t.Status.ObservedGeneration != t.Generation {
		return false
	}
	for _, st := range t.Status.Namespaces {
		if st.Name == ns {
			return st.State == tenancyv1alpha1.NamespaceReady
		}
	}
	return false
}

// repaired reports drift that was undone (the spec did not change, the world did).
func (r *Reconciler) repaired(ctx context.Context, t *tenancyv1alpha1.Tenant, obj client.Object, kind, what string) {
	log.FromContext(ctx).Info("Repaired drift", "kind", kind, "namespace", obj.GetNamespace(), "name", obj.GetName())
	r.Recorder.Eventf(t, obj, corev1.EventTypeNormal, "Repaired", "Repair", "%s %s %s/%s", what, kind, obj.GetNamespace(), obj.GetName())
	driftRepairs.WithLabelValues(series.Values(client.ObjectKeyFromObject(t), kind)...).Inc()
}

func kindOf(obj client.Object) string {
	switch obj.(type) {
	case *rbacv1.RoleBinding:
		return kindRoleBinding
	case *corev1.ResourceQuota:
		return kindResourceQuota
	case *corev1.LimitRange:
		return kindLimitRange
	case *networkingv1.NetworkPolicy:
		return kindNetworkPolicy
	case *corev1.Namespace:
		return kindNamespace
	case *rbacv1.ClusterRole:
		return kindClusterRole
	case *rbacv1.ClusterRoleBinding:
		return kindClusterRoleBinding
	case *admissionv1.ValidatingAdmissionPolicy:
		return "ValidatingAdmissionPolicy"
	case *admissionv1.ValidatingAdmissionPolicyBinding:
		return kindValidatingAdmissionPolicyBinding
	}
	return fmt.Sprintf("%T", obj)
}

// pruneChildren deletes the objects the Tenant controls in ns that are not in keep
// (keyed "Kind/name"); a nil keep removes them all. Only objects of the names Tenant
// gives its children are candidates: anything else is not Orderly's, whatever its
// labels and owner references say.
func (r *Reconciler) pruneChildren(ctx context.Context, t *tenancyv1alpha1.Tenant, ns string, keep map[string]bool) error {
	sel := []client.ListOption{client.InNamespace(ns), client.MatchingLabels{tenancyv1alpha1.TenantLabel: t.Name, labels.ManagedBy: labels.ManagedByValue}}
	for _, kind := range []string{kindRoleBinding, kindResourceQuota, kindLimitRange, kindNetworkPolicy} {
		gvk := childKinds[kind]
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.List(ctx, list, sel...); err != nil {
			return fmt.Errorf("listing objects of tenant %q in %q: %w", t.Name, ns, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			if keep[kind+"/"+obj.Name] || !isChildName(kind, obj.Name) || !metav1.IsControlledBy(obj, t) {
				continue
			}
			obj.SetGroupVersionKind(gvk)
			uid := obj.UID
			if err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("deleting %s %s/%s: %w", kind, ns, obj.Name, err)
			}
			r.converged.forget(kind, obj)
			log.FromContext(ctx).Info("Deleted object no longer declared", "kind", kind, "namespace", ns, "name", obj.Name)
		}
	}
	return nil
}
