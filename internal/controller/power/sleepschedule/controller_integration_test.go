//go:build integration

package sleepschedule

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// Times used with the fake clock. 2026-12-02 is a Wednesday.
var (
	wedNoon    = mustTime("2026-12-02T12:00:00Z")
	wedEvening = mustTime("2026-12-02T20:00:00Z")
	thuMorning = mustTime("2026-12-03T08:00:00Z")
	thuNoon    = mustTime("2026-12-03T12:00:00Z")
)

func mustTime(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

// scheduleBuilder builds test SleepSchedules.
type scheduleBuilder struct{ s *powerv1alpha1.SleepSchedule }

func newSchedule(name string, namespaces ...string) *scheduleBuilder {
	return &scheduleBuilder{s: &powerv1alpha1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: powerv1alpha1.SleepScheduleSpec{
			Namespaces: namespaces,
			Awake:      []powerv1alpha1.AwakeWindow{{Days: "Mon-Fri", From: "08:00", To: "18:00"}},
		},
	}}
}

func (b *scheduleBuilder) with(f func(s *powerv1alpha1.SleepScheduleSpec)) *scheduleBuilder {
	f(&b.s.Spec)
	return b
}

func (b *scheduleBuilder) create(t *testing.T) *powerv1alpha1.SleepSchedule {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), b.s)).To(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), b.s)
		// The finalizer wakes what the schedule holds asleep: wait for it while the
		// test's manager still runs.
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(b.s), &powerv1alpha1.SleepSchedule{}))
		}, timeout, poll).Should(BeTrue())
	})
	return b.s
}

func namespace(t *testing.T, name string, lbls map[string]string) {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}})).To(Succeed())
}

func podSpec() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "x"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "app:1",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}}},
	}
}

func deployment(t *testing.T, ns, name string, replicas int32, lbls map[string]string) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: podSpec()},
	}
	NewWithT(t).Expect(k.Create(context.Background(), d)).To(Succeed())
}

func statefulSet(t *testing.T, ns, name string, replicas int32) *appsv1.StatefulSet {
	t.Helper()
	s := &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       appsv1.StatefulSetSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, Template: podSpec()},
	}
	NewWithT(t).Expect(k.Create(context.Background(), s)).To(Succeed())
	return s
}

func cronJob(t *testing.T, ns, name string) *batchv1.CronJob {
	t.Helper()
	c := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: corev1.PodTemplateSpec{
			Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "job:1"}}}}}}},
	}
	NewWithT(t).Expect(k.Create(context.Background(), c)).To(Succeed())
	return c
}

func replicas(g Gomega, ns, name string) int32 {
	var d appsv1.Deployment
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return *d.Spec.Replicas
}

func getDeployment(g Gomega, ns, name string) *appsv1.Deployment {
	var d appsv1.Deployment
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return &d
}

func scaleTo(t *testing.T, ns, name string, n int32) {
	t.Helper()
	d := getDeployment(NewWithT(t), ns, name)
	patch := client.MergeFrom(d.DeepCopy())
	d.Spec.Replicas = &n
	NewWithT(t).Expect(k.Patch(context.Background(), d, patch)).To(Succeed())
}

func getSchedule(g Gomega, name string) *powerv1alpha1.SleepSchedule {
	var s powerv1alpha1.SleepSchedule
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &s)).To(Succeed())
	return &s
}

// poke makes the controller reconcile now, as a person would with kubectl annotate;
// the tests move the fake clock and then poke.
// at moves the schedule's clock to when, and waits until the schedule named name is in
// state with that many workloads asleep.
func at(t *testing.T, clk *clocktesting.FakePassiveClock, when time.Time, name string, state powerv1alpha1.SleepState, sleeping int32) *powerv1alpha1.SleepSchedule {
	t.Helper()
	clk.SetTime(when)
	poke(t, name)
	return waitState(t, name, state, sleeping)
}

func poke(t *testing.T, name string) {
	t.Helper()
	s := getSchedule(NewWithT(t), name)
	patch := client.MergeFrom(s.DeepCopy())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations["test/poke"] = time.Now().Format(time.RFC3339Nano)
	NewWithT(t).Expect(k.Patch(context.Background(), s, patch)).To(Succeed())
}

// setSpec changes a schedule's spec as a person would.
func setSpec(t *testing.T, name string, f func(s *powerv1alpha1.SleepScheduleSpec)) {
	t.Helper()
	eventually(t, func(g Gomega) {
		s := getSchedule(g, name)
		f(&s.Spec)
		g.Expect(k.Update(context.Background(), s)).To(Succeed())
	})
}

