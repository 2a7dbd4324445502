//go:build integration

package sleepschedule

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus/testutil"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// Tests of SleepSchedule against the ways other operators behave (issue 42).

var (
	notebookGVK  = schema.GroupVersionKind{Group: "kubeflow.org", Version: "v1", Kind: "Notebook"}
	scaledJobGVK = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledJob"}
)

// A ScaledObject its user paused with autoscaling.keda.sh/paused: "true" sleeps like
// any other (paused-replicas "0" on top), and wakes with its annotations exactly as
// they were and its target back at the count it was paused at: KEDA, still paused
// by its user, would otherwise keep the target at zero. A user-paused ScaledObject
// whose target Orderly cannot scale back is not slept, and the status says why.
//
// KEDA does not run here: the test does what it would do. Under paused-replicas it
// scales the target to that count (the test scales it to 0); under paused: "true"
// alone it leaves the target at its current count (the test does nothing).
func TestUserPausedScaledObjectWakesAtItsCount(t *testing.T) {
	installTestKinds(t)
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "keda-paused"
	namespace(t, ns, nil)
	deployment(t, ns, "consumer", 3, nil)
	deployment(t, ns, "reporter", 2, nil)
	custom(t, widgetGVK, ns, `{metadata: {name: gauge}, spec: {replicas: 2}}`)
	custom(t, kedaGVK, ns, `{metadata: {name: consumer, annotations: {autoscaling.keda.sh/paused: "true", team: payments}}, spec: {scaleTargetRef: {name: consumer}, `+kedaTrigger+`}}`)
	custom(t, kedaGVK, ns, `{metadata: {name: reporter}, spec: {scaleTargetRef: {name: reporter}, `+kedaTrigger+`}}`)
	custom(t, kedaGVK, ns, `{metadata: {name: gauge, annotations: {autoscaling.keda.sh/paused: "true"}}, spec: {scaleTargetRef: {apiVersion: scale.sleep.test/v1, kind: Widget, name: gauge}, `+kedaTrigger+`}}`)
	s := newSchedule("keda-paused", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: kedaGVK.Group, Kind: kedaGVK.Kind}}
	}).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)

	got := at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 2)
	g := NewWithT(t)
	for _, name := range []string{"consumer", "reporter"} {
		g.Expect(getCustom(g, kedaGVK, ns, name).GetAnnotations()).To(HaveKeyWithValue(powerv1alpha1.KEDAPausedReplicasAnnotation, "0"), name)
	}
	g.Expect(getCustom(g, kedaGVK, ns, "consumer").GetAnnotations()).To(HaveKeyWithValue("autoscaling.keda.sh/paused", "true"))
	// The Widget target cannot be scaled back by Orderly: its ScaledObject is left as it is.
	gauge := getCustom(g, kedaGVK, ns, "gauge")
	g.Expect(gauge.GetAnnotations()).To(Equal(map[string]string{"autoscaling.keda.sh/paused": "true"}))
	g.Expect(gauge.GetLabels()).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	skipped := condition(got, ConditionWorkloadsSkipped)
	g.Expect(skipped).NotTo(BeNil())
	g.Expect(skipped.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(skipped.Message).To(ContainSubstring("ScaledObject.keda.sh keda-paused/gauge (paused by its user with autoscaling.keda.sh/paused"))
	g.Expect(skipped.Message).To(ContainSubstring("Widget"))
	eventually(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, skipped.Reason)).NotTo(BeEmpty()) })

	// KEDA obeys paused-replicas: both targets go to zero.
	scaleTo(t, ns, "consumer", 0)
	scaleTo(t, ns, "reporter", 0)

	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	eventually(t, func(g Gomega) {
		consumer := getCustom(g, kedaGVK, ns, "consumer")
		g.Expect(consumer.GetAnnotations()).To(Equal(map[string]string{"autoscaling.keda.sh/paused": "true", "team": "payments"}), "the user's annotations exactly")
		g.Expect(consumer.GetLabels()).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
		// KEDA, paused at the current count, would leave it at zero: Orderly puts back
		// the count the user paused it at.
		g.Expect(replicas(g, ns, "consumer")).To(BeEquivalentTo(3))
		g.Expect(getCustom(g, kedaGVK, ns, "reporter").GetAnnotations()).To(BeEmpty())
	})
	// Not paused by its user: KEDA autoscales it again, Orderly does not touch it.
	g.Expect(replicas(g, ns, "reporter")).To(BeEquivalentTo(0))
	g.Expect(getDeployment(g, ns, "consumer").Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
}

