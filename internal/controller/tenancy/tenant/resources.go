package tenant

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// spec.resources: objects a Tenant keeps in every one of its namespaces.
//
// Their kinds are whatever the platform allows, so they are not in Orderly's scheme:
// each reconcile reads them from the API server and writes only what differs. They
// are watched by metadata once a Tenant names them (resources_watch.go), so a hand
// edit or deletion is repaired at once; a Tenant with resources of a kind the manager
// may not watch is reconciled again every ResourcesResync instead, and its entry says
// so. A kind that is not served is waited for through the CRD watch. The platform's
// allow-list is the manager's RBAC: ClusterRoles labelled tenancy.orderly.dev/aggregate-to-tenant-resources
// (config/rbac/tenant_resources_role.yaml); a kind it may not write is reported.

// DefaultResourcesResync is how often a Tenant with spec.resources looks at its
// objects again.
const DefaultResourcesResync = 5 * time.Minute

// resourcesFieldManager applies spec.resources: its own field manager, so that a
// field dropped from an entry is dropped from the objects, and nothing else Orderly
// writes in those namespaces is affected.
const resourcesFieldManager = labels.FieldManager + "-tenant-resources"

// maxResourceRows is the API's MaxItems of spec.resources and status.resources.
const maxResourceRows = 32

// resourceHashAnnotation carries a digest of what Orderly last applied: an entry
// that no longer sets a field changes it, though the object still holds the field.
const resourceHashAnnotation = "tenancy.orderly.dev/resource-hash"

// Reasons of the ExtraResourcesApplied condition.
const (
	ReasonExtraResourcesApplied = "Applied"
	ReasonKindNotFound          = "KindNotFound"
	ReasonKindNotAllowed        = "KindNotAllowed"
	ReasonInvalidResource       = "InvalidResource"
	ReasonResourceConflict      = "ResourceConflict"
	ReasonResourceApplyFailed   = "ResourceApplyFailed"
	ReasonSourceNotFound        = "SourceNotFound"
	ReasonSourceNotShared       = "SourceNotShared"
	ReasonTooManySources        = "TooManySources"
)

// resourceOutcome is what reconcileResources found.
type resourceOutcome struct {
	entries []tenancyv1alpha1.TenantResourceStatus
	// reason and message of the condition when something is not applied; "" when all is.
	reason, message string
	// recheck: something waits on a person (a grant, someone else's object, a CRD
	// whose installation is not watched).
	recheck bool
	// unwatched: an entry's objects are of a kind the manager may not watch.
	unwatched bool
	// err is a failure worth retrying at once (with backoff).
	err error
}

// templateData is all a spec.resources template sees.
type templateData struct {
	Namespace string
	Tenant    string
}

// renderResource is the object of an entry with object for namespace ns of Tenant
// t: templates expanded, then stamped. Pure, so it is unit tested.
func renderResource(t *tenancyv1alpha1.Tenant, entry *tenancyv1alpha1.TenantResource, ns string) (*unstructured.Unstructured, error) {
	if entry.Object == nil {
		return nil, errors.New("the entry has no object")
	}
	var raw any
	if err := json.Unmarshal(entry.Object.Raw, &raw); err != nil {
		return nil, fmt.Errorf("object is not valid JSON: %w", err)
	}
	expanded, err := expandTemplates(raw, templateData{Namespace: ns, Tenant: t.Name}, "object")
	if err != nil {
		return nil, err
	}
	obj, ok := expanded.(map[string]any)
	if !ok {
		return nil, errors.New("object must be a JSON object")
	}
	u := &unstructured.Unstructured{Object: obj}
	meta, ok := obj["metadata"].(map[string]any)
	if !ok || u.GetName() == "" {
		return nil, errors.New("object.metadata.name is required: the object is applied by name in every namespace of the tenant")
	}
	if u.GetNamespace() != "" {
		return nil, errors.New("object.metadata.namespace must be left out: the object is put in every namespace of the tenant")
	}
	for _, field := range []string{"uid", "resourceVersion", "ownerReferences", "finalizers", "managedFields", "creationTimestamp", "deletionTimestamp"} {
		if _, ok := meta[field]; ok {
			return nil, fmt.Errorf("object.metadata.%s must be left out: it is set by the API server or by Orderly", field)
		}
	}
	for k := range u.GetLabels() {
		if reservedResourceKey(k) {
			return nil, fmt.Errorf("object.metadata.labels may not set %s: Orderly sets its own labels", k)
		}
	}
	delete(u.Object, "status")
	return stampResource(t, entry.Name, u, ns)
}

