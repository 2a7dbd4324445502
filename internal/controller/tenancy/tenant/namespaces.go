package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// managedKeysAnnotation records which namespace labels and annotations Orderly set,
// so that it can remove exactly those (and nothing a person added) later.
const managedKeysAnnotation = "tenancy.orderly.dev/managed-keys"

// pendingRecheck is how soon a namespace that is still terminating is looked at again.
const pendingRecheck = 5 * time.Second

// managedKeys is the value of managedKeysAnnotation.
type managedKeys struct {
	Labels      []string `json:"labels,omitempty"`
	Annotations []string `json:"annotations,omitempty"`
}

// namespaceResult is what reconciling one namespace found.
type namespaceResult struct {
	name    string
	created bool
	state   tenancyv1alpha1.NamespaceState
	message string
	err     error
}

// desiredNamespaceMeta is the labels and annotations Orderly sets on a tenant namespace.
func desiredNamespaceMeta(t *tenancyv1alpha1.Tenant, spec *tenancyv1alpha1.TenantNamespace) (map[string]string, map[string]string) {
	lbls := map[string]string{}
	for k, v := range spec.Labels {
		lbls[k] = v
	}
	lbls[tenancyv1alpha1.TenantLabel] = t.Name
	if t.Spec.CostCenter != "" {
		lbls[tenancyv1alpha1.CostCenterLabel] = t.Spec.CostCenter
	}
	annos := map[string]string{}
	for k, v := range spec.Annotations {
		annos[k] = v
	}
	return lbls, annos
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func encodeManagedKeys(lbls, annos map[string]string) string {
	b, _ := json.Marshal(managedKeys{Labels: sortedKeys(lbls), Annotations: sortedKeys(annos)})
	return string(b)
}

func decodeManagedKeys(ns *corev1.Namespace) managedKeys {
	var keys managedKeys
	if raw := ns.Annotations[managedKeysAnnotation]; raw != "" {
		_ = json.Unmarshal([]byte(raw), &keys) // a mangled value only loses cleanup of extra keys
	}
	return keys
}

// claimedBy reports whether the namespace may be managed by Tenant t: it is labelled
// as t's, a person annotated it for adoption by t, or it is t's but lost its label.
func claimedBy(ns *corev1.Namespace, t *tenancyv1alpha1.Tenant) bool {
	owner := ns.Labels[tenancyv1alpha1.TenantLabel]
	return owner == t.Name ||
		ns.Annotations[tenancyv1alpha1.AdoptAnnotation] == t.Name ||
		(owner == "" && ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] == string(t.UID))
}

// conflictMessage explains why a namespace is left alone and how to hand it over.
func conflictMessage(ns *corev1.Namespace, t *tenancyv1alpha1.Tenant) string {
	owner := "no tenant"
	if o := ns.Labels[tenancyv1alpha1.TenantLabel]; o != "" {
		owner = fmt.Sprintf("tenant %q", o)
	}
	return fmt.Sprintf("namespace %q already exists and belongs to %s; to hand it to this tenant, annotate it %s=%s",
		ns.Name, owner, tenancyv1alpha1.AdoptAnnotation, t.Name)
}

// reconcileNamespace creates or claims one namespace, keeps its metadata, and then
// converges the objects inside it.
func (r *Reconciler) reconcileNamespace(ctx context.Context, t *tenancyv1alpha1.Tenant, spec *tenancyv1alpha1.TenantNamespace) namespaceResult {
	res := namespaceResult{name: spec.Name, state: tenancyv1alpha1.NamespaceReady}
	lbls, annos := desiredNamespaceMeta(t, spec)

	var ns corev1.Namespace
	err := r.Get(ctx, client.ObjectKey{Name: spec.Name}, &ns)
	switch {
	case apierrors.IsNotFound(err):
		created, isNew, cerr := r.createNamespace(ctx, t, spec.Name, lbls, annos)
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
	if err := r.syncNamespaceMeta(ctx, t, &ns, lbls, annos); err != nil {
		return failed(res, fmt.Errorf("updating namespace %q: %w", ns.Name, err))
	}
	if msg, err := r.reconcileChildren(ctx, t, ns.Name); err != nil || msg != "" {
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
// someone made it first.
func (r *Reconciler) createNamespace(ctx context.Context, t *tenancyv1alpha1.Tenant, name string, lbls, annos map[string]string) (*corev1.Namespace, bool, error) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}, Annotations: map[string]string{}}}
	for k, v := range lbls {
		ns.Labels[k] = v
	}
	for k, v := range annos {
		ns.Annotations[k] = v
	}
	ns.Annotations[tenancyv1alpha1.OriginAnnotation] = tenancyv1alpha1.OriginCreated
	ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] = string(t.UID)
	ns.Annotations[managedKeysAnnotation] = encodeManagedKeys(lbls, annos)
	if err := r.Create(ctx, ns, client.FieldOwner(labels.FieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			// Someone (or our own earlier attempt, not yet in the cache) made it first:
			// judge the live object like any existing one.
			live := &corev1.Namespace{}
			if gerr := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, live); gerr != nil {
				return nil, false, gerr
			}
			return live, false, nil
		}
		return nil, false, err
	}
	log.FromContext(ctx).Info("Created Namespace for Tenant", "namespace", name)
	return ns, true, nil
}