// A wake of a user-paused ScaledObject that stopped after its annotations were
// restored (its record marked waking, as a manager stopped between the requests leaves it) is
// finished by the next reconcile: its target is scaled back and its record removed,
// and it is not taken for a ScaledObject its owner changed.
func TestInterruptedKEDAWakeIsFinished(t *testing.T) {
	installTestKinds(t)
	startManager(t, clocktesting.NewFakePassiveClock(thuMorning))
	ns := "keda-waking"
	namespace(t, ns, nil)
	deployment(t, ns, "consumer", 0, nil)
	custom(t, kedaGVK, ns, `{metadata: {name: consumer, labels: {power.orderly.dev/asleep: keda-waking},
  annotations: {autoscaling.keda.sh/paused: "true", power.orderly.dev/sleep-state: '{"paused":"true","targetKind":"Deployment","targetName":"consumer","targetReplicas":4,"waking":true}'}},
  spec: {scaleTargetRef: {name: consumer}, `+kedaTrigger+`}}`)
	s := newSchedule("keda-waking", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: kedaGVK.Group, Kind: kedaGVK.Kind}}
	}).create(t)
	got := waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	eventually(t, func(g Gomega) {
		g.Expect(replicas(g, ns, "consumer")).To(BeEquivalentTo(4))
		so := getCustom(g, kedaGVK, ns, "consumer")
		g.Expect(so.GetAnnotations()).To(Equal(map[string]string{"autoscaling.keda.sh/paused": "true"}))
		g.Expect(so.GetLabels()).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	})
	g := NewWithT(t)
	g.Expect(got.Status.LeftAlone).To(BeEmpty())
	g.Expect(eventsFor(g, s.Name, ReasonLeftAlone)).To(BeEmpty())
}

// ownedBy makes owner the controller of the workload, as an operator that creates it
// does.
func ownedBy(t *testing.T, obj client.Object, owner *unstructured.Unstructured, controller bool) {
	t.Helper()
	eventually(t, func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		obj.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: owner.GetAPIVersion(), Kind: owner.GetKind(), Name: owner.GetName(),
			UID: owner.GetUID(), Controller: ptr.To(controller), BlockOwnerDeletion: ptr.To(true)}})
		g.Expect(k.Update(context.Background(), obj)).To(Succeed())
	})
}

