package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// legacyManagedKeysAnnotation is where versions of Orderly before server-side apply
// recorded the namespace labels and annotations they set. It is read once, to remove
// the keys it lists that are no longer wanted, and then removed.
const legacyManagedKeysAnnotation = "tenancy.orderly.dev/managed-keys"

// pendingRecheck is how soon a namespace that is still terminating is looked at again.
const pendingRecheck = 5 * time.Second

// extractNamespace returns the labels and annotations Orderly set on a namespace.
// The API server labels every namespace with its own name, and records that label as
// set by whoever created the namespace: it is not Orderly's to want or to remove.
func extractNamespace(ns *corev1.Namespace) (any, error) {
	applied, err := corev1ac.ExtractNamespace(ns, labels.FieldManager)
	if err == nil {
		delete(applied.Labels, corev1.LabelMetadataName)
	}
	return applied, err
}

// namespaceResult is what reconciling one namespace found.
type namespaceResult struct {
	name string
	// selfService is true for a namespace an owner created through spec.selfService.
	selfService bool
	created     bool
	state       tenancyv1alpha1.NamespaceState
	message     string
	err         error
}

// desiredNamespace is a tenant namespace as far as Orderly decides it: the labels
// and annotations the Tenant sets, and Orderly's markers. live is the namespace as it
// is, or nil when Orderly is about to create it.
func desiredNamespace(t *tenancyv1alpha1.Tenant, spec *tenancyv1alpha1.TenantNamespace, live *corev1.Namespace) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:        spec.Name,
		Labels:      map[string]string{},
		Annotations: map[string]string{},
	}}
	// The API server refuses reserved keys in a Tenant; a Tenant stored before it did
	// still has them ignored here.
	for k, v := range spec.Labels {
		if tenantMaySetLabel(k, v) {
			ns.Labels[k] = v
		}
	}
	for k, v := range spec.Annotations {
		if tenantMaySetAnnotation(k) {
			ns.Annotations[k] = v
		}
	}
	ns.Labels[tenancyv1alpha1.TenantLabel] = t.Name
	if t.Spec.PreventDeletion {
		ns.Labels[tenancyv1alpha1.PreventDeletionLabel] = "true"
	}
	if t.Spec.CostCenter != "" {
		ns.Labels[tenancyv1alpha1.CostCenterLabel] = t.Spec.CostCenter
	}
	ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] = string(t.UID)
	// Only a namespace this very Tenant created keeps origin "created": anything else
	// it manages was adopted, and is therefore never deleted by Orderly.
	if live == nil || (live.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] == string(t.UID) &&
		live.Annotations[tenancyv1alpha1.OriginAnnotation] == tenancyv1alpha1.OriginCreated) {
		ns.Annotations[tenancyv1alpha1.OriginAnnotation] = tenancyv1alpha1.OriginCreated
		ns.Labels[labels.ManagedBy] = labels.ManagedByValue
	} else {
		ns.Annotations[tenancyv1alpha1.OriginAnnotation] = tenancyv1alpha1.OriginAdopted
	}
	return ns
}

// reservedKey matches label and annotation keys under the prefixes kubernetes.io/,
// k8s.io/ and orderly.dev/ and their subdomains: Kubernetes and Orderly set and act on
// them. The same expression is in the Tenant CRD's validation rules.
var reservedKey = regexp.MustCompile(`^([^/]*[.])?(kubernetes[.]io|k8s[.]io|orderly[.]dev)/`)

// podSecurityLevels are the Pod Security labels a Tenant may set, and the one value
// each may take: restricted can only make a namespace stricter.
var podSecurityLevels = []string{"pod-security.kubernetes.io/enforce", "pod-security.kubernetes.io/audit", "pod-security.kubernetes.io/warn"}

// tenantMaySetLabel reports whether a Tenant may put the label key=value on its
// namespaces (what the CRD's rules allow).
func tenantMaySetLabel(key, value string) bool {
	switch {
	case key == tenancyv1alpha1.TenantLabel || key == tenancyv1alpha1.CostCenterLabel:
		return false
	case strings.HasPrefix(key, "pod-security.kubernetes.io/"):
		return slices.Contains(podSecurityLevels, key) && value == "restricted"
	}
	return !reservedKey.MatchString(key)
}

// tenantMaySetAnnotation reports whether a Tenant may put the annotation key on its
// namespaces (what the CRD's rule allows).
func tenantMaySetAnnotation(key string) bool { return !reservedKey.MatchString(key) }