// reservedResourceKey reports whether a label key is Orderly's to set.
func reservedResourceKey(k string) bool {
	return k == labels.ManagedBy || strings.Contains(k, "orderly.dev/")
}

// copyResource is the copy of src for namespace ns of Tenant t (an entry with from):
// src's content (all but metadata and status) under src's name, with src's labels and
// annotations but Orderly's and kubectl's own, then stamped. Pure.
func copyResource(t *tenancyv1alpha1.Tenant, entry string, src *unstructured.Unstructured, ns string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range src.Object {
		if k != "metadata" && k != "status" {
			u.Object[k] = runtime.DeepCopyJSONValue(v)
		}
	}
	u.SetAPIVersion(src.GetAPIVersion())
	u.SetKind(src.GetKind())
	u.SetName(src.GetName())
	lbls := map[string]string{}
	for k, v := range src.GetLabels() {
		if !reservedResourceKey(k) {
			lbls[k] = v
		}
	}
	u.SetLabels(lbls)
	ann := map[string]string{}
	for k, v := range src.GetAnnotations() {
		if !strings.Contains(k, "orderly.dev/") && k != corev1.LastAppliedConfigAnnotation {
			ann[k] = v
		}
	}
	if len(ann) > 0 {
		u.SetAnnotations(ann)
	}
	return stampResource(t, entry, u, ns)
}

// stampResource puts u in namespace ns and marks it as Tenant t's, from the entry
// named entry: Orderly's labels, the controller reference, and the digest of all
// that in resourceHashAnnotation.
func stampResource(t *tenancyv1alpha1.Tenant, entry string, u *unstructured.Unstructured, ns string) (*unstructured.Unstructured, error) {
	u.SetNamespace(ns)
	lbls := u.GetLabels()
	if lbls == nil {
		lbls = map[string]string{}
	}
	lbls[labels.ManagedBy] = labels.ManagedByValue
	lbls[tenancyv1alpha1.TenantLabel] = t.Name
	lbls[tenancyv1alpha1.ResourceLabel] = entry
	u.SetLabels(lbls)
	u.SetOwnerReferences([]metav1.OwnerReference{{
		APIVersion: tenancyv1alpha1.GroupVersion.String(), Kind: "Tenant", Name: t.Name, UID: t.UID,
		Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true),
	}})
	digest, err := json.Marshal(u.Object)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(digest)
	ann := u.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann[resourceHashAnnotation] = hex.EncodeToString(sum[:12])
	u.SetAnnotations(ann)
	return u, nil
}

// maxTemplateBytes bounds what one templated string of an entry renders to: an
// object is stored whole in etcd, which takes at most 1.5 MiB.
const maxTemplateBytes = 1 << 20

