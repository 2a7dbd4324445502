//go:build integration

package sleepschedule

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// The careless user: a schedule that selects every namespace. Kubernetes' own
// namespaces and Orderly's stay awake (asleep, CoreDNS and the manager itself would
// be gone, with nothing left to wake them), and the status says which and why.
func TestSelectingEverythingLeavesSystemAndManagerNamespacesAwake(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	namespace(t, managerNamespace, nil)
	namespace(t, "careless", nil)
	deployment(t, "kube-system", "coredns", 2, nil)
	deployment(t, managerNamespace, "orderly", 1, nil)
	deployment(t, "careless", "web", 2, nil)
	// Put to sleep in kube-public by an earlier version of Orderly: woken.
	deployment(t, "kube-public", "legacy", 0, map[string]string{powerv1alpha1.AsleepLabel: "careless"})
	legacy := getDeployment(NewWithT(t), "kube-public", "legacy")
	patch := client.MergeFrom(legacy.DeepCopy())
	legacy.Annotations = map[string]string{powerv1alpha1.SleepStateAnnotation: `{"replicas":2,"sleepReplicas":0}`}
	NewWithT(t).Expect(k.Patch(context.Background(), legacy, patch)).To(Succeed())

	s := newSchedule("careless").with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.NamespaceSelector = &metav1.LabelSelector{}
	}).create(t)

	eventually(t, func(g Gomega) {
		g.Expect(replicas(g, "careless", "web")).To(BeEquivalentTo(0))
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAsleep))
		g.Expect(got.Status.ExcludedNamespaces).To(ContainElements(
			powerv1alpha1.ExcludedNamespace{Name: "kube-system", Reason: powerv1alpha1.ExcludedSystemNamespace},
			powerv1alpha1.ExcludedNamespace{Name: "kube-public", Reason: powerv1alpha1.ExcludedSystemNamespace},
			powerv1alpha1.ExcludedNamespace{Name: managerNamespace, Reason: powerv1alpha1.ExcludedManagerNamespace},
		))
		g.Expect(got.Status.ExcludedNamespaces).NotTo(ContainElement(HaveField("Name", "careless")))
		g.Expect(condition(got, powerv1alpha1.ConditionReady).Message).To(ContainSubstring("never sleep"))
		g.Expect(replicas(g, "kube-public", "legacy")).To(BeEquivalentTo(2), "what an earlier version put to sleep there is woken")
	})
	consistently(t, func(g Gomega) {
		g.Expect(replicas(g, "kube-system", "coredns")).To(BeEquivalentTo(2))
		g.Expect(replicas(g, managerNamespace, "orderly")).To(BeEquivalentTo(1))
		g.Expect(getDeployment(g, "kube-system", "coredns").Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	})
	// Named explicitly, they are excluded all the same.
	setSpec(t, s.Name, func(s *powerv1alpha1.SleepScheduleSpec) {
		s.NamespaceSelector = nil
		s.Namespaces = []string{"kube-system", managerNamespace, "careless"}
	})
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(got.Status.Namespaces).To(BeEquivalentTo(1))
		g.Expect(got.Status.ExcludedNamespaces).To(ConsistOf(
			powerv1alpha1.ExcludedNamespace{Name: "kube-system", Reason: powerv1alpha1.ExcludedSystemNamespace},
			powerv1alpha1.ExcludedNamespace{Name: managerNamespace, Reason: powerv1alpha1.ExcludedManagerNamespace},
		))
	})
	consistently(t, func(g Gomega) {
		g.Expect(replicas(g, "kube-system", "coredns")).To(BeEquivalentTo(2))
		g.Expect(replicas(g, managerNamespace, "orderly")).To(BeEquivalentTo(1))
	})
}

func hpaFor(t *testing.T, ns, name string, minReplicas, maxReplicas int32) *autoscalingv2.HorizontalPodAutoscaler {
	t.Helper()
	h := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: name},
			MinReplicas:    ptr.To(minReplicas), MaxReplicas: maxReplicas,
		},
	}
	NewWithT(t).Expect(k.Create(context.Background(), h)).To(Succeed())
	return h
}

