package tenant

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Reasons of the SelfServiceReady condition.
const (
	ReasonSelfServiceReady    = "SelfServiceReady"
	ReasonSelfServiceFailed   = "SelfServiceFailed"
	ReasonSelfServiceConflict = "SelfServiceConflict"
)

// selfServiceOutcome is what reconciling spec.selfService found.
type selfServiceOutcome struct {
	// enabled is whether spec.selfService is set.
	enabled bool
	// since is when the Tenant's binding was created: only namespaces created at or
	// after it went through the policy, so only they are adopted.
	since *metav1.Time
	// reason and message explain a failure; "" when the admission objects and the
	// owners' ClusterRole are in place.
	reason, message string
	err             error
	// namespaces are the tenant's self-service namespaces (selfServiceCandidates
	// created while the binding was in place), sorted by name.
	namespaces []corev1.Namespace
	// notAdmitted are namespaces labelled for the tenant that the policy did not
	// judge (created before the binding): left alone and reported.
	notAdmitted []string
}

// clusterWrites remembers, for each cluster-scoped object Orderly wrote for
// self-service, the UID and resourceVersion it left it at and a digest of what it
// wanted: while the cached object still has them, it is converged and nothing is
// written (a reconcile that finds nothing to change makes no API writes). Any write by
// someone else changes the resourceVersion and brings one apply.
type clusterWrites struct {
	mu   sync.Mutex
	seen map[string]writtenVersion
}

type writtenVersion struct {
	uid             types.UID
	resourceVersion string
	want            [sha256.Size]byte
}

func (c *clusterWrites) key(kind, name string) string { return kind + "/" + name }

func (c *clusterWrites) converged(kind string, live client.Object, want [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.seen[c.key(kind, live.GetName())]
	return ok && v.uid == live.GetUID() && v.resourceVersion == live.GetResourceVersion() && v.want == want
}

func (c *clusterWrites) remember(kind, name string, uid types.UID, rv string, want [sha256.Size]byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.seen == nil {
		c.seen = map[string]writtenVersion{}
	}
	c.seen[c.key(kind, name)] = writtenVersion{uid: uid, resourceVersion: rv, want: want}
}

// errNotOurs is returned for an object of one of Orderly's names that Orderly did
// not make: it is never overwritten.
type errNotOurs struct{ kind, name string }

func (e errNotOurs) Error() string {
	return fmt.Sprintf("%s %q exists and was not made by Orderly for this Tenant; Orderly leaves it alone: delete or rename it", e.kind, e.name)
}

// ensureCluster makes the cluster-scoped object desired exist as desired. owner, when
// set, is the Tenant that controls it; shared objects (owner nil) carry Orderly's
// label only. An object of that name that Orderly did not create is never
// overwritten: the plain create fails, and errNotOurs says so. It returns the live
// object's creation time.
func (r *Reconciler) ensureCluster(ctx context.Context, owner *tenancyv1alpha1.Tenant, desired, live client.Object) (metav1.Time, error) {
	kind := kindOf(desired)
	if owner != nil {
		if err := controllerutil.SetControllerReference(owner, desired, r.Scheme()); err != nil {
			return metav1.Time{}, err
		}
	}
	want := digest(desired)
	err := r.Get(ctx, client.ObjectKeyFromObject(desired), live)
	switch {
	case apierrors.IsNotFound(err):
		var err error
		if owner != nil { // its Owns watch drops the create event
			err = r.createOwn(ctx, kind, desired)
		} else {
			err = r.Create(ctx, desired, client.FieldOwner(labels.FieldManager))
		}
		if err == nil {
			log.FromContext(ctx).Info("Created "+kind+" for Tenant", "name", desired.GetName())
			r.clusterWrites.remember(kind, desired.GetName(), desired.GetUID(), desired.GetResourceVersion(), want)
			return desired.GetCreationTimestamp(), nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return metav1.Time{}, fmt.Errorf("creating %s %q: %w", kind, desired.GetName(), err)
		}
		// Someone made it first: another Tenant's reconcile (a shared policy), an
		// earlier attempt not yet in the cache, or someone else. Judge the live object.
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(desired), live); err != nil {
			return metav1.Time{}, fmt.Errorf("reading %s %q: %w", kind, desired.GetName(), err)
		}
	case err != nil:
		return metav1.Time{}, fmt.Errorf("reading %s %q: %w", kind, desired.GetName(), err)
	}
	// Ours: controlled by the Tenant, or, for a shared object, labelled as Orderly's
	// (only cluster administrators can create these kinds).
	if (owner != nil && !metav1.IsControlledBy(live, owner)) || (owner == nil && live.GetLabels()[labels.ManagedBy] != labels.ManagedByValue) {
		return metav1.Time{}, errNotOurs{kind, desired.GetName()}
	}
	if r.clusterWrites.converged(kind, live, want) {
		return live.GetCreationTimestamp(), nil
	}
	u, err := r.applyCluster(ctx, desired)
	if err != nil {
		return metav1.Time{}, err
	}
	// What Orderly wants did not change since it last wrote the object, and yet the
	// apply changed it: someone else had changed it.
	if owner != nil && u.GetResourceVersion() != live.GetResourceVersion() && r.clusterWrites.wanted(kind, live.GetName(), want) {
		r.repaired(ctx, owner, live, kind, "Restored")
	}
	r.clusterWrites.remember(kind, u.GetName(), u.GetUID(), u.GetResourceVersion(), want)
	return live.GetCreationTimestamp(), nil
}