// claimedBy reports whether the namespace may be managed by Tenant t: it records t's
// UID (Orderly wrote it when t created or adopted the namespace), or a person
// annotated it for adoption by t. The tenant label is not a claim: it names a Tenant,
// and a later Tenant of the same name is another Tenant.
func claimedBy(ns *corev1.Namespace, t *tenancyv1alpha1.Tenant) bool {
	return ownedBy(ns, t) || ns.Annotations[tenancyv1alpha1.AdoptAnnotation] == t.Name
}

// ownedBy reports whether the namespace records t's UID as its owner.
func ownedBy(ns *corev1.Namespace, t *tenancyv1alpha1.Tenant) bool {
	return t.UID != "" && ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] == string(t.UID)
}

// conflictMessage explains why a namespace is left alone and how to hand it over.
func conflictMessage(ns *corev1.Namespace, t *tenancyv1alpha1.Tenant) string {
	owner := "no tenant"
	switch o := ns.Labels[tenancyv1alpha1.TenantLabel]; {
	case o == t.Name:
		owner = fmt.Sprintf("an earlier Tenant named %q (UID %s), not this one", o, ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation])
	case o != "":
		owner = fmt.Sprintf("tenant %q", o)
	}
	return fmt.Sprintf("namespace %q already exists and belongs to %s; to hand it to this tenant, annotate it %s=%s",
		ns.Name, owner, tenancyv1alpha1.AdoptAnnotation, t.Name)
}

// reserved reports why no Tenant may manage the namespace named name, or "".
func (r *Reconciler) reserved(name string) string {
	switch kit.NamespaceProtection(name, r.ManagerNamespace) {
	case kit.KubernetesNamespace:
		return fmt.Sprintf("namespace %q belongs to Kubernetes: a Tenant never manages kube-* namespaces", name)
	case kit.ManagerNamespace:
		return fmt.Sprintf("namespace %q is Orderly's own namespace: a Tenant never manages it", name)
	}
	return ""
}

// reconcileNamespace creates or claims one namespace, keeps its metadata, and then
// converges the objects inside it.
func (r *Reconciler) reconcileNamespace(ctx context.Context, t *tenancyv1alpha1.Tenant, spec *tenancyv1alpha1.TenantNamespace, skipBindings sets.Set[int], quotas quotaState) namespaceResult {
	res := namespaceResult{name: spec.Name, state: tenancyv1alpha1.NamespaceReady}
	if why := r.reserved(spec.Name); why != "" {
		res.state, res.message = tenancyv1alpha1.NamespaceConflict, why
		return res
	}

	var ns corev1.Namespace
	err := r.Get(ctx, client.ObjectKey{Name: spec.Name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		created, isNew, cerr := r.createNamespace(ctx, desiredNamespace(t, spec, nil))
		if cerr != nil {
			return failed(res, fmt.Errorf("creating namespace %q: %w", spec.Name, cerr))
		}
		ns, res.created = *created, isNew
	case err != nil:
		return failed(res, fmt.Errorf("reading namespace %q: %w", spec.Name, err))
	}

	if !ns.DeletionTimestamp.IsZero() {
		res.state, res.message = tenancyv1alpha1.NamespacePending, fmt.Sprintf("namespace %q is terminating; it is created again once it is gone", ns.Name)
		return res
	}
	if !claimedBy(&ns, t) {
		res.state, res.message = tenancyv1alpha1.NamespaceConflict, conflictMessage(&ns, t)
		return res
	}
	// A namespace this reconcile created holds what it wants already.
	if !res.created {
		if err := r.applyNamespace(ctx, t, &ns, desiredNamespace(t, spec, &ns)); err != nil {
			return failed(res, fmt.Errorf("updating namespace %q: %w", ns.Name, err))
		}
	}
	if ns.Annotations[tenancyv1alpha1.AdoptAnnotation] == t.Name {
		if err := r.removeAdoptAnnotation(ctx, t, &ns); err != nil {
			return failed(res, fmt.Errorf("removing the adopt annotation of namespace %q: %w", ns.Name, err))
		}
	}
	if msg, err := r.reconcileChildren(ctx, t, ns.Name, skipBindings, quotas.plan[ns.Name]); err != nil || msg != "" {
		res.state, res.message, res.err = tenancyv1alpha1.NamespaceFailed, msg, err
		if err != nil && msg == "" {
			res.message = err.Error()
		}
	}
	return res
}

func failed(res namespaceResult, err error) namespaceResult {
	res.state, res.message, res.err = tenancyv1alpha1.NamespaceFailed, err.Error(), err
	return res
}

// createNamespace creates the namespace, or returns the live one (and false) when
// someone made it first. A create, unlike an apply, fails when the namespace exists,
// so origin "created" is only ever written on a namespace Orderly made.
func (r *Reconciler) createNamespace(ctx context.Context, ns *corev1.Namespace) (*corev1.Namespace, bool, error) {
	if err := r.createOwn(ctx, kindNamespace, ns); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Someone (or our own earlier attempt, not yet in the cache) made it first:
			// judge the live object like any existing one.
			live := &corev1.Namespace{}
			if gerr := r.APIReader.Get(ctx, client.ObjectKey{Name: ns.Name}, live); gerr != nil {
				return nil, false, gerr
			}
			return live, false, nil
		}
		return nil, false, err
	}
	log.FromContext(ctx).Info("Created Namespace for Tenant", "namespace", ns.Name)
	return ns, true, nil
}