// expandTemplates replaces {{ .Namespace }} and {{ .Tenant }} in every string value
// of v (not in keys); at names where in the object a failing template is. Templates
// run in the manager: no loops, bounded output (kit.ParseTemplate).
func expandTemplates(v any, data templateData, at string) (any, error) {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, val := range x {
			e, err := expandTemplates(val, data, at+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = e
		}
		return out, nil
	case []any:
		out := make([]any, len(x))
		for i, val := range x {
			e, err := expandTemplates(val, data, fmt.Sprintf("%s[%d]", at, i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case string:
		if !strings.Contains(x, "{{") {
			return x, nil
		}
		tpl, err := kit.ParseTemplate(at, x, maxTemplateBytes)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", at, err)
		}
		out, err := tpl.Execute(data)
		if errors.Is(err, kit.ErrTemplateTooLong) {
			return nil, fmt.Errorf("%s renders to more than %d bytes", at, maxTemplateBytes)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w (only {{ .Namespace }} and {{ .Tenant }} are known)", at, err)
		}
		return out, nil
	}
	return v, nil
}

// holds reports whether live holds every field of want with want's value: maps may
// have more keys, lists must match item by item. Numbers compare by value (JSON
// decoding and the API server's decoding give them different Go types).
func holds(live, want any) bool {
	switch w := want.(type) {
	case map[string]any:
		l, ok := live.(map[string]any)
		if !ok {
			return false
		}
		for k, wv := range w {
			lv, ok := l[k]
			if !ok || !holds(lv, wv) {
				return false
			}
		}
		return true
	case []any:
		l, ok := live.([]any)
		if !ok || len(l) != len(w) {
			return false
		}
		for i := range w {
			if !holds(l[i], w[i]) {
				return false
			}
		}
		return true
	}
	if a, ok := number(live); ok {
		b, ok := number(want)
		return ok && a == b
	}
	return reflect.DeepEqual(live, want)
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case float64:
		return n, true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

// isOursFor reports whether obj was applied by Tenant t from the entry named entry.
func isOursFor(obj metav1.Object, t *tenancyv1alpha1.Tenant, entry string) bool {
	l := obj.GetLabels()
	return l[labels.ManagedBy] == labels.ManagedByValue && l[tenancyv1alpha1.TenantLabel] == t.Name &&
		l[tenancyv1alpha1.ResourceLabel] == entry && metav1.IsControlledBy(obj, t)
}

// tenantNamespace is a namespace of the tenant and its labels.
type tenantNamespace struct {
	name   string
	labels map[string]string
}

// selectNamespaces are the namespaces sel matches; all of them when sel is nil.
func selectNamespaces(sel *metav1.LabelSelector, namespaces []tenantNamespace) ([]tenantNamespace, error) {
	if sel == nil {
		return namespaces, nil
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	var out []tenantNamespace
	for _, ns := range namespaces {
		if s.Matches(k8slabels.Set(ns.labels)) {
			out = append(out, ns)
		}
	}
	return out, nil
}

// namesOf are the names of namespaces.
func namesOf(namespaces []tenantNamespace) []string {
	out := make([]string, len(namespaces))
	for i, ns := range namespaces {
		out[i] = ns.name
	}
	return out
}

// resourceProblem is why an entry is not applied somewhere, by condition reason.
type resourceProblem struct {
	reason  string
	message string
	// watched: what would solve it (a CRD installed) brings the Tenant back.
	watched bool
}

// reconcileResources applies every spec.resources entry into namespaces (the
// tenant's namespaces that Orderly manages) and removes the objects of entries taken
// out of the list.
func (r *Reconciler) reconcileResources(ctx context.Context, t *tenancyv1alpha1.Tenant, names []string) resourceOutcome {
	var out resourceOutcome
	if len(t.Spec.Resources) == 0 && len(t.Status.Resources) == 0 {
		return out
	}
	// The namespaces' labels, for the entries' namespaceSelectors (namespaces are
	// cached whole).
	namespaces := make([]tenantNamespace, 0, len(names))
	for _, name := range names {
		var ns corev1.Namespace
		if err := r.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
			out.err = fmt.Errorf("reading namespace %q: %w", name, err)
			out.entries = t.Status.Resources
			return out
		}
		namespaces = append(namespaces, tenantNamespace{name: name, labels: ns.Labels})
	}
	var problems []resourceProblem
	declared := map[string]tenancyv1alpha1.TenantResourceStatus{}
	for i := range t.Spec.Resources {
		st, prob, unwatched, err := r.applyResource(ctx, t, &t.Spec.Resources[i], namespaces)
		if err != nil && out.err == nil {
			out.err = err
		}
		out.unwatched = out.unwatched || unwatched
		if prob != nil {
			problems = append(problems, *prob)
		}
		declared[st.Name] = st
		out.entries = append(out.entries, st)
	}
	// An entry taken out of the list, or whose object changed kind or name, leaves
	// objects behind: removed from every namespace, and reported until they are gone.
	for _, prev := range t.Status.Resources {
		now, ok := declared[prev.Name]
		if ok && now.APIVersion == "" {
			// Not known this time (the entry cannot be rendered): its objects stay, and
			// so does the record of what they are.
			i := slices.IndexFunc(out.entries, func(e tenancyv1alpha1.TenantResourceStatus) bool { return e.Name == prev.Name })
			out.entries[i].APIVersion, out.entries[i].Kind, out.entries[i].ObjectName, out.entries[i].ObjectNames = prev.APIVersion, prev.Kind, prev.ObjectName, prev.ObjectNames
			continue
		}
		if ok && sameObject(now, prev) {
			continue
		}
		left, err := r.removeResource(ctx, t, prev, names)
		if err != nil {
			if out.err == nil {
				out.err = err
			}
			// status.resources holds 32 rows: past that, a row that could not be
			// removed is dropped (its objects still go with the Tenant, by owner reference).
			if _, ok := declared[prev.Name]; !ok && len(out.entries) < maxResourceRows {
				prev.Applied, prev.Message = int32(left), fmt.Sprintf("removed from spec.resources; deleting its objects: %v", err)
				out.entries = append(out.entries, prev)
			}
		}
	}
	slices.SortFunc(out.entries, func(a, b tenancyv1alpha1.TenantResourceStatus) int { return strings.Compare(a.Name, b.Name) })
	if len(problems) > 0 {
		out.reason = problems[0].reason
		msgs := make([]string, 0, len(problems))
		for _, p := range problems {
			msgs = append(msgs, p.message)
			if p.reason != ReasonResourceApplyFailed && !p.watched {
				out.recheck = true
			}
		}
		out.message = strings.Join(msgs, "; ")
	}
	return out
}

func sameObject(a, b tenancyv1alpha1.TenantResourceStatus) bool {
	ga, _ := schema.ParseGroupVersion(a.APIVersion)
	gb, _ := schema.ParseGroupVersion(b.APIVersion)
	return ga.Group == gb.Group && a.Kind == b.Kind && a.ObjectName == b.ObjectName
}

// entryProblem is why an entry is not applied somewhere that only a person can fix
// (a grant, a CRD, the entry itself, someone else's object): reported, not retried.
// watched: the fix (a CRD installed) brings the Tenant back through a watch.
type entryProblem struct {
	reason, message string
	watched         bool
}

func (e *entryProblem) Error() string { return e.message }

func problemf(reason, format string, args ...any) error {
	return &entryProblem{reason: reason, message: fmt.Sprintf(format, args...)}
}

// objectNames are the names of the objects an entry's status row stands for.
func objectNames(st tenancyv1alpha1.TenantResourceStatus) []string {
	if len(st.ObjectNames) > 0 {
		return st.ObjectNames
	}
	if st.ObjectName != "" {
		return []string{st.ObjectName}
	}
	return nil
}

// applyResource keeps one entry's objects in every namespace. It returns the entry's
// status, the problem that keeps them from some namespaces (nil when none), whether
// its kind is one the manager may not watch (its objects are then repaired at the
// resync, and the status says so), and an error worth retrying.
func (r *Reconciler) applyResource(ctx context.Context, t *tenancyv1alpha1.Tenant, entry *tenancyv1alpha1.TenantResource, namespaces []tenantNamespace) (tenancyv1alpha1.TenantResourceStatus, *resourceProblem, bool, error) {
	st := tenancyv1alpha1.TenantResourceStatus{Name: entry.Name}
	var unwatched string
	err := r.keepEntry(ctx, t, entry, namespaces, &st, &unwatched)
	var prob *entryProblem
	switch {
	case errors.As(err, &prob):
		msg := fmt.Sprintf("resources[%s]: %s", entry.Name, prob.message)
		st.Message = kit.Truncate(msg, namespaceMessageLimit)
		return st, &resourceProblem{reason: prob.reason, message: msg, watched: prob.watched}, unwatched != "", nil
	case err != nil:
		st.Message = kit.Truncate(err.Error(), namespaceMessageLimit)
		return st, &resourceProblem{reason: ReasonResourceApplyFailed, message: err.Error()}, unwatched != "", err
	case unwatched != "":
		st.Message = kit.Truncate(fmt.Sprintf("applied; not watched (%s): hand edits are repaired every %s", unwatched, r.ResourcesResync), namespaceMessageLimit)
	}
	return st, nil, unwatched != "", nil
}

// keepEntry does applyResource's work, filling st as it learns; an *entryProblem is
// reported, any other error retried.
func (r *Reconciler) keepEntry(ctx context.Context, t *tenancyv1alpha1.Tenant, entry *tenancyv1alpha1.TenantResource, namespaces []tenantNamespace, st *tenancyv1alpha1.TenantResourceStatus, unwatched *string) error {
	// What the object is: the source's identity, or the object's as rendered for no
	// namespace in particular.
	if f := entry.From; f != nil {
		st.APIVersion, st.Kind, st.ObjectName = f.APIVersion, f.Kind, f.Name
	} else {
		probe, err := renderResource(t, entry, "probe")
		if err != nil {
			// The namespace's name in a template can make the probe's render fail where a
			// real one would not only through metadata.namespace, which is refused anyway.
			return problemf(ReasonInvalidResource, "%v", err)
		}
		st.APIVersion, st.Kind, st.ObjectName = probe.GetAPIVersion(), probe.GetKind(), probe.GetName()
	}
	gv, err := schema.ParseGroupVersion(st.APIVersion)
	if err != nil {
		return problemf(ReasonInvalidResource, "apiVersion %q: %v", st.APIVersion, err)
	}
	gvk := gv.WithKind(st.Kind)
	if f := entry.From; f != nil && f.Selector != nil {
		// Until the selection is read again, the row keeps the names copied before,
		// which a later removal needs.
		if i := slices.IndexFunc(t.Status.Resources, func(p tenancyv1alpha1.TenantResourceStatus) bool { return p.Name == entry.Name }); i >= 0 && sameObject(t.Status.Resources[i], *st) {
			st.ObjectNames = t.Status.Resources[i].ObjectNames
		}
	}
	mapping, err := r.RESTMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	switch {
	case meta.IsNoMatchError(err):
		return &entryProblem{reason: ReasonKindNotFound, watched: r.resourceWatches.waitFor(ctx, gvk.GroupKind(), t),
			message: fmt.Sprintf("the API server does not serve %s %s (is its CRD installed?)", gvk.Kind, gvk.GroupVersion())}
	case err != nil:
		return fmt.Errorf("finding the resource of %s: %w", gvk, err)
	case mapping.Scope.Name() != meta.RESTScopeNameNamespace:
		return problemf(ReasonInvalidResource, "%s is cluster-scoped: resources holds objects that live in namespaces", gvk.Kind)
	}
	*unwatched = r.resourceWatches.ensure(ctx, gvk, watchCopies)
	if entry.From != nil && *unwatched == "" {
		*unwatched = r.resourceWatches.ensure(ctx, gvk, watchSources)
	}
	// The objects to keep: the rendered one (nil: rendered per namespace), or the sources.
	sources := []*unstructured.Unstructured{nil}
	var tooMany error
	if f := entry.From; f != nil {
		if f.Selector != nil {
			sources, tooMany, err = r.selectSources(ctx, t, f, gvk, mapping, namespaces, st)
		} else {
			sources, err = r.namedSource(ctx, t, f, gvk, mapping, namespaces, *st)
		}
		if err != nil {
			return err
		}
	}
	targets, err := selectNamespaces(entry.NamespaceSelector, namespaces)
	if err != nil {
		return problemf(ReasonInvalidResource, "namespaceSelector: %v", err)
	}
	st.Namespaces = int32(len(targets))
	// Namespaces the selector no longer matches lose the entry's objects.
	others := slices.DeleteFunc(namesOf(namespaces), func(name string) bool {
		return slices.ContainsFunc(targets, func(ns tenantNamespace) bool { return ns.name == name })
	})
	if _, err := r.removeResource(ctx, t, *st, others); err != nil {
		return err
	}
	missing := map[string]bool{}
	var conflicts []string
	for _, src := range sources {
		done, clash, err := r.keepObject(ctx, t, entry, gvk, mapping, src, targets)
		if err != nil {
			return err
		}
		for _, ns := range targets {
			if !done[ns.name] {
				missing[ns.name] = true
			}
		}
		conflicts = append(conflicts, clash...)
	}
	st.Applied = st.Namespaces - int32(len(missing))
	if len(conflicts) > 0 {
		return problemf(ReasonResourceConflict, "%s %s and was not applied by this Tenant: left alone (delete or rename it to let Orderly apply the declared one)",
			gvk.Kind, strings.Join(conflicts, ", "))
	}
	return tooMany
}

// namedSource reads the source from.name names. One that is not shareable (any
// more) has the copies made while it was removed.
func (r *Reconciler) namedSource(ctx context.Context, t *tenancyv1alpha1.Tenant, f *tenancyv1alpha1.TenantResourceSource, gvk schema.GroupVersionKind, mapping *meta.RESTMapping, namespaces []tenantNamespace, st tenancyv1alpha1.TenantResourceStatus) ([]*unstructured.Unstructured, error) {
	src := &unstructured.Unstructured{}
	src.SetGroupVersionKind(gvk)
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: f.Namespace, Name: f.Name}, src)
	switch {
	case apierrors.IsNotFound(err):
		return nil, problemf(ReasonSourceNotFound, "the source %s %s/%s does not exist: its copies are kept as they are until it is back or the entry is removed", f.Kind, f.Namespace, f.Name)
	case apierrors.IsForbidden(err):
		return nil, problemf(ReasonKindNotAllowed, "the manager may not read %s in namespace %s (the source): the platform allows a kind with a ClusterRole labelled %s=true (docs/tenant.md)", mapping.Resource.GroupResource(), f.Namespace, tenancyv1alpha1.ResourcesAggregationLabel)
	case err != nil:
		return nil, fmt.Errorf("reading the source %s %s/%s: %w", f.Kind, f.Namespace, f.Name, err)
	case src.GetLabels()[tenancyv1alpha1.ShareableLabel] != "true":
		// Not shared, or no longer: copies made while it was are withdrawn too.
		if _, err := r.removeResource(ctx, t, st, namesOf(namespaces)); err != nil {
			return nil, err
		}
		return nil, problemf(ReasonSourceNotShared, "the source %s %s/%s is not labelled %s=true: its owner has not agreed to share it, so it is not copied (and copies made while it was are removed)", f.Kind, f.Namespace, f.Name, tenancyv1alpha1.ShareableLabel)
	}
	return []*unstructured.Unstructured{src}, nil
}

// selectSources lists the shareable objects from.selector matches, at most
// MaxSelectedSources by name, records their names in st, and removes the copies of
// sources that left the selection. tooMany reports a selection that was cut.
func (r *Reconciler) selectSources(ctx context.Context, t *tenancyv1alpha1.Tenant, f *tenancyv1alpha1.TenantResourceSource, gvk schema.GroupVersionKind, mapping *meta.RESTMapping, namespaces []tenantNamespace, st *tenancyv1alpha1.TenantResourceStatus) (sources []*unstructured.Unstructured, tooMany, err error) {
	sel, err := metav1.LabelSelectorAsSelector(f.Selector)
	if err != nil {
		return nil, nil, problemf(ReasonInvalidResource, "from.selector: %v", err)
	}
	shareable, err := k8slabels.NewRequirement(tenancyv1alpha1.ShareableLabel, selection.Equals, []string{"true"})
	if err != nil {
		return nil, nil, err
	}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	err = r.APIReader.List(ctx, list, client.InNamespace(f.Namespace), client.MatchingLabelsSelector{Selector: sel.Add(*shareable)})
	switch {
	case apierrors.IsForbidden(err):
		return nil, nil, problemf(ReasonKindNotAllowed, "the manager may not list %s in namespace %s (the sources): from.selector needs list on the kind besides get; the platform allows it with a ClusterRole labelled %s=true (docs/tenant.md)", mapping.Resource.GroupResource(), f.Namespace, tenancyv1alpha1.ResourcesAggregationLabel)
	case err != nil:
		return nil, nil, fmt.Errorf("listing the sources %s in %s: %w", f.Kind, f.Namespace, err)
	}
	items := list.Items
	slices.SortFunc(items, func(a, b unstructured.Unstructured) int { return strings.Compare(a.GetName(), b.GetName()) })
	if len(items) > tenancyv1alpha1.MaxSelectedSources {
		tooMany = problemf(ReasonTooManySources, "from.selector matches %d shareable %s in %s: only the first %d by name are copied; narrow the selector or split the entry",
			len(items), mapping.Resource.Resource, f.Namespace, tenancyv1alpha1.MaxSelectedSources)
		items = items[:tenancyv1alpha1.MaxSelectedSources]
	}
	names := make([]string, 0, len(items))
	for i := range items {
		sources = append(sources, &items[i])
		names = append(names, items[i].GetName())
	}
	// Sources that left the selection (relabelled, no longer shareable, deleted):
	// their copies go.
	gone := *st
	gone.ObjectName, gone.ObjectNames = "", slices.DeleteFunc(slices.Clone(st.ObjectNames), func(n string) bool { return slices.Contains(names, n) })
	if _, err := r.removeResource(ctx, t, gone, namesOf(namespaces)); err != nil {
		return nil, nil, err
	}
	st.ObjectNames = names
	return sources, tooMany, nil
}

// keepObject keeps one object of an entry (src's copy, or the entry's rendered object
// when src is nil) in targets. done holds the namespaces where it is as declared;
// clash describes where someone else's object of the name is in the way.
func (r *Reconciler) keepObject(ctx context.Context, t *tenancyv1alpha1.Tenant, entry *tenancyv1alpha1.TenantResource, gvk schema.GroupVersionKind, mapping *meta.RESTMapping, src *unstructured.Unstructured, targets []tenantNamespace) (done map[string]bool, clash []string, err error) {
	done = map[string]bool{}
	var conflicts []string
	var name string
	for _, target := range targets {
		ns := target.name
		var want *unstructured.Unstructured
		if src != nil {
			want, err = copyResource(t, entry.Name, src, ns)
		} else {
			want, err = renderResource(t, entry, ns)
		}
		if err != nil {
			return nil, nil, problemf(ReasonInvalidResource, "%v", err)
		}
		name = want.GetName()
		live := &unstructured.Unstructured{}
		live.SetGroupVersionKind(gvk)
		err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(want), live)
		switch {
		case apierrors.IsForbidden(err):
			return nil, nil, problemf(ReasonKindNotAllowed, "the manager may not read %s in namespace %s: the platform allows a kind with a ClusterRole labelled %s=true (docs/tenant.md)", mapping.Resource.GroupResource(), ns, tenancyv1alpha1.ResourcesAggregationLabel)
		case apierrors.IsNotFound(err):
			// A create, not an apply: it fails when someone made the object in the
			// meantime, whose object is then never written over.
			err = r.createResource(ctx, want)
		case err != nil:
			return nil, nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, ns, want.GetName(), err)
		case !isOursFor(live, t, entry.Name):
			conflicts = append(conflicts, ns)
			continue
		default:
			sameEntry := live.GetAnnotations()[resourceHashAnnotation] == want.GetAnnotations()[resourceHashAnnotation]
			if sameEntry && holds(live.Object, want.Object) {
				done[ns] = true
				continue
			}
			// Ours, and changed by the entry or by hand: applied over. live's UID makes
			// the apply a precondition on the object judged ours.
			want.SetUID(live.GetUID())
			err = r.Apply(ctx, client.ApplyConfigurationFromUnstructured(want), client.FieldOwner(resourcesFieldManager), client.ForceOwnership)
			if err == nil && sameEntry {
				driftRepairs.WithLabelValues(series.Values(client.ObjectKeyFromObject(t), gvk.Kind)...).Inc()
				r.Recorder.Eventf(t, nil, corev1.EventTypeNormal, "ResourceRepaired", "Apply", "Applied resources[%s] (%s %s) in namespace %s again: it differed from the declared object", entry.Name, gvk.Kind, want.GetName(), ns)
			}
		}
		switch {
		case apierrors.IsForbidden(err):
			return nil, nil, problemf(ReasonKindNotAllowed, "the manager may not write %s in namespace %s: %v; the platform allows a kind with a ClusterRole labelled %s=true (docs/tenant.md)", mapping.Resource.GroupResource(), ns, apiMessage(err), tenancyv1alpha1.ResourcesAggregationLabel)
		case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
			return nil, nil, problemf(ReasonInvalidResource, "the API server refused the object in namespace %s: %v", ns, apiMessage(err))
		case apierrors.IsConflict(err):
			// Made by someone else between the read and the apply, or changed since read.
			conflicts = append(conflicts, ns)
		case err != nil:
			return nil, nil, fmt.Errorf("applying %s %s/%s: %w", gvk.Kind, ns, want.GetName(), err)
		default:
			done[ns] = true
			log.FromContext(ctx).V(1).Info("Applied tenant resource", "entry", entry.Name, "kind", gvk.Kind, "namespace", ns, "name", want.GetName())
		}
	}
	if len(conflicts) > 0 {
		clash = []string{fmt.Sprintf("%s exists in %s", name, strings.Join(conflicts, ", "))}
	}
	return done, clash, nil
}

