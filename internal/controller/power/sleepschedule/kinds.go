package sleepschedule

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// The kinds of targets.kinds are not part of Orderly's scheme: they may not be
// installed, and the manager may not hold permissions on them. Each reconcile of a
// schedule that names some asks the API server (through a detector shared by every
// schedule) whether they are served and how they sleep, and lists their objects in
// its namespaces straight from the API server. Their objects are watched by metadata
// from the first schedule that names the kind (kit.KindWatches), so that a new object
// in a sleeping namespace, or an owner's change while asleep, brings the schedule back;
// a kind that is not served is waited for through the CRD watch. Only a kind the
// manager may not watch (or a problem no watch reports: a refused list, discovery
// failing) makes the schedule look again every KindsRecheck.

// DefaultKindsRecheck is how often a schedule looks at the kinds of targets.kinds again
// while one of them is not watched.
const DefaultKindsRecheck = 30 * time.Second

// kindMode is how a kind of targets.kinds sleeps.
type kindMode int

const (
	modeScale kindMode = iota + 1
	modePatch
	modeKEDA
)

// Reasons of the KindsAvailable condition.
const (
	ReasonKindsAvailable     = "KindsAvailable"
	ReasonKindNotFound       = "KindNotFound"
	ReasonNoScaleSubresource = "NoScaleSubresource"
	ReasonClusterScoped      = "ClusterScoped"
	ReasonForbidden          = "Forbidden"
	ReasonKindUnreadable     = "KindUnreadable"
)

// aggregationLabel is the label of the ClusterRoles whose rules the manager is granted
// on the kinds of targets.kinds (config/rbac/sleepschedule_kinds_role.yaml).
const aggregationLabel = "power.orderly.dev/aggregate-to-sleepschedule"

// Keys of sleep records of the kinds of targets.kinds, by mode (readRecord's kind).
const (
	recordScale = "\x00scale"
	recordPatch = "\x00patch"
	recordKEDA  = "\x00keda"
)

// extraKind is one entry of targets.kinds as the API server serves it.
type extraKind struct {
	spec     powerv1alpha1.SleepKind
	gk       schema.GroupKind
	version  string
	resource string
	mode     kindMode
	// name is how status and Events name the kind: Kind.group ("Rollout.argoproj.io").
	name string
}

func (k *extraKind) gvk() schema.GroupVersionKind { return k.gk.WithVersion(k.version) }

// resourceName is the kind's resource as RBAC names it (rollouts.argoproj.io).
func (k *extraKind) resourceName() string {
	return schema.GroupResource{Group: k.gk.Group, Resource: k.resource}.String()
}

// recordKind is the key under which its sleep records are read and checked.
func (k *extraKind) recordKind() string {
	switch k.mode {
	case modePatch:
		return recordPatch
	case modeKEDA:
		return recordKEDA
	}
	return recordScale
}

// kindProblem is why a kind of targets.kinds is skipped at this reconcile.
type kindProblem struct {
	kind, reason, message string
	// blocking problems leave objects asleep that cannot be woken (the kind is
	// served, but cannot be read or written): a schedule's deletion waits on them.
	blocking bool
	// gk is the kind, and waited true when it is not served and the CRD watch brings
	// the schedule back once it is.
	gk     schema.GroupKind
	waited bool
}

func kindName(gk schema.GroupKind) string { return gk.String() }

func isKEDA(gk schema.GroupKind) bool {
	return gk.Group == powerv1alpha1.KEDAGroup && gk.Kind == powerv1alpha1.KEDAScaledObjectKind
}

// knownPatches are how kinds Orderly knows sleep when a schedule declares no patch:
// through their operator's own pause annotation, restored exactly like any patch.
var knownPatches = map[schema.GroupKind]*powerv1alpha1.SleepPatch{
	{Group: powerv1alpha1.KEDAGroup, Kind: powerv1alpha1.KEDAScaledJobKind}: {
		Type: powerv1alpha1.MergePatchType,
		Fields: []powerv1alpha1.SleepField{{
			Path:  annotationsPointer + escapeSegment(powerv1alpha1.KEDAPausedAnnotation),
			Value: apiextensionsv1.JSON{Raw: []byte(`"true"`)},
		}},
	},
}

