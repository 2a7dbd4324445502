package sleepschedule

import (
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestOwnerSkip(t *testing.T) {
	asked := map[schema.GroupKind]bool{{Group: "kafka.strimzi.io", Kind: "KafkaNodePool"}: true}
	ref := func(apiVersion, kind string, controller bool) metav1.OwnerReference {
		return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "x", UID: "u", Controller: ptr.To(controller)}
	}
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want string
	}{
		{"no owner: sleeps as before", nil, ""},
		{"an owner that is not the controller: sleeps as before", []metav1.OwnerReference{ref("kubeflow.org/v1", "Notebook", false)}, ""},
		{"a built-in kind Orderly handles", []metav1.OwnerReference{ref("apps/v1", "Deployment", true)}, ""},
		{"another operator's kind", []metav1.OwnerReference{ref("kubeflow.org/v1", "Notebook", true)},
			"owned by Notebook.kubeflow.org team/x; sleep the owner instead (targets.kinds)"},
		{"an owner whose kind the schedule sleeps", []metav1.OwnerReference{ref("kafka.strimzi.io/v1beta2", "KafkaNodePool", true)},
			"owned by KafkaNodePool.kafka.strimzi.io team/x, which sleeps instead"},
		{"the controller among others", []metav1.OwnerReference{ref("v1", "ConfigMap", false), ref("monitoring.coreos.com/v1", "Prometheus", true)},
			"owned by Prometheus.monitoring.coreos.com team/x; sleep the owner instead (targets.kinds)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "d", OwnerReferences: tt.refs}}
			if got := ownerSkip(d, asked); got != tt.want {
				t.Errorf("ownerSkip = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestKEDAUserPausedAndRestorable(t *testing.T) {
	so := func(ann map[string]string, targetRef map[string]any) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"scaleTargetRef": targetRef}}}
		u.SetNamespace("team")
		u.SetName("so")
		u.SetAnnotations(ann)
		return u
	}
	consumer := &workload{kind: powerv1alpha1.KindDeployment, value: 3}
	byTarget := map[hpaKey]*workload{{"team", powerv1alpha1.KindDeployment, "consumer"}: consumer}
	tests := []struct {
		name       string
		ann        map[string]string
		ref        map[string]any
		wantPaused bool
		wantTarget *workload
		wantWhy    string
	}{
		{"not paused", nil, map[string]any{"name": "consumer"}, false, nil, ""},
		{"paused-replicas: KEDA scales to it on waking", map[string]string{powerv1alpha1.KEDAPausedReplicasAnnotation: "1", kedaPausedAnnotation: "true"}, map[string]any{"name": "consumer"}, false, nil, ""},
		{"paused false", map[string]string{kedaPausedAnnotation: "false"}, map[string]any{"name": "consumer"}, false, nil, ""},
		{"paused at the count: a Deployment", map[string]string{kedaPausedAnnotation: "true"}, map[string]any{"name": "consumer"}, true, consumer, ""},
		{"paused at the count: apps/v1 named", map[string]string{kedaPausedAnnotation: "True"}, map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "name": "consumer"}, true, consumer, ""},
		{"paused at the count: target missing", map[string]string{kedaPausedAnnotation: "true"}, map[string]any{"name": "gone"}, true, nil, "target Deployment team/gone is not found"},
		{"paused at the count: a custom target", map[string]string{kedaPausedAnnotation: "true"}, map[string]any{"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout", "name": "r"}, true, nil,
			"KEDA would keep its target Rollout team/r at zero after the wake"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := so(tt.ann, tt.ref)
			if got := kedaUserPaused(u); got != tt.wantPaused {
				t.Fatalf("kedaUserPaused = %v, want %v", got, tt.wantPaused)
			}
			if !tt.wantPaused {
				return
			}
			target, why := kedaRestorable(u, byTarget)
			if target != tt.wantTarget || (tt.wantWhy == "") != (why == "") || !strings.Contains(why, tt.wantWhy) {
				t.Errorf("kedaRestorable = %v, %q; want %v, %q", target, why, tt.wantTarget, tt.wantWhy)
			}
		})
	}
}