// A workload that another operator controls (a controller owner reference to a
// custom resource) is not scaled underneath that operator: it is skipped and
// reported, and nothing is saved for it; when its owner's kind is one of the
// schedule's kinds, the owner sleeps instead. Workloads without a controller owner
// sleep as before.
func TestWorkloadsOwnedByAnotherOperatorAreSkipped(t *testing.T) {
	installTestKinds(t)
	installCRDFile(t, notebookCRD)
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "owned"
	namespace(t, ns, nil)
	lab := custom(t, notebookGVK, ns, `{metadata: {name: lab}, spec: {template: {spec: {containers: [{name: notebook}]}}}}`)
	pool := custom(t, widgetGVK, ns, `{metadata: {name: pool}, spec: {replicas: 3}}`)
	labSet := statefulSet(t, ns, "lab", 1)
	ownedBy(t, labSet, lab, true)
	deployment(t, ns, "pool-broker", 2, nil)
	ownedBy(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "pool-broker"}}, pool, true)
	deployment(t, ns, "referenced", 2, nil) // an owner reference that is not its controller
	ownedBy(t, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "referenced"}}, lab, false)
	deployment(t, ns, "plain", 2, nil)
	s := newSchedule("owned", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: widgetGVK.Group, Kind: widgetGVK.Kind}}
	}).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)

	clk.SetTime(wedEvening)
	poke(t, s.Name)
	// plain, referenced and the Widget pool; not the StatefulSet of the Notebook nor
	// the Deployment of the Widget.
	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 3)
	g := NewWithT(t)
	g.Expect(got.Status.Workloads).To(BeEquivalentTo(3), "%+v", got.Status)
	g.Expect(replicas(g, ns, "plain")).To(BeEquivalentTo(0))
	g.Expect(replicas(g, ns, "referenced")).To(BeEquivalentTo(0))
	g.Expect(getCustom(g, widgetGVK, ns, "pool").Object["spec"]).To(Equal(map[string]any{"replicas": int64(0)}), "the owner sleeps instead")
	broker := getDeployment(g, ns, "pool-broker")
	g.Expect(*broker.Spec.Replicas).To(BeEquivalentTo(2))
	g.Expect(broker.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(broker.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
	var st appsv1.StatefulSet
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(labSet), &st)).To(Succeed())
	g.Expect(*st.Spec.Replicas).To(BeEquivalentTo(1))
	g.Expect(st.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(st.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
	g.Expect(got.Status.LeftAlone).To(BeEmpty())

	skipped := condition(got, ConditionWorkloadsSkipped)
	g.Expect(skipped).NotTo(BeNil())
	g.Expect(skipped.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(skipped.Reason).To(Equal(ReasonOwnedByOperator))
	g.Expect(skipped.Message).To(ContainSubstring("StatefulSet owned/lab (owned by Notebook.kubeflow.org owned/lab; sleep the owner instead (targets.kinds))"))
	g.Expect(skipped.Message).To(ContainSubstring("Deployment owned/pool-broker (owned by Widget.scale.sleep.test owned/pool, which sleeps instead)"))
	g.Expect(condition(got, powerv1alpha1.ConditionReady).Message).To(ContainSubstring("2 skipped"))
	eventually(t, func(g Gomega) {
		notes := eventsFor(g, s.Name, ReasonOwnedByOperator)
		g.Expect(notes).To(HaveLen(1))
		g.Expect(notes[0]).To(ContainSubstring("StatefulSet owned/lab"))
	})
	// Nothing saved for what was skipped: the two Deployments' pods only.
	g.Expect(got.Status.SavedRequests.Cpu().String()).To(Equal("1"))
	consistently(t, func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(labSet), &st)).To(Succeed())
		g.Expect(*st.Spec.Replicas).To(BeEquivalentTo(1))
	})

	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	g.Expect(replicas(g, ns, "plain")).To(BeEquivalentTo(2))
	g.Expect(getCustom(g, widgetGVK, ns, "pool").Object["spec"]).To(Equal(map[string]any{"replicas": int64(3)}))
	g.Expect(replicas(g, ns, "pool-broker")).To(BeEquivalentTo(2))
}

// A kind that the schedule asks for and that cannot sleep makes Ready False, with
// the kind and why in its message, not only the KindsAvailable condition; the rest
// still sleeps. Once the kind is dropped, Ready is True again.
func TestKindThatCannotSleepMakesReadyFalse(t *testing.T) {
	installTestKinds(t)
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "kinds-unsleepable"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	custom(t, cacheGVK, ns, `{metadata: {name: c1}, spec: {size: 5}}`)
	s := newSchedule("kinds-unsleepable", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		// No scale subresource and no patch: it cannot sleep.
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: cacheGVK.Group, Kind: cacheGVK.Kind}}
	}).create(t)
	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	g := NewWithT(t)
	ready := condition(got, powerv1alpha1.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "%+v", ready)
	g.Expect(ready.Reason).To(Equal(ReasonNoScaleSubresource))
	g.Expect(ready.Message).To(ContainSubstring("Cache.patch.sleep.test has no scale subresource: declare a patch for it"))
	g.Expect(ready.Message).To(ContainSubstring("1 of 1 workloads asleep"))
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0))
	g.Expect(getCustom(g, cacheGVK, ns, "c1").Object["spec"]).To(Equal(map[string]any{"size": int64(5)}))

	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) { s.Targets.Kinds = nil })
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		ready := condition(got, powerv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(ready.Reason).To(Equal(ReasonAsleep))
	})
}