// wanted reports whether Orderly last wrote the object named name wanting want.
func (c *clusterWrites) wanted(kind, name string, want [sha256.Size]byte) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	v, ok := c.seen[c.key(kind, name)]
	return ok && v.want == want
}

// applyCluster writes obj with server-side apply (kit.ApplyStored) and returns what
// the API server stored, whose resourceVersion is remembered.
func (r *Reconciler) applyCluster(ctx context.Context, obj client.Object) (*unstructured.Unstructured, error) {
	return kit.ApplyStored(ctx, r.Client, obj)
}

// deleteControlled deletes the object of live's type named name if Tenant t controls
// it; anything else of that name is someone else's and stays.
func (r *Reconciler) deleteControlled(ctx context.Context, t *tenancyv1alpha1.Tenant, live client.Object, name string) error {
	if err := r.Get(ctx, client.ObjectKey{Name: name}, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(live, t) {
		return nil
	}
	uid := live.GetUID()
	if err := r.Delete(ctx, live, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("deleting %s %q: %w", kindOf(live), name, err)
	}
	log.FromContext(ctx).Info("Deleted "+kindOf(live)+" of Tenant self-service", "name", name)
	return nil
}

// reconcileSelfService puts in place (or, when spec.selfService is not set, removes)
// the admission objects of self-service, keeps the owners' ClusterRole (with
// self-service's rules only when it is enabled), and finds the tenant's self-service
// namespaces, which its owners may delete.
func (r *Reconciler) reconcileSelfService(ctx context.Context, t *tenancyv1alpha1.Tenant) selfServiceOutcome {
	out := selfServiceOutcome{enabled: t.Spec.SelfService != nil}
	if !out.enabled {
		err := r.deleteControlled(ctx, t, &admissionv1.ValidatingAdmissionPolicyBinding{}, selfServiceBindingName(t))
		if err == nil {
			err = r.reconcileOwnerRole(ctx, t, false, nil)
		}
		if err != nil {
			out.reason, out.message, out.err = ReasonSelfServiceFailed, err.Error(), err
		}
		return out
	}
	fail := func(err error) selfServiceOutcome {
		out.reason, out.message = ReasonSelfServiceFailed, err.Error()
		var notOurs errNotOurs
		if ok := asNotOurs(err, &notOurs); ok {
			out.reason = ReasonSelfServiceConflict
			return out // resolves when a person acts; not retried with backoff
		}
		out.err = err
		return out
	}
	// The shared policies first: a binding without its policy admits everything.
	if _, err := r.ensureCluster(ctx, nil, selfServicePolicy(r.ManagerNamespace), &admissionv1.ValidatingAdmissionPolicy{}); err != nil {
		return fail(err)
	}
	if _, err := r.ensureCluster(ctx, nil, guardPolicy(), &admissionv1.ValidatingAdmissionPolicy{}); err != nil {
		return fail(err)
	}
	if _, err := r.ensureCluster(ctx, nil, guardBinding(), &admissionv1.ValidatingAdmissionPolicyBinding{}); err != nil {
		return fail(err)
	}
	since, err := r.ensureCluster(ctx, t, selfServiceBinding(t), &admissionv1.ValidatingAdmissionPolicyBinding{})
	if err != nil {
		return fail(err)
	}
	out.since = &since
	candidates, err := r.selfServiceCandidates(ctx, t)
	if err != nil {
		return fail(err)
	}
	var names []string
	for _, ns := range candidates {
		if ownedBy(&ns, t) || admittedSince(&ns, out.since) {
			out.namespaces = append(out.namespaces, ns)
			names = append(names, ns.Name)
		} else {
			out.notAdmitted = append(out.notAdmitted, ns.Name)
		}
	}
	if err := r.reconcileOwnerRole(ctx, t, true, names); err != nil {
		return fail(err)
	}
	return out
}

// reconcileOwnerRole keeps the owners' ClusterRole and, while the Tenant has owners,
// its binding to them. A Tenant without owners and without self-service has neither.
func (r *Reconciler) reconcileOwnerRole(ctx context.Context, t *tenancyv1alpha1.Tenant, selfService bool, names []string) error {
	if !selfService && len(t.Spec.Owners) == 0 {
		if err := r.deleteControlled(ctx, t, &rbacv1.ClusterRoleBinding{}, ownerRoleName(t)); err != nil {
			return err
		}
		return r.deleteControlled(ctx, t, &rbacv1.ClusterRole{}, ownerRoleName(t))
	}
	if _, err := r.ensureCluster(ctx, t, ownerRole(t, selfService, names), &rbacv1.ClusterRole{}); err != nil {
		return err
	}
	if len(t.Spec.Owners) == 0 {
		return r.deleteControlled(ctx, t, &rbacv1.ClusterRoleBinding{}, ownerRoleName(t))
	}
	_, err := r.ensureCluster(ctx, t, ownerRoleBinding(t), &rbacv1.ClusterRoleBinding{})
	return err
}

func asNotOurs(err error, target *errNotOurs) bool { return errors.As(err, target) }

// selfServiceCandidates lists the namespaces that are t's self-service namespaces:
// labelled with t's name, not listed in its spec, and either already recording t's
// UID or recording no Tenant's and created at or after t's binding (so the admission
// policy judged their creation). A namespace labelled by hand, or created before
// self-service was enabled, is never taken over on its label alone: it is listed in
// spec.namespaces and annotated for adoption instead.
func (r *Reconciler) selfServiceCandidates(ctx context.Context, t *tenancyv1alpha1.Tenant) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := r.List(ctx, &list, tenantNamespaces(t.Name)); err != nil {
		return nil, fmt.Errorf("listing namespaces of tenant %q: %w", t.Name, err)
	}
	var out []corev1.Namespace
	for _, ns := range list.Items {
		if slices.ContainsFunc(t.Spec.Namespaces, func(n tenancyv1alpha1.TenantNamespace) bool { return n.Name == ns.Name }) {
			continue
		}
		if r.reserved(ns.Name) != "" {
			continue
		}
		if ownedBy(&ns, t) {
			if ns.Annotations[tenancyv1alpha1.OriginAnnotation] == tenancyv1alpha1.OriginSelfService {
				out = append(out, ns)
			}
			continue
		}
		if _, claimed := ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation]; claimed {
			continue
		}
		out = append(out, ns)
	}
	slices.SortFunc(out, func(a, b corev1.Namespace) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// admittedSince reports whether ns was created when t's binding was in place. Creation
// times have a resolution of one second: a namespace labelled by hand in the very
// second the binding was created counts as admitted (see docs/tenant.md).
func admittedSince(ns *corev1.Namespace, since *metav1.Time) bool {
	return since != nil && !ns.CreationTimestamp.Before(since)
}

// reconcileSelfServiceNamespace adopts one self-service namespace (its origin is
// self-service: Orderly did not create it and never deletes it) and converges the
// objects in it as in a listed namespace.
func (r *Reconciler) reconcileSelfServiceNamespace(ctx context.Context, t *tenancyv1alpha1.Tenant, ns *corev1.Namespace, skipBindings sets.Set[int], quotas quotaState) namespaceResult {
	res := namespaceResult{name: ns.Name, state: tenancyv1alpha1.NamespaceReady, selfService: true}
	if !ns.DeletionTimestamp.IsZero() {
		res.state, res.message = tenancyv1alpha1.NamespacePending, fmt.Sprintf("self-service namespace %q is terminating", ns.Name)
		return res
	}
	want := desiredNamespace(t, &tenancyv1alpha1.TenantNamespace{Name: ns.Name}, ns)
	want.Annotations[tenancyv1alpha1.OriginAnnotation] = tenancyv1alpha1.OriginSelfService
	delete(want.Labels, labels.ManagedBy)
	adopting := !ownedBy(ns, t)
	if _, err := applyOwned(ctx, r.Client, ns, want, extractNamespace, nil); err != nil {
		return failed(res, fmt.Errorf("updating namespace %q: %w", ns.Name, err))
	}
	if adopting {
		log.FromContext(ctx).Info("Adopted self-service Namespace into Tenant", "namespace", ns.Name)
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "SelfServiceNamespaceAdopted", "Adopt", "Set up self-service namespace %s", ns.Name)
	}
	if msg, err := r.reconcileChildren(ctx, t, ns.Name, skipBindings, quotas.plan[ns.Name]); err != nil || msg != "" {
		res.state, res.message, res.err = tenancyv1alpha1.NamespaceFailed, msg, err
		if err != nil && msg == "" {
			res.message = err.Error()
		}
	}
	return res
}