// A wake that restored a user-paused ScaledObject but not yet its target is not taken
// for a change by its owner.
func TestDecideFinishesAKEDAWake(t *testing.T) {
	ek := &extraKind{mode: modeKEDA, gk: schema.GroupKind{Group: "keda.sh", Kind: "ScaledObject"}}
	u := &unstructured.Unstructured{}
	u.SetAnnotations(map[string]string{kedaPausedAnnotation: "true"})
	rec := &sleepRecord{Paused: ptr.To("true"), TargetKind: "Deployment", TargetName: "c", TargetReplicas: ptr.To(int32(3)), Waking: true}
	w := &workload{extra: ek, obj: u, asleepBy: "me", record: rec}
	if w.changedByOwner() {
		t.Error("a waking ScaledObject was taken for one changed by its owner")
	}
	if got := decide(w, "me"); got != actWake {
		t.Errorf("decide = %v, want actWake", got)
	}
}

func TestComputeStatusReportsSkippedWorkloadsAndReadsWell(t *testing.T) {
	s := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "me", Generation: 1}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web"}}
	lab := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "lab"}}
	obs := &observation{now: time.Unix(0, 0), state: powerv1alpha1.StateAsleep, namespaces: []string{"dev"},
		workloads: []*workload{
			{kind: "Deployment", obj: d, targeted: true, want: true, act: actSleep, value: 2},
			{kind: "StatefulSet", obj: lab, skip: "owned by Notebook.kubeflow.org dev/lab; sleep the owner instead (targets.kinds)", skipReason: ReasonOwnedByOperator},
		}}
	st := computeStatus(s, obs)
	r := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionReady)
	// No next transition: the message once read "Asleep no transition is scheduled".
	if want := "Asleep, with no transition scheduled: 1 of 1 workloads asleep in 1 namespaces; 1 skipped (see the WorkloadsSkipped condition)"; r == nil || r.Message != want {
		t.Errorf("Ready = %+v, want the message %q", r, want)
	}
	c := meta.FindStatusCondition(st.Conditions, ConditionWorkloadsSkipped)
	if want := "1 workload(s) are left awake and nothing is saved for them: StatefulSet dev/lab (owned by Notebook.kubeflow.org dev/lab; sleep the owner instead (targets.kinds))"; c == nil ||
		c.Status != metav1.ConditionTrue || c.Reason != ReasonOwnedByOperator || c.Message != want {
		t.Errorf("WorkloadsSkipped = %+v", c)
	}
	if st.SleepingWorkloads != 1 || st.Workloads != 1 {
		t.Errorf("sleeping %d of %d, want 1 of 1", st.SleepingWorkloads, st.Workloads)
	}

	obs.hasNext, obs.next = true, time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)
	obs.workloads = obs.workloads[:1]
	st = computeStatus(s, obs)
	if r := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionReady); r.Message != "Asleep until 2026-12-03T08:00:00Z: 1 of 1 workloads asleep in 1 namespaces" {
		t.Errorf("Ready message = %q", r.Message)
	}
	if c := meta.FindStatusCondition(st.Conditions, ConditionWorkloadsSkipped); c.Status != metav1.ConditionFalse || c.Reason != ReasonNoneSkipped {
		t.Errorf("WorkloadsSkipped = %+v", c)
	}
}

// The cache keeps a workload's controller owner reference (whether another operator
// controls it), and no other.
func TestTrimWorkloadKeepsTheControllerRef(t *testing.T) {
	d := fullDeployment()
	d.OwnerReferences = []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "cfg", UID: "c"},
		{APIVersion: "kubeflow.org/v1", Kind: "Notebook", Name: "lab", UID: "n", Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)},
	}
	out, err := trimWorkload(d)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*appsv1.Deployment).OwnerReferences
	want := []metav1.OwnerReference{{APIVersion: "kubeflow.org/v1", Kind: "Notebook", Name: "lab", UID: "n", Controller: ptr.To(true)}}
	if len(got) != 1 || got[0].APIVersion != want[0].APIVersion || got[0].Kind != want[0].Kind || got[0].Name != want[0].Name ||
		got[0].UID != want[0].UID || !*got[0].Controller || got[0].BlockOwnerDeletion != nil {
		t.Errorf("owner references %+v, want %+v", got, want)
	}
	if ownerSkip(out.(*appsv1.Deployment), nil) == "" {
		t.Error("the trimmed Deployment is not seen as another operator's")
	}
}
