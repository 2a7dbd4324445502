package sleepschedule

import (
	"fmt"
	"strconv"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// A workload that another operator controls (a Kubeflow Notebook's StatefulSet, the
// Deployments of Strimzi or prometheus-operator) is put back by that operator as soon
// as it is scaled down: sleeping it would fight the operator, and Orderly would then
// find it changed by its owner, save nothing and warn. Such a workload is skipped and
// reported; its owner sleeps instead when its kind is one of targets.kinds (through
// that kind's own mechanism), otherwise the status says to name it there.

// builtInOwners are the kinds whose children are Orderly's own business: a workload
// they control is treated as if it had no controller.
var builtInOwners = map[schema.GroupKind]bool{
	{Group: "apps", Kind: powerv1alpha1.KindDeployment}:  true,
	{Group: "apps", Kind: powerv1alpha1.KindStatefulSet}: true,
	{Group: "batch", Kind: powerv1alpha1.KindCronJob}:    true,
}

// ownerSkip says why a workload the schedule would sleep is skipped because another
// operator controls it, "" when none does. asked are the kinds of targets.kinds.
func ownerSkip(o client.Object, asked map[schema.GroupKind]bool) string {
	ref := metav1.GetControllerOfNoCopy(o)
	if ref == nil {
		return ""
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	if err != nil {
		return ""
	}
	gk := gv.WithKind(ref.Kind).GroupKind()
	if builtInOwners[gk] {
		return ""
	}
	owner := fmt.Sprintf("%s %s/%s", kindName(gk), o.GetNamespace(), ref.Name)
	if asked[gk] {
		return fmt.Sprintf("owned by %s, which sleeps instead", owner)
	}
	return fmt.Sprintf("owned by %s; sleep the owner instead (targets.kinds)", owner)
}

// askedKinds are the kinds of targets.kinds.
func askedKinds(s *powerv1alpha1.SleepSchedule) map[schema.GroupKind]bool {
	out := map[schema.GroupKind]bool{}
	for _, k := range s.Spec.Targets.Kinds {
		out[schema.GroupKind{Group: k.Group, Kind: k.Kind}] = true
	}
	return out
}

// kedaPausedAnnotation, "true" on a ScaledObject, makes KEDA stop autoscaling its
// target and leave it at its current count (on a ScaledJob, start no new Jobs).
const kedaPausedAnnotation = powerv1alpha1.KEDAPausedAnnotation

// kedaUserPaused reports whether the ScaledObject's user paused it at its target's
// current count: paused "true" without paused-replicas (which wins when both are
// set). Such a ScaledObject keeps its target at zero after Orderly's
// paused-replicas "0" is removed, so the target's count is recorded and restored.
func kedaUserPaused(o client.Object) bool {
	if kedaPaused(o) != nil {
		return false
	}
	v, ok := o.GetAnnotations()[kedaPausedAnnotation]
	if !ok {
		return false
	}
	paused, err := strconv.ParseBool(v)
	return err == nil && paused
}

// kedaRestorable is the target of a user-paused ScaledObject as Orderly can scale it
// back: a Deployment or StatefulSet among ws (those listed in its namespace). The
// second result says why not when it cannot.
func kedaRestorable(so *unstructured.Unstructured, byTarget map[hpaKey]*workload) (*workload, string) {
	kind, name := kedaTarget(so)
	apiVersion, _, _ := unstructured.NestedString(so.Object, "spec", "scaleTargetRef", "apiVersion")
	gv, _ := schema.ParseGroupVersion(apiVersion)
	if (kind == powerv1alpha1.KindDeployment || kind == powerv1alpha1.KindStatefulSet) && (apiVersion == "" || gv.Group == "apps") {
		if t := byTarget[hpaKey{so.GetNamespace(), kind, name}]; t != nil {
			return t, ""
		}
		return nil, fmt.Sprintf("paused by its user with %s, and its target %s %s/%s is not found: Orderly could not scale it back after the wake", kedaPausedAnnotation, kind, so.GetNamespace(), name)
	}
	return nil, fmt.Sprintf("paused by its user with %s, so KEDA would keep its target %s %s/%s at zero after the wake, and Orderly scales back only Deployments and StatefulSets; pause it with %s instead",
		kedaPausedAnnotation, kind, so.GetNamespace(), name, powerv1alpha1.KEDAPausedReplicasAnnotation)
}
