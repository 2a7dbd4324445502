package sleepschedule

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func namesOf(reqs []reconcile.Request) []string {
	var out []string
	for _, r := range reqs {
		out = append(out, r.Name)
	}
	return out
}

// An event reconciles the schedules it concerns, not every schedule: with a schedule
// per namespace, a transition's thousands of workload writes reconciled every
// schedule for each of them.
func TestEventsMapToTheSchedulesTheyConcern(t *testing.T) {
	ctx := context.Background()
	byName := func(name string, ns ...string) *powerv1alpha1.SleepSchedule {
		return &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: powerv1alpha1.SleepScheduleSpec{Namespaces: ns}}
	}
	bySel := func(name string, lbls map[string]string) *powerv1alpha1.SleepSchedule {
		return &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: powerv1alpha1.SleepScheduleSpec{NamespaceSelector: &metav1.LabelSelector{MatchLabels: lbls}}}
	}
	objs := []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-a", Labels: map[string]string{"env": "dev"}}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-b"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-c", Labels: map[string]string{"env": "prod"}}},
		byName("names-a", "ns-a"),
		byName("names-b", "ns-b"),
		byName("names-ab", "ns-a", "ns-b"),
		bySel("dev", map[string]string{"env": "dev"}),
		bySel("staging", map[string]string{"env": "staging"}),
	}
	for i := range 50 {
		objs = append(objs, byName(fmt.Sprintf("unrelated-%02d", i), "elsewhere"))
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).
		WithIndex(&powerv1alpha1.SleepSchedule{}, namespaceIndex, indexNamespaces).Build()
	r := &Reconciler{Client: c}
	deploy := func(ns string, lbls map[string]string) *appsv1.Deployment {
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: lbls}}
	}
	tests := []struct {
		name string
		got  []reconcile.Request
		want []string
	}{
		{"workload in a namespace named and selected", r.forWorkload(ctx, deploy("ns-a", nil)), []string{"dev", "names-a", "names-ab"}},
		{"workload in a namespace named only", r.forWorkload(ctx, deploy("ns-b", nil)), []string{"names-ab", "names-b"}},
		{"workload held asleep by a schedule that no longer selects it", r.forWorkload(ctx, deploy("ns-c", map[string]string{powerv1alpha1.AsleepLabel: "names-b"})), []string{"names-b"}},
		{"workload in a namespace nobody selects", r.forWorkload(ctx, deploy("ns-c", nil)), nil},
		{"workload in a namespace not in the cache", r.forWorkload(ctx, deploy("gone", nil)), nil},
		{"namespace, by its labels", r.forNamespace(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-c", Labels: map[string]string{"env": "staging"}}}), []string{"staging"}},
		{"schedule: the others on its namespaces", r.forOtherSchedules(ctx, byName("names-a", "ns-a")), []string{"dev", "names-ab"}},
		{"schedule by selector: the others on what it selects", r.forOtherSchedules(ctx, bySel("dev", map[string]string{"env": "dev"})), []string{"names-a", "names-ab"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := namesOf(tt.got); !slices.Equal(got, tt.want) {
				t.Errorf("reconciles %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectionChangedPassesWhatDecidesOwnership(t *testing.T) {
	base := func() *powerv1alpha1.SleepSchedule {
		return &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: powerv1alpha1.SleepScheduleSpec{
			Namespaces:        []string{"a"},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}},
		}}
	}
	now := metav1.Now()
	tests := []struct {
		name   string
		mutate func(s *powerv1alpha1.SleepSchedule)
		want   bool
	}{
		{"wake on demand", func(s *powerv1alpha1.SleepSchedule) { s.Spec.WakeUntil = &now }, false},
		{"windows", func(s *powerv1alpha1.SleepSchedule) {
			s.Spec.Awake = []powerv1alpha1.AwakeWindow{{Days: "Mon", From: "08:00", To: "09:00"}}
		}, false},
		{"namespaces", func(s *powerv1alpha1.SleepSchedule) { s.Spec.Namespaces = append(s.Spec.Namespaces, "b") }, true},
		{"selector", func(s *powerv1alpha1.SleepSchedule) { s.Spec.NamespaceSelector.MatchLabels["env"] = "prod" }, true},
		{"deletion starts", func(s *powerv1alpha1.SleepSchedule) { s.DeletionTimestamp = &now }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := base()
			tt.mutate(n)
			if got := selectionChanged().Update(event.UpdateEvent{ObjectOld: base(), ObjectNew: n}); got != tt.want {
				t.Errorf("selectionChanged = %v, want %v", got, tt.want)
			}
		})
	}
	if !selectionChanged().Create(event.CreateEvent{Object: base()}) || !selectionChanged().Delete(event.DeleteEvent{Object: base()}) {
		t.Error("a schedule created or deleted changes who owns its namespaces")
	}
}

func TestIndexAsleep(t *testing.T) {
	for _, o := range []client.Object{&appsv1.Deployment{}, &appsv1.StatefulSet{}, &batchv1.CronJob{}, &autoscalingv2.HorizontalPodAutoscaler{}} {
		if got := indexAsleep(o); got != nil {
			t.Errorf("%T without the label: %v", o, got)
		}
		o.SetLabels(map[string]string{powerv1alpha1.AsleepLabel: "nights"})
		if got := indexAsleep(o); !slices.Equal(got, []string{"nights"}) {
			t.Errorf("%T: %v", o, got)
		}
	}
}

// delaysQueue records the delays of AddAfter; nothing else of the queue is used.
type delaysQueue struct {
	workqueue.TypedRateLimitingInterface[reconcile.Request]
	delays []time.Duration
}

func (q *delaysQueue) AddAfter(_ reconcile.Request, d time.Duration) { q.delays = append(q.delays, d) }

// A workload update that changed only its readiness reconciles later than one that
// changed its spec or metadata: the events of a settling cluster share fewer
// reconciles.
func TestDelayedWaitsLongerForReadinessOnly(t *testing.T) {
	one := func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: "nights"}}}
	}
	d := delayed{one}
	base := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web", Generation: 1, Labels: map[string]string{"app": "web"}}}
	ready := base.DeepCopy()
	ready.Status.ReadyReplicas = 1
	scaled := base.DeepCopy()
	scaled.Generation = 2
	relabeled := base.DeepCopy()
	relabeled.Labels = map[string]string{"app": "web", powerv1alpha1.AsleepLabel: "nights"}
	for _, tt := range []struct {
		name string
		new  *appsv1.Deployment
		want time.Duration
	}{
		{"readiness only", ready, readinessDelay},
		{"spec", scaled, eventDelay},
		{"labels", relabeled, eventDelay},
	} {
		q := &delaysQueue{}
		d.Update(context.Background(), event.UpdateEvent{ObjectOld: base, ObjectNew: tt.new}, q)
		if len(q.delays) == 0 || slices.ContainsFunc(q.delays, func(got time.Duration) bool { return got != tt.want }) {
			t.Errorf("%s: delays %v, want all %v", tt.name, q.delays, tt.want)
		}
	}
	q := &delaysQueue{}
	d.Create(context.Background(), event.CreateEvent{Object: base}, q)
	if !slices.Equal(q.delays, []time.Duration{eventDelay}) {
		t.Errorf("create: delays %v, want [%v]", q.delays, eventDelay)
	}
}