// resolveKinds finds how each kind of targets.kinds sleeps, and reports those that
// cannot.
func resolveKinds(specs []powerv1alpha1.SleepKind, info func(schema.GroupKind) (kit.KindInfo, error)) ([]*extraKind, []kindProblem) {
	var kinds []*extraKind
	var problems []kindProblem
	for _, sk := range specs {
		gk := schema.GroupKind{Group: sk.Group, Kind: sk.Kind}
		name := kindName(gk)
		in, err := info(gk)
		switch {
		case err != nil:
			problems = append(problems, kindProblem{kind: name, reason: ReasonKindUnreadable, message: err.Error(), blocking: true})
			continue
		case in.Version == "":
			problems = append(problems, kindProblem{kind: name, reason: ReasonKindNotFound, gk: gk,
				message: fmt.Sprintf("%s is not served by the API server (is its CRD installed?)", name)})
			continue
		case !in.Namespaced:
			problems = append(problems, kindProblem{kind: name, reason: ReasonClusterScoped,
				message: fmt.Sprintf("%s is cluster-scoped: only namespaced kinds sleep", name)})
			continue
		}
		k := &extraKind{spec: sk, gk: gk, version: in.Version, resource: in.Resource, name: name}
		switch {
		case sk.Patch != nil:
			k.mode = modePatch
		case knownPatches[gk] != nil:
			k.spec.Patch, k.mode = knownPatches[gk], modePatch
		case isKEDA(gk):
			k.mode = modeKEDA
		case in.Scale:
			k.mode = modeScale
		default:
			problems = append(problems, kindProblem{kind: name, reason: ReasonNoScaleSubresource,
				message: fmt.Sprintf("%s has no scale subresource: declare a patch for it", name)})
			continue
		}
		kinds = append(kinds, k)
	}
	return kinds, problems
}

// listProblem turns an error listing ek's objects into the problem reported.
func listProblem(ek *extraKind, where string, err error) kindProblem {
	switch {
	case apierrors.IsForbidden(err):
		return kindProblem{kind: ek.name, reason: ReasonForbidden, blocking: true,
			message: fmt.Sprintf("Orderly may not list %s %s: grant it with a ClusterRole labelled %s=true (docs/sleepschedule.md, Permissions)", ek.resourceName(), where, aggregationLabel)}
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		return kindProblem{kind: ek.name, reason: ReasonKindNotFound, message: fmt.Sprintf("%s is no longer served by the API server", ek.name)}
	}
	return kindProblem{kind: ek.name, reason: ReasonKindUnreadable, blocking: true, message: fmt.Sprintf("listing %s %s: %v", ek.resourceName(), where, err)}
}

// writeProblem names what a refused write of a kind of targets.kinds needs.
func writeProblem(w *workload) *kindProblem {
	if w.extra == nil || !apierrors.IsForbidden(w.err) {
		return nil
	}
	what := "patch " + w.extra.resourceName()
	if w.extra.mode == modeScale && strings.Contains(w.err.Error(), "/scale") {
		what = "get and patch " + w.extra.resource + "/scale (" + w.extra.gk.Group + ")"
	}
	return &kindProblem{kind: w.extra.name, reason: ReasonForbidden, blocking: true,
		message: fmt.Sprintf("Orderly may not %s: grant it with a ClusterRole labelled %s=true (docs/sleepschedule.md, Permissions)", what, aggregationLabel)}
}

// observeKinds lists the objects of the kinds of targets.kinds in the managed
// namespaces and those this schedule holds asleep anywhere, through add. KEDA
// ScaledObjects also name their targets, which are left to KEDA (kedaTargets).
func (r *Reconciler) observeKinds(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation, add func(*workload)) {
	if len(s.Spec.Targets.Kinds) == 0 {
		return
	}
	obs.hasKinds = true
	kinds, problems := resolveKinds(s.Spec.Targets.Kinds, r.kinds.Info)
	for i := range problems {
		if problems[i].reason == ReasonKindNotFound {
			problems[i].waited = r.waitForKind(ctx, problems[i].gk, s)
		}
	}
	obs.kindProblems = append(obs.kindProblems, problems...)
	for _, ek := range kinds {
		// Before the list: an object created between the two is seen by the watch.
		r.watchKind(ctx, ek)
		var objs []client.Object
		list := func(where string, opts ...client.ListOption) bool {
			got, err := r.listKind(ctx, ek, opts...)
			if err != nil {
				if meta.IsNoMatchError(err) || apierrors.IsNotFound(err) {
					r.kinds.Forget(ek.gk) // the CRD went: ask again
				}
				obs.kindProblems = append(obs.kindProblems, listProblem(ek, where, err))
				return false
			}
			objs = append(objs, got...)
			return true
		}
		ok := true
		for _, ns := range obs.namespaces {
			if ok = list("in namespace "+ns, client.InNamespace(ns)); !ok {
				break
			}
		}
		if ok {
			ok = list("in all namespaces (those this schedule holds asleep)", client.MatchingLabels{powerv1alpha1.AsleepLabel: s.Name})
		}
		if !ok {
			continue
		}
		for _, o := range objs {
			w := &workload{kind: ek.name, obj: o, extra: ek, ready: true}
			if err := r.observeObject(ctx, s, w); err != nil {
				obs.kindProblems = append(obs.kindProblems, kindProblem{kind: ek.name, reason: ReasonKindUnreadable, blocking: true,
					message: fmt.Sprintf("reading %s %s/%s: %v", ek.name, o.GetNamespace(), o.GetName(), err)})
				if apierrors.IsForbidden(err) {
					obs.kindProblems[len(obs.kindProblems)-1].reason = ReasonForbidden
					obs.kindProblems[len(obs.kindProblems)-1].message = fmt.Sprintf("Orderly may not get %s/scale (%s): grant it with a ClusterRole labelled %s=true (docs/sleepschedule.md, Permissions)", ek.resource, ek.gk.Group, aggregationLabel)
				}
				continue
			}
			if ek.mode == modeKEDA {
				if kind, name := kedaTarget(o.(*unstructured.Unstructured)); name != "" {
					obs.kedaTargets[hpaKey{o.GetNamespace(), kind, name}] = true
				}
			}
			add(w)
		}
	}
}