func waitState(t *testing.T, name string, state powerv1alpha1.SleepState, sleeping int32) *powerv1alpha1.SleepSchedule {
	t.Helper()
	var got *powerv1alpha1.SleepSchedule
	eventually(t, func(g Gomega) {
		got = getSchedule(g, name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.State).To(Equal(state))
		g.Expect(got.Status.SleepingWorkloads).To(Equal(sleeping))
	})
	return got
}

func condition(s *powerv1alpha1.SleepSchedule, typ string) *metav1.Condition {
	return meta.FindStatusCondition(s.Status.Conditions, typ)
}

func eventsFor(g Gomega, name, reason string) []string {
	var list eventsv1.EventList
	g.Expect(k.List(context.Background(), &list)).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "SleepSchedule" && e.Regarding.Name == name && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}

func TestValidationRefusesBadInput(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(s *powerv1alpha1.SleepScheduleSpec)
		wantMsg string
	}{
		{"unknown time zone", func(s *powerv1alpha1.SleepScheduleSpec) { s.TimeZone = "Mars/Olympus_Mons" }, "timeZone is not a known IANA time zone"},
		{"time zone that is not a name", func(s *powerv1alpha1.SleepScheduleSpec) { s.TimeZone = "Europe/Berlin; rm" }, "timeZone must be an IANA time zone name"},
		{"unknown day", func(s *powerv1alpha1.SleepScheduleSpec) { s.Awake[0].Days = "Mon-Fry" }, "days must be day names"},
		{"lowercase day", func(s *powerv1alpha1.SleepScheduleSpec) { s.Awake[0].Days = "mon" }, "days must be day names"},
		{"malformed from", func(s *powerv1alpha1.SleepScheduleSpec) { s.Awake[0].From = "8:00" }, "from must be a time HH:MM"},
		{"malformed to", func(s *powerv1alpha1.SleepScheduleSpec) { s.Awake[0].To = "18:60" }, "to must be a time HH:MM"},
		{"empty window", func(s *powerv1alpha1.SleepScheduleSpec) { s.Awake[0].To = s.Awake[0].From }, "an awake window must not be empty"},
		{"no namespaces", func(s *powerv1alpha1.SleepScheduleSpec) { s.Namespaces = nil }, "select namespaces with namespaceSelector, namespaces, or both"},
		{"bad holiday", func(s *powerv1alpha1.SleepScheduleSpec) { s.Holidays = []string{"2026-13-01"} }, "holidays must be dates YYYY-MM-DD"},
		{"negative sleepReplicas", func(s *powerv1alpha1.SleepScheduleSpec) { s.Targets.SleepReplicas = -1 }, "sleepReplicas"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := newSchedule("invalid", "somewhere").s
			tt.mutate(&s.Spec)
			err := k.Create(context.Background(), s)
			if err == nil {
				_ = k.Delete(context.Background(), s)
			}
			NewWithT(t).Expect(err).To(HaveOccurred())
			NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
			NewWithT(t).Expect(err.Error()).To(ContainSubstring(tt.wantMsg))
		})
	}
	t.Run("valid schedule with every field", func(t *testing.T) {
		s := newSchedule("valid-everything", "somewhere").with(func(s *powerv1alpha1.SleepScheduleSpec) {
			s.TimeZone = "America/Argentina/Buenos_Aires"
			s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
			s.Awake = append(s.Awake, powerv1alpha1.AwakeWindow{Days: "Fri-Mon,Wed", From: "22:00", To: "24:00"})
			s.Holidays = []string{"2026-12-25"}
			s.Exclude.Workloads = []powerv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "db"}}
			s.WakeUntil = &metav1.Time{Time: wedNoon}
			s.DryRun = true
		}).s
		NewWithT(t).Expect(k.Create(context.Background(), s)).To(Succeed())
		NewWithT(t).Expect(*s.Spec.Targets.Deployments).To(BeTrue(), "targets default to on")
		NewWithT(t).Expect(k.Delete(context.Background(), s)).To(Succeed())
	})
}