// syncNamespaceMeta sets the labels and annotations Orderly owns and removes the ones
// it set before but no longer wants, in a single merge patch when anything differs.
func (r *Reconciler) syncNamespaceMeta(ctx context.Context, t *tenancyv1alpha1.Tenant, ns *corev1.Namespace, lbls, annos map[string]string) error {
	want := map[string]map[string]any{"labels": {}, "annotations": {}}
	for k, v := range lbls {
		if cur, ok := ns.Labels[k]; !ok || cur != v {
			want["labels"][k] = v
		}
	}
	for k, v := range annos {
		if cur, ok := ns.Annotations[k]; !ok || cur != v {
			want["annotations"][k] = v
		}
	}
	prev := decodeManagedKeys(ns)
	for _, k := range prev.Labels {
		if _, keep := lbls[k]; !keep {
			if _, present := ns.Labels[k]; present {
				want["labels"][k] = nil
			}
		}
	}
	for _, k := range prev.Annotations {
		if _, keep := annos[k]; !keep {
			if _, present := ns.Annotations[k]; present {
				want["annotations"][k] = nil
			}
		}
	}
	adopting := ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] != string(t.UID)
	if adopting {
		want["annotations"][tenancyv1alpha1.OwnerUIDAnnotation] = string(t.UID)
	}
	// Only a namespace this very Tenant created keeps origin "created": anything else
	// it now manages was adopted, and is therefore never deleted by Orderly.
	if origin := ns.Annotations[tenancyv1alpha1.OriginAnnotation]; adopting || origin == "" {
		if origin != tenancyv1alpha1.OriginAdopted {
			want["annotations"][tenancyv1alpha1.OriginAnnotation] = tenancyv1alpha1.OriginAdopted
		}
	}
	if keys := encodeManagedKeys(lbls, annos); ns.Annotations[managedKeysAnnotation] != keys {
		want["annotations"][managedKeysAnnotation] = keys
	}
	if len(want["labels"]) == 0 && len(want["annotations"]) == 0 {
		return nil
	}
	if err := r.patchNamespaceMeta(ctx, ns, want); err != nil {
		return err
	}
	switch {
	case adopting:
		log.FromContext(ctx).Info("Adopted Namespace into Tenant", "namespace", ns.Name)
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceAdopted", "Adopt", "Adopted existing namespace %s (annotated %s=%s)", ns.Name, tenancyv1alpha1.AdoptAnnotation, t.Name)
	case t.Status.ObservedGeneration == t.Generation:
		log.FromContext(ctx).Info("Repaired Namespace metadata", "namespace", ns.Name)
		r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "Repaired", "Repair", "Restored labels and annotations of namespace %s", ns.Name)
	}
	return nil
}

func (r *Reconciler) patchNamespaceMeta(ctx context.Context, ns *corev1.Namespace, meta map[string]map[string]any) error {
	body := map[string]any{"metadata": map[string]any{}}
	for field, values := range meta {
		if len(values) > 0 {
			body["metadata"].(map[string]any)[field] = values
		}
	}
	raw, err := json.Marshal(body)
	if err != nil {
		return err
	}
	return r.Patch(ctx, ns, client.RawPatch(types.MergePatchType, raw), client.FieldOwner(labels.FieldManager))
}

// ownedNamespaces lists the namespaces labelled as belonging to t.
func (r *Reconciler) ownedNamespaces(ctx context.Context, t *tenancyv1alpha1.Tenant) ([]corev1.Namespace, error) {
	var list corev1.NamespaceList
	if err := r.List(ctx, &list, client.MatchingLabels{tenancyv1alpha1.TenantLabel: t.Name}); err != nil {
		return nil, fmt.Errorf("listing namespaces of tenant %q: %w", t.Name, err)
	}
	return list.Items, nil
}

// releaseUnlisted lets go of namespaces still labelled as t's that its spec no longer lists.
func (r *Reconciler) releaseUnlisted(ctx context.Context, t *tenancyv1alpha1.Tenant) error {
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	for i := range owned {
		listed := slices.ContainsFunc(t.Spec.Namespaces, func(n tenancyv1alpha1.TenantNamespace) bool { return n.Name == owned[i].Name })
		if listed {
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
	if !ns.DeletionTimestamp.IsZero() {
		return nil
	}
	created := ns.Annotations[tenancyv1alpha1.OriginAnnotation] == tenancyv1alpha1.OriginCreated
	if t.Spec.DeletionPolicy == tenancyv1alpha1.DeletionPolicyDelete && created {
		if err := r.Delete(ctx, ns); client.IgnoreNotFound(err) != nil {
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
	}
	keys := decodeManagedKeys(ns)
	strip := map[string]map[string]any{"labels": {}, "annotations": {}}
	for _, k := range append(keys.Labels, tenancyv1alpha1.TenantLabel) {
		if _, ok := ns.Labels[k]; ok {
			strip["labels"][k] = nil
		}
	}
	if ns.Labels[labels.ManagedBy] == labels.ManagedByValue {
		strip["labels"][labels.ManagedBy] = nil
	}
	for _, k := range append(keys.Annotations, tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OwnerUIDAnnotation, managedKeysAnnotation) {
		if _, ok := ns.Annotations[k]; ok {
			strip["annotations"][k] = nil
		}
	}
	if err := r.patchNamespaceMeta(ctx, ns, strip); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("releasing namespace %q: %w", ns.Name, err)
	}
	log.FromContext(ctx).Info("Released Namespace from Tenant", "namespace", ns.Name)
	r.Recorder.Eventf(t, ns, corev1.EventTypeNormal, "NamespaceReleased", "Release", "Released namespace %s: Orderly's labels and objects removed, workloads kept", ns.Name)
	return nil
}