// applyNamespace brings the labels and annotations Orderly sets on a claimed
// namespace to want. Keys Orderly set before and no longer wants go; keys anyone else
// set stay.
func (r *Reconciler) applyNamespace(ctx context.Context, t *tenancyv1alpha1.Tenant, live, want *corev1.Namespace) error {
	adopting := live.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] != string(t.UID)
	_, migrating := live.Annotations[legacyManagedKeysAnnotation]
	wrote, err := applyOwned(ctx, r.Client, live, want, extractNamespace, legacyCleanup(live, want))
	if err != nil || !wrote {
		return err
	}
	switch {
	case adopting:
		log.FromContext(ctx).Info("Adopted Namespace into Tenant", "namespace", live.Name)
		r.Recorder.Eventf(t, live, corev1.EventTypeNormal, "NamespaceAdopted", "Adopt", "Adopted existing namespace %s (annotated %s=%s)", live.Name, tenancyv1alpha1.AdoptAnnotation, t.Name)
	case migrating:
		log.FromContext(ctx).Info("Moved Namespace metadata to server-side apply", "namespace", live.Name)
	case wasReady(t, live.Name):
		log.FromContext(ctx).Info("Repaired Namespace metadata", "namespace", live.Name)
		r.Recorder.Eventf(t, live, corev1.EventTypeNormal, "Repaired", "Repair", "Restored labels and annotations of namespace %s", live.Name)
	}
	return nil
}

// removeAdoptAnnotation removes the adopt annotation from a namespace t now owns:
// the annotation hands a namespace to one Tenant, once, and left in place it would
// hand the namespace to any later Tenant of the same name. It runs after the
// namespace records t's UID, so that a failure in between never leaves the namespace
// claimed by no one; the test operation removes the annotation only if it still
// names t.
func (r *Reconciler) removeAdoptAnnotation(ctx context.Context, t *tenancyv1alpha1.Tenant, ns *corev1.Namespace) error {
	path := removeOp("annotations", tenancyv1alpha1.AdoptAnnotation).Path
	raw, err := json.Marshal([]patchOp{{Op: "test", Path: path, Value: t.Name}, {Op: "remove", Path: path}})
	if err != nil {
		return err
	}
	target := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	if err := r.Patch(ctx, target, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(labels.FieldManager)); err != nil {
		return err
	}
	log.FromContext(ctx).Info("Removed adopt annotation from adopted Namespace", "namespace", ns.Name)
	return nil
}

// legacyCleanup is the one-time migration of a namespace that carries
// legacyManagedKeysAnnotation: JSON patch operations that remove the keys it lists
// that want no longer has, and the annotation itself. A key that another field
// manager owns is someone else's now and stays. Keys Orderly still wants are left to
// the apply, which takes them over.
func legacyCleanup(live, want *corev1.Namespace) []patchOp {
	raw, ok := live.Annotations[legacyManagedKeysAnnotation]
	if !ok {
		return nil
	}
	var listed struct {
		Labels      []string `json:"labels"`
		Annotations []string `json:"annotations"`
	}
	_ = json.Unmarshal([]byte(raw), &listed) // a mangled value only loses the cleanup of keys no longer wanted
	others := ownedByOthers(live)
	var ops []patchOp
	for _, k := range slices.Compact(slices.Sorted(slices.Values(listed.Labels))) {
		_, wanted := want.Labels[k]
		_, present := live.Labels[k]
		if present && !wanted && !others.labels.Has(k) {
			ops = append(ops, removeOp("labels", k))
		}
	}
	for _, k := range slices.Compact(slices.Sorted(slices.Values(listed.Annotations))) {
		_, wanted := want.Annotations[k]
		_, present := live.Annotations[k]
		if present && !wanted && !others.annotations.Has(k) && k != legacyManagedKeysAnnotation {
			ops = append(ops, removeOp("annotations", k))
		}
	}
	return append(ops, removeOp("annotations", legacyManagedKeysAnnotation))
}