func TestSleepAndWakeRestoresExactly(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "sleep-wake"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 3, nil)
	deployment(t, ns, "api", 1, nil)
	deployment(t, ns, "db", 2, nil)                                          // excluded by name
	deployment(t, ns, "metrics", 2, map[string]string{"tier": "monitoring"}) // excluded by selector
	statefulSet(t, ns, "cache", 2)
	cj := cronJob(t, ns, "report")
	s := newSchedule("sleep-wake", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Exclude.Workloads = []powerv1alpha1.WorkloadRef{{Kind: "Deployment", Name: "db"}}
		s.Exclude.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "monitoring"}}
	}).create(t)

	got := waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	g := NewWithT(t)
	g.Expect(got.Status.NextTransition.Time).To(BeTemporally("==", mustTime("2026-12-02T18:00:00Z")))
	g.Expect(got.Status.Workloads).To(BeEquivalentTo(4), "%+v", got.Status)
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(3))

	// Evening: everything targeted goes to sleep.
	got = at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 4)
	g.Expect(got.Status.NextTransition.Time).To(BeTemporally("==", thuMorning))
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0))
	g.Expect(replicas(g, ns, "api")).To(BeEquivalentTo(0))
	g.Expect(replicas(g, ns, "db")).To(BeEquivalentTo(2), "excluded by name")
	g.Expect(replicas(g, ns, "metrics")).To(BeEquivalentTo(2), "excluded by selector")
	web := getDeployment(g, ns, "web")
	g.Expect(web.Labels).To(HaveKeyWithValue(powerv1alpha1.AsleepLabel, s.Name))
	g.Expect(web.Annotations[powerv1alpha1.SleepStateAnnotation]).To(MatchJSON(`{"replicas":3,"sleepReplicas":0}`))
	var sts appsv1.StatefulSet
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cache"}, &sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(0))
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(cj), cj)).To(Succeed())
	g.Expect(*cj.Spec.Suspend).To(BeTrue())
	// (3+1 Deployment pods + 2 StatefulSet pods) x 250m / 256Mi.
	g.Expect(got.Status.SavedRequests.Cpu().String()).To(Equal("1500m"))
	g.Expect(got.Status.SavedRequests.Memory().String()).To(Equal("1536Mi"))
	// One namespace: the whole of it, with the 3 workloads whose pods are saved (the
	// suspended CronJob runs no pods now, so it saves no requests but is asleep).
	g.Expect(got.Status.SavedByNamespace).To(HaveLen(1))
	g.Expect(got.Status.SavedByNamespace[0].Namespace).To(Equal(ns))
	g.Expect(got.Status.SavedByNamespace[0].SleepingWorkloads).To(BeEquivalentTo(4))
	g.Expect(got.Status.SavedByNamespace[0].SavedRequests.Cpu().String()).To(Equal("1500m"))
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.History).NotTo(BeEmpty())
		g.Expect(got.Status.History[0].Action).To(Equal(powerv1alpha1.ActionSleep))
		g.Expect(got.Status.History[0].Workloads).To(BeEquivalentTo(4))
	})
	g.Expect(condition(got, powerv1alpha1.ConditionReady).Reason).To(Equal(ReasonAsleep))
	eventually(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, "Slept")).NotTo(BeEmpty()) })

	// A workload created in a sleeping namespace goes to sleep too.
	deployment(t, ns, "late", 2, nil)
	eventually(t, func(g Gomega) { g.Expect(replicas(g, ns, "late")).To(BeEquivalentTo(0)) })
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 5)

	// Morning: everything comes back exactly as it was.
	got = at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(3))
	g.Expect(replicas(g, ns, "api")).To(BeEquivalentTo(1))
	g.Expect(replicas(g, ns, "late")).To(BeEquivalentTo(2))
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cache"}, &sts)).To(Succeed())
	g.Expect(*sts.Spec.Replicas).To(BeEquivalentTo(2))
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(cj), cj)).To(Succeed())
	g.Expect(*cj.Spec.Suspend).To(BeFalse())
	web = getDeployment(g, ns, "web")
	g.Expect(web.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(web.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
	g.Expect(got.Status.SavedRequests).To(BeEmpty())
	g.Expect(got.Status.SavedByNamespace).To(BeEmpty())
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.History[0].Action).To(Equal(powerv1alpha1.ActionWake))
		g.Expect(got.Status.History[0].Workloads).To(BeEquivalentTo(5))
		g.Expect(got.Status.History[1].Action).To(Equal(powerv1alpha1.ActionSleep))
	})
	// Nothing runs pods in envtest: the wake-up check names what is not ready.
	g.Expect(condition(got, powerv1alpha1.ConditionWorkloadsReady).Status).To(Equal(metav1.ConditionFalse))
	g.Expect(got.Status.NotReady).To(ContainElement("Deployment sleep-wake/web"))
}

