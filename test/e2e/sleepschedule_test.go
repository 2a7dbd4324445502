//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
)

// powerClient is k with the power.orderly.dev types.
func powerClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(powerv1alpha1.AddToScheme(scheme))
	c, err := client.New(adminCfg, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// awakeUntil is a UTC window that opened an hour before end and closes at end.
func awakeUntil(end time.Time) powerv1alpha1.AwakeWindow {
	start := end.Add(-time.Hour)
	return powerv1alpha1.AwakeWindow{Days: start.Weekday().String()[:3], From: start.Format("15:04"), To: end.Format("15:04")}
}

// TestSleepScheduleCrossesABoundary runs a schedule whose awake window closes a
// minute or so into the test: the pods go away, and `orderly sleep wake` brings them
// back Ready.
func TestSleepScheduleCrossesABoundary(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pc := powerClient(t)
	ns := "e2e-sleep"
	g.Expect(pc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"env": "e2e-dev"}}})).To(Succeed())
	t.Cleanup(func() {
		_ = pc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	web := deployment(ns, "web", 2)
	web.Spec.Template.Spec.Containers[0].Resources.Requests = corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	g.Expect(pc.Create(ctx, web)).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, ns, "web")).To(Equal(2)) }, timeout, poll).Should(Succeed())

	// The window closes at the first full minute at least 30 s away.
	end := time.Now().UTC().Add(90 * time.Second).Truncate(time.Minute)
	s := &powerv1alpha1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-nights"},
		Spec: powerv1alpha1.SleepScheduleSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "e2e-dev"}},
			Awake:             []powerv1alpha1.AwakeWindow{awakeUntil(end)},
		},
	}
	g.Expect(pc.Create(ctx, s)).To(Succeed())
	t.Cleanup(func() { _ = pc.Delete(context.Background(), s) })
	get := func(g Gomega) *powerv1alpha1.SleepSchedule {
		var got powerv1alpha1.SleepSchedule
		g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(s), &got)).To(Succeed())
		return &got
	}
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAwake))
		g.Expect(got.Status.NextTransition).NotTo(BeNil())
		g.Expect(got.Status.NextTransition.Time).To(BeTemporally("==", end))
		g.Expect(got.Status.Workloads).To(BeEquivalentTo(1))
		g.Expect(got.Status.ReadyWorkloads).To(BeEquivalentTo(1))
	}, timeout, poll).Should(Succeed())
	g.Expect(time.Now().Before(end)).To(BeTrue(), "the test reached the boundary before checking the awake state")

	// The boundary passes: Orderly scales the Deployment down and the pods go away.
	t.Logf("waiting for the window to close at %s", end.Format(time.RFC3339))
	g.Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
		g.Expect(*d.Spec.Replicas).To(BeEquivalentTo(0))
		var pods corev1.PodList
		g.Expect(pc.List(ctx, &pods, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(pods.Items).To(BeEmpty())
	}, time.Until(end)+timeout, poll).Should(Succeed())
	asleepAt := time.Now()
	g.Expect(asleepAt.After(end)).To(BeTrue(), "put to sleep before the window closed")
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAsleep))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(1))
		g.Expect(got.Status.SavedRequests.Cpu().String()).To(Equal("200m"))
		g.Expect(got.Status.History).NotTo(BeEmpty())
		g.Expect(got.Status.History[0].Action).To(Equal(powerv1alpha1.ActionSleep))
	}, timeout, poll).Should(Succeed())
	body, err := httpGet(metricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).To(ContainSubstring(`orderly_sleepschedule_sleeping_workloads{schedule="e2e-nights"} 1`))
	g.Expect(string(body)).To(MatchRegexp(`orderly_sleepschedule_namespace_saved_cpu_cores\{namespace="[^"]+",schedule="e2e-nights"\} 0\.2\b`))

	// On-demand wake from the CLI: the pods come back Ready.
	cmd := exec.Command(os.Getenv("ORDERLY_BIN"), "sleep", "wake", s.Name, "--for", "2h", "--kubeconfig", devcluster.KubeconfigPath(clusterName))
	out, err := cmd.CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("awake until"))
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, ns, "web")).To(Equal(2)) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAwake))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(0))
		g.Expect(got.Status.ReadyWorkloads).To(BeEquivalentTo(1))
		c := meta.FindStatusCondition(got.Status.Conditions, powerv1alpha1.ConditionWorkloadsReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
		g.Expect(got.Status.History[0].Action).To(Equal(powerv1alpha1.ActionWake))
	}, timeout, poll).Should(Succeed())
	var d appsv1.Deployment
	g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d)).To(Succeed())
	g.Expect(d.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
	t.Logf("asleep %.1fs after the boundary; awake and Ready again after `orderly sleep wake`", asleepAt.Sub(end).Seconds())
	g.Expect(strings.TrimSpace(string(out))).NotTo(BeEmpty())
}

// TestSleepScheduleLeavesSystemAndManagerNamespacesAwake plays the careless user: a
// schedule that selects every namespace and is always asleep. The Deployments in
// kube-system and in the manager's own namespace keep their replicas, the others
// sleep, and the status names the namespaces left awake and why.
func TestSleepScheduleLeavesSystemAndManagerNamespacesAwake(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pc := powerClient(t)
	ns := "e2e-careless"
	g.Expect(pc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() {
		_ = pc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	keep := []*appsv1.Deployment{deployment("kube-system", "e2e-system-app", 1), deployment(managerNamespace, "e2e-orderly-app", 1)}
	for _, d := range append([]*appsv1.Deployment{deployment(ns, "web", 1)}, keep...) {
		g.Expect(pc.Create(ctx, d)).To(Succeed())
		t.Cleanup(func() { _ = pc.Delete(context.Background(), d) })
	}

	s := &powerv1alpha1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-careless"},
		// Every namespace, asleep all the time.
		Spec: powerv1alpha1.SleepScheduleSpec{NamespaceSelector: &metav1.LabelSelector{}},
	}
	g.Expect(pc.Create(ctx, s)).To(Succeed())
	// Registered after the Deployments' clean-up, so it runs first: the schedule wakes
	// what it put to sleep before it goes.
	t.Cleanup(func() {
		_ = pc.Delete(context.Background(), s)
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(pc.Get(context.Background(), client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{}))
		}, timeout, poll).Should(BeTrue())
	})
	replicasOf := func(g Gomega, d *appsv1.Deployment) int32 {
		var got appsv1.Deployment
		g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(d), &got)).To(Succeed())
		return *got.Spec.Replicas
	}
	g.Eventually(func(g Gomega) {
		g.Expect(replicasOf(g, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(BeEquivalentTo(0))
		var got powerv1alpha1.SleepSchedule
		g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(s), &got)).To(Succeed())
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAsleep))
		g.Expect(got.Status.ExcludedNamespaces).To(ContainElements(
			powerv1alpha1.ExcludedNamespace{Name: "kube-system", Reason: powerv1alpha1.ExcludedSystemNamespace},
			powerv1alpha1.ExcludedNamespace{Name: managerNamespace, Reason: powerv1alpha1.ExcludedManagerNamespace},
		))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		for _, d := range keep {
			g.Expect(replicasOf(g, d)).To(BeEquivalentTo(1), "%s/%s", d.Namespace, d.Name)
		}
	}, 5*time.Second, poll).Should(Succeed())
}