// setSelfServiceStatus adds the SelfServiceReady condition to st (computed by
// computeStatus), or removes it when selfService is not set, and makes Ready False
// when self-service is not in place.
func setSelfServiceStatus(t *tenancyv1alpha1.Tenant, st *tenancyv1alpha1.TenantStatus, out selfServiceOutcome) {
	setFeatureCondition(t, st, out.enabled, tenancyv1alpha1.ConditionSelfServiceReady, out.reason, out.message, "Self-service is not in place: ",
		func() (string, string) {
			return ReasonSelfServiceReady, fmt.Sprintf("Owners may create up to %d namespaces labelled %s=%s (%d created)",
				t.Spec.SelfService.MaxNamespaces, tenancyv1alpha1.TenantLabel, t.Name, st.SelfServiceNamespaces)
		})
}

// Reasons of the DeletionProtected condition.
const (
	ReasonDeletionProtected = "DeletionProtected"
	ReasonProtectionFailed  = "ProtectionFailed"
)

// protectionOutcome is what reconciling spec.preventDeletion found: "" when the
// policy is in place (or not wanted).
type protectionOutcome struct {
	enabled         bool
	reason, message string
	err             error
}

// reconcilePreventDeletion puts the shared prevent-deletion policy in place for a
// Tenant that asks for it. The policy is never removed: with no namespace labelled
// and no Tenant protected, it refuses nothing.
func (r *Reconciler) reconcilePreventDeletion(ctx context.Context, t *tenancyv1alpha1.Tenant) protectionOutcome {
	out := protectionOutcome{enabled: t.Spec.PreventDeletion}
	if !out.enabled {
		return out
	}
	for _, o := range []struct{ desired, live client.Object }{
		{preventDeletionPolicy(), &admissionv1.ValidatingAdmissionPolicy{}},
		{preventDeletionBinding(), &admissionv1.ValidatingAdmissionPolicyBinding{}},
	} {
		if _, err := r.ensureCluster(ctx, nil, o.desired, o.live); err != nil {
			out.reason, out.message = ReasonProtectionFailed, err.Error()
			var notOurs errNotOurs
			if !asNotOurs(err, &notOurs) {
				out.err = err
			}
			return out
		}
	}
	return out
}