func TestDaylightSavingTime(t *testing.T) {
	// Berlin moves its clocks forward on Sunday 2026-03-29: Friday's 18:00 is 17:00
	// UTC, Monday's 08:00 is 06:00 UTC.
	clk := clocktesting.NewFakePassiveClock(mustTime("2026-03-27T16:30:00Z"))
	startManager(t, clk)
	ns := "dst"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	s := newSchedule("dst", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) { s.TimeZone = "Europe/Berlin" }).create(t)
	got := waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	NewWithT(t).Expect(got.Status.NextTransition.Time).To(BeTemporally("==", mustTime("2026-03-27T17:00:00Z")))

	clk.SetTime(mustTime("2026-03-27T17:00:00Z"))
	poke(t, s.Name)
	got = waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	NewWithT(t).Expect(got.Status.NextTransition.Time).To(BeTemporally("==", mustTime("2026-03-30T06:00:00Z")))

	// 07:59 summer time on Monday is still asleep; 08:00 wakes.
	clk.SetTime(mustTime("2026-03-30T05:59:00Z"))
	poke(t, s.Name)
	consistently(t, func(g Gomega) { g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0)) })
	clk.SetTime(mustTime("2026-03-30T06:00:00Z"))
	poke(t, s.Name)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(2))
}

func TestRestartMidSleepAndMissedTransition(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	stop := startManager(t, clk)
	ns := "restart"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 4, nil)
	s := newSchedule("restart", ns).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)

	// The operator is down across 08:00; nothing it remembered survives.
	stop()
	clk.SetTime(thuNoon)
	consistently(t, func(g Gomega) { g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0)) })

	// A new manager catches up as soon as it runs, from what is on the workload.
	startManager(t, clk)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(4))
	// Delete while this manager runs: the first one's cleanup would run before.
	NewWithT(t).Expect(k.Delete(context.Background(), s)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{}))).To(BeTrue())
	})
}

func TestManualChangeWhileAsleepIsLeftAlone(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "manual"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 3, nil)
	deployment(t, ns, "api", 2, nil)
	s := newSchedule("manual", ns).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 2)

	// Someone needs the API tonight and scales it by hand.
	scaleTo(t, ns, "api", 1)
	var got *powerv1alpha1.SleepSchedule
	eventually(t, func(g Gomega) {
		got = getSchedule(g, s.Name)
		g.Expect(got.Status.LeftAlone).To(ConsistOf("Deployment manual/api"))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(1))
	})
	consistently(t, func(g Gomega) { g.Expect(replicas(g, ns, "api")).To(BeEquivalentTo(1)) })
	g := NewWithT(t)
	g.Expect(getDeployment(g, ns, "api").Annotations).To(HaveKeyWithValue(powerv1alpha1.LeftAloneAnnotation, "true"))
	g.Expect(condition(got, powerv1alpha1.ConditionReady).Message).To(ContainSubstring("left alone"))
	eventually(t, func(g Gomega) {
		g.Expect(strings.Join(eventsFor(g, s.Name, ReasonLeftAlone), "\n")).To(ContainSubstring("Deployment manual/api was changed by someone else"))
	})

	// Waking restores the other workload and keeps the owner's choice.
	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(3))
	g.Expect(replicas(g, ns, "api")).To(BeEquivalentTo(1))
	api := getDeployment(g, ns, "api")
	g.Expect(api.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(api.Annotations).NotTo(HaveKey(powerv1alpha1.LeftAloneAnnotation))
}