// Kinds that stop through an annotation sleep by it: a Kubeflow Notebook through a
// patch of kubeflow-resource-stopped, a KEDA ScaledJob without any patch through
// KEDA's autoscaling.keda.sh/paused. Each wakes with its annotations exactly as they
// were: removed where they were absent, the user's value where there was one. The
// Notebook's StatefulSet is its controller's: it is skipped, not scaled as well.
//
// Neither operator runs here: the test does what the notebook controller would do
// (its StatefulSet to zero while the Notebook is stopped, and back).
func TestKindsThatStopThroughAnAnnotation(t *testing.T) {
	installCRDFile(t, notebookCRD)
	installCRDFile(t, kedaScaledJobCRD)
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "annotated"
	namespace(t, ns, nil)
	lab := custom(t, notebookGVK, ns, `{metadata: {name: lab, annotations: {team: data}}, spec: {template: {spec: {containers: [{name: notebook, image: jupyter}]}}}}`)
	labSet := statefulSet(t, ns, "lab", 1)
	ownedBy(t, labSet, lab, true)
	// Stopped by its user already: the schedule leaves the user's timestamp as it is.
	custom(t, notebookGVK, ns, `{metadata: {name: old, annotations: {kubeflow-resource-stopped: "2026-11-30T08:00:00Z"}}, spec: {template: {spec: {containers: [{name: notebook, image: jupyter}]}}}}`)
	job := `spec: {jobTargetRef: {template: {spec: {containers: [{name: worker, image: worker}], restartPolicy: Never}}}, triggers: [{type: cron, metadata: {timezone: UTC, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: "1"}}]}`
	custom(t, scaledJobGVK, ns, `{metadata: {name: reports}, `+job+`}`)
	custom(t, scaledJobGVK, ns, `{metadata: {name: paused-false, annotations: {autoscaling.keda.sh/paused: "false"}}, `+job+`}`)
	s := newSchedule("annotated", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{
			{Group: notebookGVK.Group, Kind: notebookGVK.Kind, Patch: &powerv1alpha1.SleepPatch{Type: powerv1alpha1.MergePatchType,
				Fields: []powerv1alpha1.SleepField{{Path: "/metadata/annotations/kubeflow-resource-stopped", Value: jsonValue(`"orderly-sleep"`)}}}},
			{Group: scaledJobGVK.Group, Kind: scaledJobGVK.Kind},
		}
	}).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)

	got := at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 4)
	g := NewWithT(t)
	g.Expect(getCustom(g, notebookGVK, ns, "lab").GetAnnotations()).To(And(
		HaveKeyWithValue("kubeflow-resource-stopped", "orderly-sleep"), HaveKeyWithValue("team", "data"), HaveKey(powerv1alpha1.SleepStateAnnotation)))
	g.Expect(getCustom(g, notebookGVK, ns, "old").GetAnnotations()).To(HaveKeyWithValue("kubeflow-resource-stopped", "orderly-sleep"))
	g.Expect(getCustom(g, scaledJobGVK, ns, "reports").GetAnnotations()).To(HaveKeyWithValue(powerv1alpha1.KEDAPausedAnnotation, "true"))
	g.Expect(getCustom(g, scaledJobGVK, ns, "paused-false").GetAnnotations()).To(HaveKeyWithValue(powerv1alpha1.KEDAPausedAnnotation, "true"))
	var st appsv1.StatefulSet
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(labSet), &st)).To(Succeed())
	g.Expect(st.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation), "the Notebook's StatefulSet is its controller's")
	g.Expect(condition(got, ConditionWorkloadsSkipped).Message).To(ContainSubstring("StatefulSet annotated/lab (owned by Notebook.kubeflow.org annotated/lab, which sleeps instead)"))
	// What the notebook controller does for a stopped Notebook: Orderly, which left
	// the StatefulSet to it, neither records nor reverts the change.
	g.Expect(k.Patch(context.Background(), &st, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"replicas":0}}`)))).To(Succeed())

	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	lab = getCustom(g, notebookGVK, ns, "lab")
	g.Expect(lab.GetAnnotations()).To(Equal(map[string]string{"team": "data"}))
	g.Expect(getCustom(g, notebookGVK, ns, "old").GetAnnotations()).To(Equal(map[string]string{"kubeflow-resource-stopped": "2026-11-30T08:00:00Z"}))
	g.Expect(getCustom(g, scaledJobGVK, ns, "reports").GetAnnotations()).To(BeEmpty())
	g.Expect(getCustom(g, scaledJobGVK, ns, "paused-false").GetAnnotations()).To(Equal(map[string]string{powerv1alpha1.KEDAPausedAnnotation: "false"}))
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(labSet), &st)).To(Succeed())
	g.Expect(*st.Spec.Replicas).To(BeEquivalentTo(0))
	g.Expect(st.Annotations).NotTo(HaveKey(powerv1alpha1.LeftAloneAnnotation))

	// An annotation's value must be a string, which the CRD's schema cannot say of
	// a value of any type: the schedule is not Ready, and nothing changes.
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds[0].Patch.Fields[0].Value = jsonValue("true")
	})
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		ready := condition(got, powerv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(ReasonInvalidSpec))
		g.Expect(ready.Message).To(ContainSubstring("targets.kinds[0].patch.fields[0].value: the value of the annotation /metadata/annotations/kubeflow-resource-stopped must be a string, not true"))
	})
}

var kafkaNodePoolGVK = schema.GroupVersionKind{Group: "kafka.strimzi.io", Version: "v1", Kind: "KafkaNodePool"}

// setBrokers writes what Strimzi reports in a KafkaNodePool's status: how many
// brokers run (the CRD's statusReplicasPath).
func setBrokers(t *testing.T, name string, n int64) {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(kafkaNodePoolGVK)
	u.SetNamespace("kafka-pools")
	u.SetName(name)
	body := fmt.Sprintf(`{"status":{"replicas":%d,"observedGeneration":1}}`, n)
	NewWithT(t).Expect(k.Status().Patch(context.Background(), u, client.RawPatch(types.MergePatchType, []byte(body)))).To(Succeed())
}

// A KafkaNodePool whose brokers Strimzi keeps (they hold partition replicas) still
// runs them by its own status after Orderly scaled it to zero: once that has lasted
// SleepEffectiveAfter, the schedule says so in WorkloadsStillRunning (with Strimzi's
// way out), in Ready's message and in one Warning Event, and no longer once the
// brokers are gone. A pool whose operator stops its brokers is never reported.
//
// Strimzi does not run here: the test writes the status it would (status.replicas
// kept at 3 for the refused pool, 0 for the other).
func TestSleepThatDidNotTakeEffectIsReported(t *testing.T) {
	installCRDFile(t, "testdata/crds/kafka.strimzi.io_kafkanodepools.yaml")
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "kafka-pools"
	namespace(t, ns, nil)
	pool := `spec: {replicas: 3, roles: [broker], storage: {type: ephemeral}}`
	custom(t, kafkaNodePoolGVK, ns, `{metadata: {name: brokers, labels: {strimzi.io/cluster: events}}, `+pool+`}`)
	custom(t, kafkaNodePoolGVK, ns, `{metadata: {name: empty, labels: {strimzi.io/cluster: events}}, `+pool+`}`)
	setBrokers(t, "brokers", 3)
	setBrokers(t, "empty", 3)
	s := newSchedule("kafka-pools", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: kafkaNodePoolGVK.Group, Kind: kafkaNodePoolGVK.Kind}}
	}).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)

	got := at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 2)
	g := NewWithT(t)
	g.Expect(condition(got, ConditionWorkloadsStillRunning).Status).To(Equal(metav1.ConditionFalse), "not yet: operators take a while")
	// What Strimzi does: the empty pool's brokers go, the other's are kept.
	setBrokers(t, "empty", 0)

	clk.SetTime(wedEvening.Add(DefaultSleepEffectiveAfter + time.Minute))
	poke(t, s.Name)
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		c := condition(got, ConditionWorkloadsStillRunning)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(ReasonReplicasKept))
		g.Expect(c.Message).To(ContainSubstring("1 workload(s) asleep still run pods"))
		g.Expect(c.Message).To(ContainSubstring("KafkaNodePool.kafka.strimzi.io kafka-pools/brokers (3 replica(s) run, more than 5m0s after it was scaled to 0; Strimzi keeps the brokers that hold partition replicas"))
		g.Expect(c.Message).To(ContainSubstring(`strimzi.io/skip-broker-scaledown-check="true"`))
		g.Expect(c.Message).NotTo(ContainSubstring("kafka-pools/empty"))
		g.Expect(condition(got, powerv1alpha1.ConditionReady).Message).To(ContainSubstring("; 1 asleep still run pods (see the WorkloadsStillRunning condition)"))
		g.Expect(eventsFor(g, s.Name, ReasonReplicasKept)).To(HaveLen(1))
		g.Expect(testutil.ToFloat64(stillRunningWorkloads.WithLabelValues(s.Name))).To(Equal(1.0))
	})
	poke(t, s.Name)
	consistently(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, ReasonReplicasKept)).To(HaveLen(1)) })

	// The partitions moved, Strimzi removes the brokers; the schedule looks again
	// SleepEffectiveAfter later (here: at once).
	setBrokers(t, "brokers", 0)
	poke(t, s.Name)
	eventually(t, func(g Gomega) {
		c := condition(getSchedule(g, s.Name), ConditionWorkloadsStillRunning)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(ReasonNoneRunning))
		g.Expect(testutil.ToFloat64(stillRunningWorkloads.WithLabelValues(s.Name))).To(BeZero())
	})
	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	g.Expect(getCustom(g, kafkaNodePoolGVK, ns, "brokers").Object["spec"]).To(HaveKeyWithValue("replicas", int64(3)))
}

// gitOpsManaged: Skip leaves the workloads Argo CD or Flux manage awake, names them in
// WorkloadsSkipped (reason GitOpsManaged) and wakes those the schedule already held
// asleep; the rest sleeps as before.
func TestGitOpsManagedWorkloadsCanBeSkipped(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "gitops-skip"
	namespace(t, ns, nil)
	deployment(t, ns, "argo", 2, nil)
	deployment(t, ns, "flux", 3, map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps"})
	deployment(t, ns, "plain", 1, nil)
	g := NewWithT(t)
	argo := getDeployment(g, ns, "argo")
	argo.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:gitops-skip/argo"}
	g.Expect(k.Update(context.Background(), argo)).To(Succeed())
	s := newSchedule("gitops-skip", ns).create(t)
	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 3)
	g.Expect(condition(got, powerv1alpha1.ConditionGitOpsManaged).Status).To(Equal(metav1.ConditionTrue), "Sleep, the default, sleeps and reports them")

	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) { s.GitOpsManaged = powerv1alpha1.GitOpsSkip })
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(1))
		skipped := condition(got, ConditionWorkloadsSkipped)
		g.Expect(skipped.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(skipped.Reason).To(Equal(ReasonGitOpsManaged))
		g.Expect(skipped.Message).To(ContainSubstring("Deployment gitops-skip/argo (managed by ArgoCD; spec.gitOpsManaged is Skip)"))
		g.Expect(skipped.Message).To(ContainSubstring("Deployment gitops-skip/flux (managed by Flux; spec.gitOpsManaged is Skip)"))
		g.Expect(condition(got, powerv1alpha1.ConditionGitOpsManaged).Status).To(Equal(metav1.ConditionFalse))
		g.Expect(testutil.ToFloat64(skippedWorkloads.WithLabelValues(s.Name))).To(Equal(2.0))
	})
	g.Expect(replicas(g, ns, "argo")).To(BeEquivalentTo(2), "woken: the schedule held it asleep before")
	g.Expect(replicas(g, ns, "flux")).To(BeEquivalentTo(3))
	g.Expect(replicas(g, ns, "plain")).To(BeEquivalentTo(0))
	g.Expect(getDeployment(g, ns, "argo").Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
}