// setProtectionStatus adds the DeletionProtected condition to st, or removes it when
// preventDeletion is not set, and makes Ready False when the protection is not in place.
func setProtectionStatus(t *tenancyv1alpha1.Tenant, st *tenancyv1alpha1.TenantStatus, out protectionOutcome) {
	setFeatureCondition(t, st, out.enabled, tenancyv1alpha1.ConditionDeletionProtected, out.reason, out.message, "Deletion protection is not in place: ",
		func() (string, string) {
			return ReasonDeletionProtected, "The API server refuses to delete this Tenant and its namespaces until spec.preventDeletion is set to false"
		})
}

// Reasons of the AllowedEnforced condition.
const (
	ReasonAllowedEnforced = "AllowedEnforced"
	ReasonAllowedFailed   = "AllowedFailed"
)

// reconcileAllowed puts in place (or, without spec.allowed, removes) the Tenant's
// binding of the shared allowed policy.
func (r *Reconciler) reconcileAllowed(ctx context.Context, t *tenancyv1alpha1.Tenant) protectionOutcome {
	out := protectionOutcome{enabled: t.Spec.Allowed != nil}
	failed := func(err error) protectionOutcome {
		out.reason, out.message = ReasonAllowedFailed, err.Error()
		var notOurs errNotOurs
		if !asNotOurs(err, &notOurs) {
			out.err = err
		}
		return out
	}
	if !out.enabled {
		if err := r.deleteControlled(ctx, t, &admissionv1.ValidatingAdmissionPolicyBinding{}, allowedBindingName(t)); err != nil {
			return failed(err)
		}
		return out
	}
	if _, err := r.ensureCluster(ctx, nil, allowedPolicy(), &admissionv1.ValidatingAdmissionPolicy{}); err != nil {
		return failed(err)
	}
	if _, err := r.ensureCluster(ctx, t, allowedBinding(t), &admissionv1.ValidatingAdmissionPolicyBinding{}); err != nil {
		return failed(err)
	}
	return out
}