func TestTwoSchedulesOnOneNamespace(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "shared"
	namespace(t, ns, map[string]string{"env": "dev"})
	deployment(t, ns, "web", 2, nil)
	// The older schedule's name sorts after the newer one's, so that only ordering by
	// age gives it the namespace: the tie-break by name would give it to the newer.
	older := newSchedule("z-older", ns).create(t)
	waitState(t, older.Name, powerv1alpha1.StateAsleep, 1)
	// Creation timestamps have one-second resolution: wait until the clock (the API
	// server's, on this machine) is in a later second than the older one's creation.
	eventually(t, func(g Gomega) {
		g.Expect(time.Now()).To(BeTemporally(">=", older.CreationTimestamp.Add(time.Second)))
	})

	newer := newSchedule("a-newer").with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
		s.Awake = []powerv1alpha1.AwakeWindow{{Days: "Mon-Sun", From: "00:00", To: "24:00"}}
	}).create(t)
	NewWithT(t).Expect(newer.CreationTimestamp.After(older.CreationTimestamp.Time)).To(BeTrue(),
		"the schedules must differ in age for the test to tell ordering by age from ordering by name")
	eventually(t, func(g Gomega) {
		got := getSchedule(g, newer.Name)
		c := condition(got, powerv1alpha1.ConditionNamespaceConflict)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("shared (owned by z-older)"))
		g.Expect(condition(got, powerv1alpha1.ConditionReady).Reason).To(Equal(ReasonNamespaceConflict))
		g.Expect(got.Status.Namespaces).To(BeEquivalentTo(0))
	})
	// The newer schedule (always awake) does not wake what the older holds asleep.
	consistently(t, func(g Gomega) {
		g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0))
		g.Expect(getDeployment(g, ns, "web").Labels).To(HaveKeyWithValue(powerv1alpha1.AsleepLabel, "z-older"))
		g.Expect(condition(getSchedule(g, older.Name), powerv1alpha1.ConditionNamespaceConflict).Status).To(Equal(metav1.ConditionFalse))
	})
	eventually(t, func(g Gomega) { g.Expect(eventsFor(g, newer.Name, ReasonNamespaceConflict)).NotTo(BeEmpty()) })

	// Once the older schedule is gone, its workloads are woken and the newer owns the
	// namespace.
	NewWithT(t).Expect(k.Delete(context.Background(), older)).To(Succeed())
	eventually(t, func(g Gomega) {
		got := getSchedule(g, newer.Name)
		g.Expect(condition(got, powerv1alpha1.ConditionNamespaceConflict).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(got.Status.Namespaces).To(BeEquivalentTo(1))
		g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(2))
	})
}

// A reconcile that cannot read the namespaces or workloads says so in the status, and
// retries: otherwise the status of the last reconcile that could read them goes on
// saying that all is well.
func TestListFailureIsReported(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	var failing atomic.Pointer[string]
	env.StartManagerForTest(t, kit.Deps{Clock: clk}, []kit.Controller{withFailingLists(&failing)})
	ns := "list-fails"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	s := newSchedule("list-fails", ns).create(t)
	// Runs before the schedule's clean-up, which must list to wake what it holds.
	t.Cleanup(func() { failing.Store(nil) })
	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	NewWithT(t).Expect(condition(got, powerv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))

	for _, tt := range []struct {
		list    client.ObjectList
		wantMsg string
	}{
		{&corev1.NamespaceList{}, "listing namespaces"},
		{&appsv1.StatefulSetList{}, "listing StatefulSets"},
	} {
		kind := fmt.Sprintf("%T", tt.list)
		t.Run(kind, func(t *testing.T) {
			failing.Store(&kind)
			poke(t, s.Name)
			eventually(t, func(g Gomega) {
				got := getSchedule(g, s.Name)
				ready := condition(got, powerv1alpha1.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Reason).To(Equal(ReasonListFailed))
				g.Expect(ready.ObservedGeneration).To(Equal(got.Generation))
				g.Expect(ready.Message).To(ContainSubstring(tt.wantMsg))
				g.Expect(ready.Message).To(ContainSubstring("injected by the test"))
				g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAsleep), "the rest of the status is kept")
			})
			eventually(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, ReasonListFailed)).NotTo(BeEmpty()) })
			NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(0))

			// Once listing works again, the status says so by itself (backoff) or at
			// the next event.
			failing.Store(nil)
			poke(t, s.Name)
			eventually(t, func(g Gomega) {
				ready := condition(getSchedule(g, s.Name), powerv1alpha1.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
				g.Expect(ready.Reason).To(Equal(ReasonAsleep))
			})
		})
	}
}

// A selector the API server lets through but that cannot be used is reported as an
// invalid spec, changes nothing, and does not keep the schedule from waking what it
// holds asleep when it is deleted.
func TestUnusableSelectorIsReported(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "bad-selector"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	s := newSchedule("bad-selector", ns).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)

	// The operator In needs values.
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Exclude.Selector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}
	})
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		ready := condition(got, powerv1alpha1.ConditionReady)
		g.Expect(ready.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(ReasonInvalidSpec))
		g.Expect(ready.Message).To(ContainSubstring("exclude.selector"))
	})
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(0))

	NewWithT(t).Expect(k.Delete(context.Background(), s)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(2))
		g.Expect(apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{}))).To(BeTrue())
	})
}