// listKind lists ek's objects straight from the API server: only their metadata for
// kinds that sleep through their scale subresource, whole otherwise.
func (r *Reconciler) listKind(ctx context.Context, ek *extraKind, opts ...client.ListOption) ([]client.Object, error) {
	listGVK := ek.gvk().GroupVersion().WithKind(ek.gk.Kind + "List")
	var out []client.Object
	if ek.mode == modeScale {
		var l metav1.PartialObjectMetadataList
		l.SetGroupVersionKind(listGVK)
		if err := r.apiReader().List(ctx, &l, opts...); err != nil {
			return nil, err
		}
		for i := range l.Items {
			l.Items[i].SetGroupVersionKind(ek.gvk())
			out = append(out, &l.Items[i])
		}
		return out, nil
	}
	var l unstructured.UnstructuredList
	l.SetGroupVersionKind(listGVK)
	if err := r.apiReader().List(ctx, &l, opts...); err != nil {
		return nil, err
	}
	for i := range l.Items {
		out = append(out, &l.Items[i])
	}
	return out, nil
}

// observeObject reads what deciding needs of an object of a kind of targets.kinds:
// its scale when this schedule holds it asleep (whether its owner changed it), the
// patched fields or KEDA's annotation otherwise (from the object listed).
func (r *Reconciler) observeObject(ctx context.Context, s *powerv1alpha1.SleepSchedule, w *workload) error {
	if w.extra.mode != modeScale || w.obj.GetLabels()[powerv1alpha1.AsleepLabel] != s.Name {
		return nil
	}
	sc, err := r.getScale(ctx, w)
	w.value, w.running = sc.replicas, sc.running
	return err
}

// scaleState is what an object's scale subresource says: the replicas asked for,
// how many run by the object's own status (its CRD's statusReplicasPath; 0 when the
// object's status does not say), and the object's resourceVersion.
type scaleState struct {
	replicas, running int32
	resourceVersion   string
}

// getScale reads the object's scale subresource.
func (r *Reconciler) getScale(ctx context.Context, w *workload) (scaleState, error) {
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(w.extra.gvk())
	obj.SetNamespace(w.obj.GetNamespace())
	obj.SetName(w.obj.GetName())
	scale := &unstructured.Unstructured{}
	if err := r.SubResource("scale").Get(ctx, obj, scale); err != nil {
		return scaleState{}, fmt.Errorf("reading the scale of %s: %w", w.id(), err)
	}
	replicas, _, err := unstructured.NestedInt64(scale.Object, "spec", "replicas")
	if err != nil {
		return scaleState{}, fmt.Errorf("reading the scale of %s: %w", w.id(), err)
	}
	running, _, err := unstructured.NestedInt64(scale.Object, "status", "replicas")
	if err != nil {
		return scaleState{}, fmt.Errorf("reading the scale of %s: %w", w.id(), err)
	}
	return scaleState{replicas: int32(replicas), running: int32(running), resourceVersion: scale.GetResourceVersion()}, nil
}

// kedaTarget is the kind and name of the workload a ScaledObject scales
// (spec.scaleTargetRef; kind Deployment unless it says otherwise).
func kedaTarget(u *unstructured.Unstructured) (string, string) {
	name, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "name")
	kind, _, _ := unstructured.NestedString(u.Object, "spec", "scaleTargetRef", "kind")
	return cmp.Or(kind, powerv1alpha1.KindDeployment), name
}

// kedaPaused is the ScaledObject's paused-replicas annotation, nil when it has none.
func kedaPaused(o client.Object) *string {
	if v, ok := o.GetAnnotations()[powerv1alpha1.KEDAPausedReplicasAnnotation]; ok {
		return &v
	}
	return nil
}

// kindsMessage says which kinds of targets.kinds cannot sleep, and why.
func kindsMessage(problems []kindProblem) string {
	seen := map[string]bool{}
	var parts []string
	for _, p := range problems {
		if key := p.kind + "\x00" + p.message; !seen[key] {
			seen[key] = true
			parts = append(parts, p.message)
		}
	}
	slices.Sort(parts)
	return strings.Join(parts, "; ")
}