// allowedSummary says in words what spec.allowed allows, for the condition.
func allowedSummary(a *tenancyv1alpha1.TenantAllowed) string {
	var parts []string
	for _, l := range []struct {
		what string
		list []string
	}{
		{"storage classes", a.StorageClasses}, {"ingress classes", a.IngressClasses},
		{"priority classes", a.PriorityClasses}, {"runtime classes", a.RuntimeClasses},
		{"registries", a.Registries},
	} {
		if len(l.list) > 0 {
			parts = append(parts, l.what+" "+kit.FirstN(l.list, 8))
		}
	}
	if len(parts) == 0 {
		return "Nothing is restricted: every list of spec.allowed is empty"
	}
	return "The tenant's workloads may use only: " + strings.Join(parts, "; ")
}

// setAllowedStatus adds the AllowedEnforced condition to st, or removes it without
// spec.allowed, and makes Ready False when the policy is not in place.
func setAllowedStatus(t *tenancyv1alpha1.Tenant, st *tenancyv1alpha1.TenantStatus, out protectionOutcome) {
	setFeatureCondition(t, st, out.enabled, tenancyv1alpha1.ConditionAllowedEnforced, out.reason, out.message, "spec.allowed is not enforced: ",
		func() (string, string) { return ReasonAllowedEnforced, allowedSummary(t.Spec.Allowed) })
}

// setFeatureCondition sets the condition cond of an optional Tenant feature: removed
// when the feature is off; False with reason and message when it is not in place, and
// then Ready False too (prefixed by notInPlace); otherwise True with what inPlace says.
func setFeatureCondition(t *tenancyv1alpha1.Tenant, st *tenancyv1alpha1.TenantStatus, enabled bool, cond, reason, message, notInPlace string,
	inPlace func() (reason, message string)) {
	conds := kit.ConditionsOf(&st.Conditions, t.Generation)
	if !enabled {
		conds.Remove(cond)
		return
	}
	if reason != "" {
		conds.False(cond, reason, message)
		if meta.IsStatusConditionTrue(st.Conditions, tenancyv1alpha1.ConditionReady) {
			conds.False(tenancyv1alpha1.ConditionReady, reason, notInPlace+message)
		}
		return
	}
	r, m := inPlace()
	conds.True(cond, r, m)
}