// ownedNamespaces lists the namespaces that belong to t: labelled with its name and
// recording its UID. A namespace labelled with t's name that records another UID was
// an earlier Tenant's of that name, and is not t's to release or delete.
func (r *Reconciler) ownedNamespaces(ctx context.Context, t *tenancyv1alpha1.Tenant) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := r.List(ctx, &list, tenantNamespaces(t.Name)); err != nil {
		return nil, fmt.Errorf("listing namespaces of tenant %q: %w", t.Name, err)
	}
	return slices.DeleteFunc(list.Items, func(ns corev1.Namespace) bool { return !ownedBy(&ns, t) }), nil
}

// releaseUnlisted lets go of namespaces still labelled as t's that its spec no longer
// lists, other than keep (its self-service namespaces).
func (r *Reconciler) releaseUnlisted(ctx context.Context, t *tenancyv1alpha1.Tenant, keep sets.Set[string]) error {
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	for i := range owned {
		listed := slices.ContainsFunc(t.Spec.Namespaces, func(n tenancyv1alpha1.TenantNamespace) bool { return n.Name == owned[i].Name })
		// While self-service is on, a self-service namespace stays even when this
		// reconcile could not list them (a failed write of the policy, say).
		selfService := t.Spec.SelfService != nil && owned[i].Annotations[tenancyv1alpha1.OriginAnnotation] == tenancyv1alpha1.OriginSelfService
		if listed || keep.Has(owned[i].Name) || selfService {
			continue
		}
		if err := r.letGo(ctx, t, &owned[i], true); err != nil {
			return err
		}
	}
	return nil
}

// letGo applies the deletion policy to a namespace the Tenant no longer wants (or that
// is being deleted along with the Tenant). Only namespaces Orderly created are ever
// deleted; everything else is released: Orderly's labels, annotations and (when
// removeChildren) its objects are removed, and workloads keep running.
func (r *Reconciler) letGo(ctx context.Context, t *tenancyv1alpha1.Tenant, ns *corev1.Namespace, removeChildren bool) error {
	if !ns.DeletionTimestamp.IsZero() || !ownedBy(ns, t) {
		return nil
	}
	defer r.converged.forgetNamespace(ns.Name)
	created := ns.Annotations[tenancyv1alpha1.OriginAnnotation] == tenancyv1alpha1.OriginCreated
	// A protected tenant's namespaces are never deleted: the admission policy would
	// refuse it anyway, and a namespace removed from the list is released instead.
	if t.Spec.DeletionPolicy == tenancyv1alpha1.DeletionPolicyDelete && created && !t.Spec.PreventDeletion {
		// The protection was lifted, but the Tenant may be going before a reconcile took
		// the label off: the admission policy would refuse the deletion for ever.
		if ns.Labels[tenancyv1alpha1.PreventDeletionLabel] != "" {
			if err := r.removeLabel(ctx, ns, tenancyv1alpha1.PreventDeletionLabel); client.IgnoreNotFound(err) != nil {
				return fmt.Errorf("lifting the deletion protection of namespace %q: %w", ns.Name, err)
			}
		}
		if err := r.Delete(ctx, ns, client.Preconditions{UID: &ns.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting namespace %q: %w", ns.Name, err)
		}
		log.FromContext(ctx).Info("Deleted Namespace of Tenant", "namespace", ns.Name)
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceDeleted", "Delete", "Deleted namespace %s (deletionPolicy Delete)", ns.Name)
		return nil
	}
	if removeChildren {
		if err := r.pruneChildren(ctx, t, ns.Name, nil); err != nil {
			return err
		}
		if err := r.pruneResources(ctx, t, ns.Name); err != nil {
			return err
		}
	}
	// Applying nothing removes every label and annotation that only Orderly set.
	none := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	wrote, err := applyOwned(ctx, r.Client, ns, none, extractNamespace, legacyCleanup(ns, none))
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing namespace %q: %w", ns.Name, err)
	}
	if wrote {
		log.FromContext(ctx).Info("Released Namespace from Tenant", "namespace", ns.Name)
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Release", "Released namespace %s: Orderly's labels and objects removed, workloads kept", ns.Name)
	}
	return nil
}

// removeLabel removes one label from a namespace with a JSON patch.
func (r *Reconciler) removeLabel(ctx context.Context, ns *corev1.Namespace, key string) error {
	raw, err := json.Marshal([]patchOp{removeOp("labels", key)})
	if err != nil {
		return err
	}
	target := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name}}
	return r.Patch(ctx, target, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(labels.FieldManager))
}