// setRecord writes a workload's sleep record as a namespace editor can.
func setRecord(t *testing.T, obj client.Object, raw string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		ann := obj.GetAnnotations()
		ann[powerv1alpha1.SleepStateAnnotation] = raw
		obj.SetAnnotations(ann)
		g.Expect(k.Update(context.Background(), obj)).To(Succeed())
	})
}

// A namespace editor rewrites the sleep records of the workloads a schedule holds
// asleep with values that cannot be restored. The workloads are released without
// being restored, with a Warning Event naming them, and neither waking nor deleting
// the schedule waits on them: before, the wake failed with 422 at every retry and
// the finalizer never went.
func TestRecordsThatCannotBeRestoredDoNotBlockTheSchedule(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "bad-records"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 3, nil)
	deployment(t, ns, "api", 2, nil)
	deployment(t, ns, "worker", 2, nil)
	api := hpaFor(t, ns, "api", 2, 5)
	worker := hpaFor(t, ns, "worker", 2, 4)
	s := newSchedule("bad-records", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) { s.Targets.SleepReplicas = 1 }).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 3)
	eventually(t, func(g Gomega) {
		for _, h := range []*autoscalingv2.HorizontalPodAutoscaler{api, worker} {
			g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(h), h)).To(Succeed())
			g.Expect(h.Labels).To(HaveKeyWithValue(powerv1alpha1.AsleepLabel, s.Name))
		}
	})

	// Negative replicas (with the value Orderly set, so that it does not look changed
	// by its owner); an HPA whose minimum is above its maximum; an HPA minimum that
	// passes Orderly's checks but that the API server refuses.
	setRecord(t, getDeployment(NewWithT(t), ns, "web"), `{"replicas":-1,"sleepReplicas":1}`)
	setRecord(t, api, `{"minReplicas":5,"maxReplicas":2}`)
	setRecord(t, worker, `{"minReplicas":0,"maxReplicas":3}`)

	NewWithT(t).Expect(k.Delete(context.Background(), s)).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{}))).To(BeTrue(),
			"the schedule's deletion must not wait on records that cannot be restored")
	})
	g := NewWithT(t)
	web := getDeployment(g, ns, "web")
	g.Expect(*web.Spec.Replicas).To(BeEquivalentTo(1), "released as it was, not restored")
	g.Expect(web.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(web.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
	g.Expect(replicas(g, ns, "api")).To(BeEquivalentTo(2), "a workload with a good record is restored")
	g.Expect(replicas(g, ns, "worker")).To(BeEquivalentTo(2))
	for _, h := range []*autoscalingv2.HorizontalPodAutoscaler{api, worker} {
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(h), h)).To(Succeed())
		g.Expect(h.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
		g.Expect(h.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
		g.Expect(h.Spec.MaxReplicas).To(BeEquivalentTo(1), "released as it was, not restored")
	}
	eventually(t, func(g Gomega) {
		notes := strings.Join(eventsFor(g, s.Name, ReasonInvalidRecord), "\n")
		g.Expect(notes).To(ContainSubstring("Deployment bad-records/web (the recorded replicas -1 is negative)"))
		g.Expect(notes).To(ContainSubstring("HorizontalPodAutoscaler bad-records/api (the recorded minReplicas 5 is not between 0 and maxReplicas 2)"))
		g.Expect(notes).To(ContainSubstring("HorizontalPodAutoscaler bad-records/worker (the API server refused"))
	})
}

// The cache holds a trimmed copy of each workload (trimWorkload); the writes, diffs of
// that copy, change on the real objects only what they mean to: the image, the
// environment, kubectl's annotation, a CronJob's schedule and an HPA's metrics stay.
func TestWritesChangeOnlyWhatTheyMean(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "trimmed"
	namespace(t, ns, nil)
	ctx := context.Background()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web", Labels: map[string]string{"team": "payments"}, Annotations: map[string]string{
			"kubectl.kubernetes.io/last-applied-configuration": `{"big":"` + strings.Repeat("x", 100<<10) + `"}`,
			"owner": "payments",
		}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(3)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: podSpec(),
		},
	}
	d.Spec.Template.Annotations = map[string]string{"prometheus.io/scrape": "true"}
	d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "MODE", Value: "prod"}}
	d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, corev1.Container{Name: "proxy", Image: "proxy:2"})
	NewWithT(t).Expect(k.Create(ctx, d)).To(Succeed())
	cj := cronJob(t, ns, "report")
	hpa := hpaFor(t, ns, "web", 2, 6)
	hpa.Spec.Metrics = []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
		Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))}}}}
	NewWithT(t).Expect(k.Update(ctx, hpa)).To(Succeed())

	type snapshot struct {
		d   appsv1.Deployment
		cj  batchv1.CronJob
		hpa autoscalingv2.HorizontalPodAutoscaler
	}
	take := func(g Gomega) snapshot {
		var sn snapshot
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(d), &sn.d)).To(Succeed())
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(cj), &sn.cj)).To(Succeed())
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(hpa), &sn.hpa)).To(Succeed())
		return sn
	}
	// same compares two snapshots but for what sleeping changes.
	same := func(g Gomega, a, b snapshot) {
		for _, sn := range []*snapshot{&a, &b} {
			sn.d.Spec.Replicas, sn.cj.Spec.Suspend = nil, nil
			sn.hpa.Spec.MinReplicas, sn.hpa.Spec.MaxReplicas = nil, 0
			for _, m := range []*metav1.ObjectMeta{&sn.d.ObjectMeta, &sn.cj.ObjectMeta, &sn.hpa.ObjectMeta} {
				delete(m.Labels, powerv1alpha1.AsleepLabel)
				delete(m.Annotations, powerv1alpha1.SleepStateAnnotation)
				m.ResourceVersion, m.Generation, m.ManagedFields = "", 0, nil
			}
		}
		g.Expect(apiequality.Semantic.DeepEqual(a.d.ObjectMeta, b.d.ObjectMeta)).To(BeTrue(), "Deployment metadata:\n%v\n%v", a.d.Labels, b.d.Labels)
		g.Expect(apiequality.Semantic.DeepEqual(a.d.Spec, b.d.Spec)).To(BeTrue(), "Deployment spec:\n%+v\n%+v", a.d.Spec, b.d.Spec)
		g.Expect(apiequality.Semantic.DeepEqual(a.cj.ObjectMeta, b.cj.ObjectMeta)).To(BeTrue(), "CronJob metadata")
		g.Expect(apiequality.Semantic.DeepEqual(a.cj.Spec, b.cj.Spec)).To(BeTrue(), "CronJob spec:\n%+v\n%+v", a.cj.Spec, b.cj.Spec)
		g.Expect(apiequality.Semantic.DeepEqual(a.hpa.ObjectMeta, b.hpa.ObjectMeta)).To(BeTrue(), "HPA metadata")
		g.Expect(apiequality.Semantic.DeepEqual(a.hpa.Spec, b.hpa.Spec)).To(BeTrue(), "HPA spec:\n%+v\n%+v", a.hpa.Spec, b.hpa.Spec)
	}
	s := newSchedule("trimmed", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) { s.Targets.SleepReplicas = 1 }).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	before := take(NewWithT(t))

	at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 2)
	eventually(t, func(g Gomega) {
		asleep := take(g)
		g.Expect(*asleep.d.Spec.Replicas).To(BeEquivalentTo(1))
		g.Expect(*asleep.cj.Spec.Suspend).To(BeTrue())
		g.Expect(asleep.hpa.Spec.MaxReplicas).To(BeEquivalentTo(1))
		same(g, before, asleep)
	})

	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	eventually(t, func(g Gomega) {
		awake := take(g)
		g.Expect(*awake.d.Spec.Replicas).To(BeEquivalentTo(3))
		g.Expect(*awake.cj.Spec.Suspend).To(BeFalse())
		g.Expect(*awake.hpa.Spec.MinReplicas).To(BeEquivalentTo(2))
		g.Expect(awake.hpa.Spec.MaxReplicas).To(BeEquivalentTo(6))
		same(g, before, awake)
	})
}