// createResource creates obj, then records the fields it set as applied rather than
// updated by resourcesFieldManager, so that a later apply that leaves a field out
// removes it (fields of an Update entry would stay). That second write failing costs
// only that: it is logged.
func (r *Reconciler) createResource(ctx context.Context, obj *unstructured.Unstructured) error {
	if err := r.Create(ctx, obj, client.FieldOwner(resourcesFieldManager)); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return apierrors.NewConflict(schema.GroupResource{Resource: obj.GetKind()}, obj.GetName(), err)
		}
		return err
	}
	raw, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(resourcesFieldManager), resourcesFieldManager)
	if err == nil && raw != nil {
		err = r.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(resourcesFieldManager))
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "Recording a created tenant resource as applied", "kind", obj.GetKind(), "namespace", obj.GetNamespace(), "name", obj.GetName())
	}
	return nil
}

// apiMessage is the API server's message of err, without the client's prefix.
func apiMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok {
		return s.Status().Message
	}
	return err.Error()
}

// removeResource deletes the objects of entry row prev from namespaces, where they
// are Orderly's. It returns in how many namespaces some remain when it fails.
func (r *Reconciler) removeResource(ctx context.Context, t *tenancyv1alpha1.Tenant, prev tenancyv1alpha1.TenantResourceStatus, namespaces []string) (int, error) {
	for i, ns := range namespaces {
		if err := r.deleteResourceIn(ctx, t, prev, ns); err != nil {
			return len(namespaces) - i, err
		}
	}
	return 0, nil
}