func TestWakeUntilSuspendAndDryRun(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "ondemand"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	s := newSchedule("ondemand", ns).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)

	// Woken on demand for two hours.
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) {
		s.WakeUntil = &metav1.Time{Time: wedEvening.Add(2 * time.Hour)}
	})
	got := waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	NewWithT(t).Expect(got.Status.NextTransition.Time).To(BeTemporally("==", wedEvening.Add(2*time.Hour)))
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(2))
	// The wake ends by itself.
	at(t, clk, wedEvening.Add(2*time.Hour), s.Name, powerv1alpha1.StateAsleep, 1)

	// Suspended: the morning changes nothing.
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) { s.Suspend = true })
	clk.SetTime(thuNoon)
	poke(t, s.Name)
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(condition(got, powerv1alpha1.ConditionReady).Reason).To(Equal(ReasonSuspended))
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAwake))
	})
	consistently(t, func(g Gomega) { g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0)) })
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) { s.Suspend = false })
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(2))

	// Dry run: reports what would sleep, changes nothing.
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) { s.DryRun = true })
	clk.SetTime(mustTime("2026-12-03T19:00:00Z"))
	poke(t, s.Name)
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAsleep))
		g.Expect(got.Status.WouldSleep).To(BeEquivalentTo(1))
		g.Expect(condition(got, powerv1alpha1.ConditionReady).Reason).To(Equal(ReasonDryRun))
		g.Expect(got.Status.History[0].DryRun).To(BeTrue())
	})
	consistently(t, func(g Gomega) { g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(2)) })
}

func TestHPAIsPinnedAndRestored(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "hpa"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 4, nil)
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(int32(2)), MaxReplicas: 10,
		},
	}
	NewWithT(t).Expect(k.Create(context.Background(), hpa)).To(Succeed())
	s := newSchedule("hpa", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) { s.Targets.SleepReplicas = 1 }).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)

	at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 1)
	eventually(t, func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(hpa), hpa)).To(Succeed())
		g.Expect(*hpa.Spec.MinReplicas).To(BeEquivalentTo(1))
		g.Expect(hpa.Spec.MaxReplicas).To(BeEquivalentTo(1))
	})
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(1))

	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	eventually(t, func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(hpa), hpa)).To(Succeed())
		g.Expect(*hpa.Spec.MinReplicas).To(BeEquivalentTo(2))
		g.Expect(hpa.Spec.MaxReplicas).To(BeEquivalentTo(10))
		g.Expect(hpa.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	})
	NewWithT(t).Expect(replicas(NewWithT(t), ns, "web")).To(BeEquivalentTo(4))
}

func TestDeletingTheScheduleWakesEverything(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "deleted"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 3, nil)
	s := newSchedule("deleted", ns).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	eventually(t, func(g Gomega) { g.Expect(seriesOf(g, s.Name)).To(BeNumerically(">=", 5)) })
	NewWithT(t).Expect(k.Delete(context.Background(), s)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(3))
		g.Expect(apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{}))).To(BeTrue())
	})
	eventually(t, func(g Gomega) { g.Expect(seriesOf(g, s.Name)).To(BeZero(), "the metric series go with the schedule") })
}

// seriesOf counts the series of the SleepSchedule metrics that belong to the schedule name.
func seriesOf(g Gomega, name string) int {
	return testenv.SeriesOf(g, "orderly_sleepschedule_*", map[string]string{"schedule": name})
}

func TestRemovingANamespaceFromTheScheduleWakesIt(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	namespace(t, "sel-a", map[string]string{"sleep": "yes"})
	namespace(t, "sel-b", map[string]string{"sleep": "yes"})
	deployment(t, "sel-a", "web", 2, nil)
	deployment(t, "sel-b", "web", 2, nil)
	s := newSchedule("selector").with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"sleep": "yes"}}
	}).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 2)

	var nsB corev1.Namespace
	NewWithT(t).Expect(k.Get(context.Background(), client.ObjectKey{Name: "sel-b"}, &nsB)).To(Succeed())
	patch := client.MergeFrom(nsB.DeepCopy())
	nsB.Labels["sleep"] = "no"
	NewWithT(t).Expect(k.Patch(context.Background(), &nsB, patch)).To(Succeed())
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	NewWithT(t).Expect(replicas(NewWithT(t), "sel-b", "web")).To(BeEquivalentTo(2))
	NewWithT(t).Expect(replicas(NewWithT(t), "sel-a", "web")).To(BeEquivalentTo(0))
}