// deleteResourceIn deletes the objects of entry row prev from namespace ns, where
// they are Orderly's.
func (r *Reconciler) deleteResourceIn(ctx context.Context, t *tenancyv1alpha1.Tenant, prev tenancyv1alpha1.TenantResourceStatus, ns string) error {
	if prev.APIVersion == "" || prev.Kind == "" {
		return nil // never applied: it could not be rendered
	}
	for _, name := range objectNames(prev) {
		obj := &metav1.PartialObjectMetadata{}
		obj.SetGroupVersionKind(schema.FromAPIVersionAndKind(prev.APIVersion, prev.Kind))
		err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
		switch {
		case apierrors.IsNotFound(err) || meta.IsNoMatchError(err):
			continue
		case err != nil:
			return fmt.Errorf("reading %s %s/%s: %w", prev.Kind, ns, name, err)
		case !isOursFor(obj, t, prev.Name) || !obj.DeletionTimestamp.IsZero():
			continue
		}
		uid := obj.UID
		if err := r.Delete(ctx, obj, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %s %s/%s: %w", prev.Kind, ns, name, err)
		}
		log.FromContext(ctx).Info("Deleted tenant resource", "entry", prev.Name, "kind", prev.Kind, "namespace", ns, "name", name)
	}
	return nil
}

// pruneResources deletes every spec.resources object of t from namespace ns: the
// namespace is leaving the tenant.
func (r *Reconciler) pruneResources(ctx context.Context, t *tenancyv1alpha1.Tenant, ns string) error {
	for _, prev := range t.Status.Resources {
		if err := r.deleteResourceIn(ctx, t, prev, ns); err != nil {
			return err
		}
	}
	return nil
}

// setResourcesStatus writes the outcome of spec.resources into st.
func setResourcesStatus(t *tenancyv1alpha1.Tenant, st *tenancyv1alpha1.TenantStatus, out resourceOutcome) {
	st.Resources = out.entries
	conds := kit.ConditionsOf(&st.Conditions, t.Generation)
	if len(t.Spec.Resources) == 0 && len(out.entries) == 0 {
		conds.Remove(tenancyv1alpha1.ConditionExtraResourcesApplied)
		return
	}
	switch {
	case out.reason != "":
		conds.False(tenancyv1alpha1.ConditionExtraResourcesApplied, out.reason, kit.Truncate(out.message, 32*1024))
	case out.err != nil:
		conds.False(tenancyv1alpha1.ConditionExtraResourcesApplied, ReasonResourceApplyFailed, kit.Truncate(out.err.Error(), 32*1024))
	default:
		conds.True(tenancyv1alpha1.ConditionExtraResourcesApplied, ReasonExtraResourcesApplied,
			fmt.Sprintf("The %d object(s) of spec.resources are as declared in every namespace they are for", len(t.Spec.Resources)))
	}
}

// missingResources counts the entries' objects that are not as declared, one per
// entry and namespace it is for.
func missingResources(entries []tenancyv1alpha1.TenantResourceStatus) int {
	n := 0
	for _, e := range entries {
		n += max(int(e.Namespaces-e.Applied), 0)
	}
	return n
}

// resourceNamespaces are the namespaces spec.resources are applied to: those Orderly
// manages for the tenant (not those in conflict or still pending).
func resourceNamespaces(results []namespaceResult) []string {
	set := map[string]bool{}
	for _, res := range results {
		if res.state == tenancyv1alpha1.NamespaceReady || res.state == tenancyv1alpha1.NamespaceFailed {
			set[res.name] = true
		}
	}
	return slices.Sorted(maps.Keys(set))
}
