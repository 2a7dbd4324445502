//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/standin/canaryapp"
	"orderly.dev/orderly/internal/testing/testprom"
)

// The Canary tests run Orderly's manager (as its ServiceAccount) against the local
// cluster with the Gateway API CRDs, a real Prometheus on loopback, and the test
// program canaryapp standing in for the pods' metrics (kwok pods serve no traffic):
// the tests set each variant's error ratio and check the weights Orderly writes to the
// HTTPRoute, the Deployments, and the decision record.

var gatewayAPIOnce sync.Once

// installGatewayAPI installs the Gateway API standard CRDs into the run's cluster, as
// `orderly dev up --with gateway-api` does.
func installGatewayAPI(t *testing.T) {
	t.Helper()
	var err error
	gatewayAPIOnce.Do(func() {
		var dir string
		if dir, err = devcluster.GatewayAPICRDDir(context.Background()); err == nil {
			_, err = envtest.InstallCRDs(adminCfg, envtest.CRDInstallOptions{Paths: []string{dir}})
		}
	})
	if err != nil {
		t.Fatalf("installing the Gateway API CRDs: %v", err)
	}
}

func gatewayAPIInstalled() bool {
	_, err := k.RESTMapper().RESTMapping(schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"})
	return err == nil
}

// canaryRig is what one Canary test runs: its namespace, the metrics program, and
// Prometheus scraping it.
type canaryRig struct {
	t    *testing.T
	ns   string
	app  *canaryapp.App
	prom *testprom.Server
}

func newCanaryRig(t *testing.T, ns string) *canaryRig {
	t.Helper()
	app, err := canaryapp.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(app.Close)
	prom, err := testprom.Start(testprom.Options{Targets: []string{app.Address}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(prom.Close)
	// The zone of the hostnames the rig's Canaries route: a created route carries only
	// hostnames a ServiceDomain of its namespace holds. Records go to external-dns,
	// which does not run here: the claims are what matter.
	zone := &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: networkv1alpha1.DomainZoneSpec{
		Zone: ns + ".canary.test",
		AllowedNamespaces: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{ns}}}},
		DNS:    networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderExternalDNS, ResyncInterval: metav1.Duration{Duration: time.Minute}},
		Route:  networkv1alpha1.ZoneRoute{IngressClassName: "e2e"},
		Target: networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed, Addresses: []string{"192.0.2.50"}},
	}}
	NewWithT(t).Expect(k.Create(context.Background(), zone)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), zone) })
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	return &canaryRig{t: t, ns: ns, app: app, prom: prom}
}

// hostname is the hostname of target's route, in the rig's zone.
func (r *canaryRig) hostname(target string) string { return target + "." + r.ns + ".canary.test" }

// claim has a ServiceDomain of the rig's namespace claim target's hostname, and waits
// for the claim; the ServiceDomain goes (and is waited for) before the zone.
func (r *canaryRig) claim(target string) {
	t := r.t
	t.Helper()
	ctx := context.Background()
	sd := &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: target}, Spec: networkv1alpha1.ServiceDomainSpec{
		Hostname: r.hostname(target), Service: networkv1alpha1.ServiceRef{Name: target + "-primary", Port: 8080},
		Route: networkv1alpha1.RouteIngress, TLS: networkv1alpha1.TLSNone}}
	NewWithT(t).Expect(k.Create(ctx, sd)).To(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), sd)
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(sd), sd))
		}, 2*time.Minute, time.Second).Should(BeTrue(), "ServiceDomain %s/%s is not gone", sd.Namespace, sd.Name)
	})
	NewWithT(t).Eventually(func(g Gomega) {
		var claim networkv1alpha1.HostnameClaim
		g.Expect(k.Get(ctx, client.ObjectKey{Name: r.hostname(target)}, &claim)).To(Succeed())
		g.Expect(claim.Spec.Holder.Namespace).To(Equal(r.ns))
	}, 2*time.Minute, time.Second).Should(Succeed())
}

// errors sets the canary's error ratio; the primary's is 1%. At 500 requests a second
// the ratio's noise over 3 s (about ±0.005) stays well within the allowed absolute
// shift of 0.02.
func (r *canaryRig) errors(target string, canary float64) {
	r.app.Set(r.ns, target, deliveryv1alpha1.VariantPrimary, canaryapp.Behaviour{RPS: 500, ErrorRatio: 0.01})
	r.app.Set(r.ns, target, deliveryv1alpha1.VariantCanary, canaryapp.Behaviour{RPS: 500, ErrorRatio: canary})
}

// waitScraped returns once Prometheus has both variants' series of target, so that
// the first analysis has samples.
func (r *canaryRig) waitScraped(t *testing.T, target string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{deliveryv1alpha1.VariantPrimary, deliveryv1alpha1.VariantCanary} {
		q := `canaryapp_requests_total{namespace="` + r.ns + `",target="` + target + `",variant="` + v + `"}`
		NewWithT(t).Expect(r.prom.WaitForData(ctx, q)).To(Succeed())
	}
}

// canary is a Canary of target: an HTTPRoute Orderly creates for target's hostname
// (claimed here), the steps given, and the error ratio judged canary against primary.
func (r *canaryRig) canary(target string, steps ...deliveryv1alpha1.Step) *deliveryv1alpha1.Canary {
	r.claim(target)
	return &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: r.ns, Name: target},
		Spec: deliveryv1alpha1.CanarySpec{
			TargetRef: deliveryv1alpha1.TargetRef{Name: target},
			Service:   deliveryv1alpha1.CanaryService{Port: 8080},
			Traffic: deliveryv1alpha1.Traffic{HTTPRoute: &deliveryv1alpha1.HTTPRouteTraffic{
				Name: target, Create: true, ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "public", Namespace: "infra"}}, Hostnames: []string{r.hostname(target)},
			}},
			Steps: steps,
			Analysis: deliveryv1alpha1.Analysis{
				Provider:   deliveryv1alpha1.Provider{Address: r.prom.URL, Timeout: metav1.Duration{Duration: 2 * time.Second}},
				Resolution: metav1.Duration{Duration: time.Second},
				Metrics: []deliveryv1alpha1.Metric{{
					Name: "error-ratio", Query: canaryapp.ErrorRatioQuery("3s"), MinSamples: 4,
					Baseline: &deliveryv1alpha1.BaselineComparison{Direction: deliveryv1alpha1.HigherIsWorse, MaxRelativeShift: "0.1", MaxAbsoluteShift: "0.02", Alpha: "0.05"},
				}},
				OnProviderError: deliveryv1alpha1.ProviderErrorHold,
				MaxHold:         metav1.Duration{Duration: 25 * time.Second},
				MaxInconclusive: 3,
			},
		},
	}
}

// canaryStep is a weight step of 6 s: a few samples at the 1 s resolution, and a
// short test.
func canaryStep(weight int32) deliveryv1alpha1.Step {
	return deliveryv1alpha1.Step{Weight: ptr.To(weight), Interval: &metav1.Duration{Duration: 6 * time.Second}}
}

func getCanary(g Gomega, ns, name string) *deliveryv1alpha1.Canary {
	var c deliveryv1alpha1.Canary
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c)).To(Succeed())
	return &c
}

func canaryCondition(c *deliveryv1alpha1.Canary, typ string) metav1.Condition {
	if cond := meta.FindStatusCondition(c.Status.Conditions, typ); cond != nil {
		return *cond
	}
	return metav1.Condition{}
}

// canaryWeight is the canary's weight in the HTTPRoute Orderly created (-1 when there
// is none yet).
func canaryWeight(ns, name string) int64 {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "gateway.networking.k8s.io", Version: "v1", Kind: "HTTPRoute"})
	if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u); err != nil {
		return -1
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	for _, rule := range rules {
		refs, _, _ := unstructured.NestedSlice(rule.(map[string]any), "backendRefs")
		for _, ref := range refs {
			m := ref.(map[string]any)
			if m["name"] == name+"-canary" {
				w, _ := m["weight"].(int64)
				return w
			}
		}
	}
	return -1
}

// watchWeights records every canary weight seen in the route until stop.
func watchWeights(ns, name string) (stop func() []int64) {
	var (
		mu   sync.Mutex
		seen []int64
		done = make(chan struct{})
		wg   sync.WaitGroup
	)
	wg.Go(func() {
		for {
			w := canaryWeight(ns, name)
			mu.Lock()
			if w >= 0 && (len(seen) == 0 || seen[len(seen)-1] != w) {
				seen = append(seen, w)
			}
			mu.Unlock()
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	})
	return func() []int64 {
		close(done)
		wg.Wait()
		return seen
	}
}

func image(g Gomega, ns, name string) string {
	var d appsv1.Deployment
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return d.Spec.Template.Spec.Containers[0].Image
}

func setTargetImage(t *testing.T, ns, name, img string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		d.Spec.Template.Spec.Containers[0].Image = img
		g.Expect(k.Update(context.Background(), &d)).To(Succeed())
	}, timeout, poll).Should(Succeed())
}

// startInitialized creates the target and its Canary and waits until the primary's
// pods are Ready and the target is scaled to zero.
func (r *canaryRig) startInitialized(t *testing.T, c *deliveryv1alpha1.Canary) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(k.Create(context.Background(), deployment(r.ns, c.Spec.TargetRef.Name, 2))).To(Succeed())
	g.Expect(k.Create(context.Background(), c)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), c) })
	g.Eventually(func(g Gomega) {
		got := getCanary(g, r.ns, c.Name)
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(canaryCondition(got, deliveryv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue), canaryCondition(got, deliveryv1alpha1.ConditionReady).Message)
		var target appsv1.Deployment
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: r.ns, Name: c.Spec.TargetRef.Name}, &target)).To(Succeed())
		g.Expect(*target.Spec.Replicas).To(BeZero())
		g.Expect(readyPods(g, r.ns, c.Spec.TargetRef.Name)).To(Equal(2), "the primary's two pods (the target's are gone)")
		g.Expect(canaryWeight(r.ns, c.Name)).To(BeZero())
	}, timeout, poll).Should(Succeed())
}

func orderlyCLI(t *testing.T, args ...string) string {
	t.Helper()
	kubeconfig := devcluster.KubeconfigPath(clusterName)
	out, err := exec.Command(os.Getenv("ORDERLY_BIN"), append(args, "--kubeconfig", kubeconfig)...).CombinedOutput() //nolint:gosec // the binary under test
	if err != nil {
		t.Fatalf("orderly %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// A healthy canary is promoted step by step: the route's weights go 20, then (after a
// pause that `orderly canary promote` ends) 60 and 100; the primary takes the new
// template, its pods are Ready, and all traffic is back on it. Before the Gateway API
// CRDs are installed the Canary says so, and goes on once they are, with the same
// manager.
func TestCanaryHealthyIsPromotedStepByStep(t *testing.T) {
	rig := newCanaryRig(t, "e2e-canary-ok")
	rig.errors("web", 0.01)
	c := rig.canary("web", canaryStep(20), deliveryv1alpha1.Step{Pause: true}, canaryStep(60), canaryStep(100))
	g := NewWithT(t)
	if !gatewayAPIInstalled() {
		g.Expect(k.Create(context.Background(), deployment(rig.ns, "web", 2))).To(Succeed())
		g.Expect(k.Create(context.Background(), c)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), c) })
		g.Eventually(func(g Gomega) {
			got := getCanary(g, rig.ns, "web")
			g.Expect(canaryCondition(got, deliveryv1alpha1.ConditionTrafficReady).Reason).To(Equal("HTTPRouteCRDMissing"))
			g.Expect(got.Status.Traffic).To(ContainElement(HaveField("Installed", BeFalse())))
		}, timeout, poll).Should(Succeed())
		installGatewayAPI(t)
		g.Eventually(func(g Gomega) {
			g.Expect(canaryCondition(getCanary(g, rig.ns, "web"), deliveryv1alpha1.ConditionTrafficReady).Status).To(Equal(metav1.ConditionTrue))
			g.Expect(canaryWeight(rig.ns, "web")).To(BeZero())
		}, timeout, poll).Should(Succeed())
		g.Eventually(func(g Gomega) {
			g.Expect(getCanary(g, rig.ns, "web").Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		}, timeout, poll).Should(Succeed())
	} else {
		rig.startInitialized(t, c)
	}
	rig.waitScraped(t, "web")
	weights := watchWeights(rig.ns, "web")
	setTargetImage(t, rig.ns, "web", "registry.invalid/app:2")
	g.Eventually(func(g Gomega) {
		got := getCanary(g, rig.ns, "web")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhasePaused))
		g.Expect(got.Status.CurrentStep).To(Equal(int32(1)))
	}, timeout, poll).Should(Succeed())
	g.Expect(orderlyCLI(t, "canary", "promote", "web", "-n", rig.ns)).To(ContainSubstring("step 1"))
	g.Eventually(func(g Gomega) {
		got := getCanary(g, rig.ns, "web")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(got.Status.PrimaryRevision).To(Equal(got.Status.Revision))
		g.Expect(image(g, rig.ns, "web-primary")).To(Equal("registry.invalid/app:2"))
		g.Expect(canaryWeight(rig.ns, "web")).To(BeZero())
		var canary appsv1.Deployment
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: rig.ns, Name: "web-canary"}, &canary)).To(Succeed())
		g.Expect(*canary.Spec.Replicas).To(BeZero())
		g.Expect(readyPods(g, rig.ns, "web")).To(Equal(2))
	}, 3*timeout, poll).Should(Succeed())
	seen := weights()
	g.Expect(seen).To(Equal([]int64{0, 20, 60, 100, 0}), "every step's weight, in order, then back to the primary")
	got := getCanary(g, rig.ns, "web")
	verdicts := make([]deliveryv1alpha1.Verdict, 0, len(got.Status.Decisions))
	for _, d := range got.Status.Decisions {
		verdicts = append(verdicts, d.Verdict)
	}
	slices.Reverse(verdicts)
	g.Expect(verdicts).To(Equal([]deliveryv1alpha1.Verdict{deliveryv1alpha1.VerdictPass, deliveryv1alpha1.VerdictPromoted, deliveryv1alpha1.VerdictPass, deliveryv1alpha1.VerdictPass}))
	status := orderlyCLI(t, "canary", "status", "web", "-n", rig.ns)
	g.Expect(status).To(ContainSubstring("Succeeded"))
	g.Expect(status).To(ContainSubstring("error-ratio: Pass"))
	g.Expect(status).To(ContainSubstring("p="))
}

// A canary with a raised error rate is rolled back at the step where it shows, with
// the statistic in the decision record; the primary never stops serving.
func TestCanaryRaisedErrorRateIsRolledBack(t *testing.T) {
	installGatewayAPI(t)
	rig := newCanaryRig(t, "e2e-canary-bad")
	rig.errors("api", 0.01)
	c := rig.canary("api", canaryStep(10), canaryStep(50), canaryStep(100))
	rig.startInitialized(t, c)
	rig.waitScraped(t, "api")
	g := NewWithT(t)
	// Healthy at 10%, then the errors start: detected at the second step.
	setTargetImage(t, rig.ns, "api", "registry.invalid/app:bad")
	g.Eventually(func(g Gomega) {
		got := getCanary(g, rig.ns, "api")
		g.Expect(got.Status.CurrentStep).To(Equal(int32(1)))
		g.Expect(canaryWeight(rig.ns, "api")).To(Equal(int64(50)))
	}, timeout, poll).Should(Succeed())
	rig.errors("api", 0.35)
	g.Eventually(func(g Gomega) {
		got := getCanary(g, rig.ns, "api")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseRolledBack))
		g.Expect(canaryWeight(rig.ns, "api")).To(BeZero())
		var canary appsv1.Deployment
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: rig.ns, Name: "api-canary"}, &canary)).To(Succeed())
		g.Expect(*canary.Spec.Replicas).To(BeZero())
	}, 2*timeout, poll).Should(Succeed())
	got := getCanary(g, rig.ns, "api")
	d := got.Status.Decisions[0]
	g.Expect(d.Verdict).To(Equal(deliveryv1alpha1.VerdictFail))
	g.Expect(d.Step).To(Equal(int32(1)), "rolled back at the step where the errors showed")
	g.Expect(d.Weight).To(Equal(int32(50)))
	m := d.Metrics[0]
	g.Expect(m.Verdict).To(Equal(deliveryv1alpha1.VerdictFail))
	g.Expect(m.Statistic).NotTo(BeEmpty())
	g.Expect(m.PValue).NotTo(BeEmpty())
	g.Expect(m.Effect).NotTo(BeEmpty())
	g.Expect(m.Canary.Count).To(BeNumerically(">=", 4))
	// Before it: the first step passed; the second step's window may first have held
	// too few raised samples to tell (inconclusive, judged again over a longer window),
	// never a pass.
	for _, earlier := range got.Status.Decisions[1:] {
		switch earlier.Step {
		case 0:
			g.Expect(earlier.Verdict).To(Equal(deliveryv1alpha1.VerdictPass), "the first step passed: %+v", earlier)
		case 1:
			g.Expect(earlier.Verdict).To(Equal(deliveryv1alpha1.VerdictInconclusive), "the second step was not passed: %+v", earlier)
		}
	}
	g.Expect(got.Status.Decisions).To(ContainElement(And(HaveField("Step", int32(0)), HaveField("Verdict", deliveryv1alpha1.VerdictPass))))
	g.Expect(image(g, rig.ns, "api-primary")).To(Equal("registry.invalid/app:1"))
	g.Expect(readyPods(g, rig.ns, "api")).To(BeNumerically(">=", 2), "the primary serves throughout")
}

// Prometheus stopped mid-analysis: the Canary holds (traffic stays, visible in the
// status), and is rolled back once maxHold is over; when Prometheus comes back in
// time, the analysis goes on and the revision is promoted.
func TestCanaryHoldsWhilePrometheusIsDown(t *testing.T) {
	installGatewayAPI(t)
	rig := newCanaryRig(t, "e2e-canary-hold")

	t.Run("back in time: promoted", func(t *testing.T) {
		g := NewWithT(t)
		rig.errors("back", 0.01)
		c := rig.canary("back", canaryStep(30), canaryStep(100))
		rig.startInitialized(t, c)
		rig.waitScraped(t, "back")
		setTargetImage(t, rig.ns, "back", "registry.invalid/app:2")
		g.Eventually(func(g Gomega) { g.Expect(canaryWeight(rig.ns, "back")).To(Equal(int64(30))) }, timeout, poll).Should(Succeed())
		g.Expect(rig.prom.Stop()).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := getCanary(g, rig.ns, "back")
			g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHolding))
			g.Expect(got.Status.HoldingSince).NotTo(BeNil())
			g.Expect(canaryCondition(got, deliveryv1alpha1.ConditionProviderAvailable).Status).To(Equal(metav1.ConditionFalse))
			g.Expect(canaryWeight(rig.ns, "back")).To(Equal(int64(30)), "traffic stays where it is")
		}, timeout, poll).Should(Succeed())
		g.Expect(rig.prom.StartAgain()).To(Succeed())
		g.Eventually(func(g Gomega) {
			got := getCanary(g, rig.ns, "back")
			g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
			g.Expect(image(g, rig.ns, "back-primary")).To(Equal("registry.invalid/app:2"))
		}, 2*timeout, poll).Should(Succeed())
		// Right after the restart the window may hold too few samples: that is
		// inconclusive, and judged again over a longer window; never a failed check.
		for _, d := range getCanary(g, rig.ns, "back").Status.Decisions {
			g.Expect(d.Verdict).To(BeElementOf(deliveryv1alpha1.VerdictPass, deliveryv1alpha1.VerdictInconclusive), "the outage is no failed check: %+v", d)
		}
	})

	t.Run("down past maxHold: rolled back", func(t *testing.T) {
		g := NewWithT(t)
		rig.errors("gone", 0.01)
		c := rig.canary("gone", canaryStep(30), canaryStep(100))
		rig.startInitialized(t, c)
		rig.waitScraped(t, "gone")
		setTargetImage(t, rig.ns, "gone", "registry.invalid/app:2")
		g.Eventually(func(g Gomega) { g.Expect(canaryWeight(rig.ns, "gone")).To(Equal(int64(30))) }, timeout, poll).Should(Succeed())
		g.Expect(rig.prom.Stop()).To(Succeed())
		defer func() { _ = rig.prom.StartAgain() }()
		var holdingSince time.Time
		g.Eventually(func(g Gomega) {
			got := getCanary(g, rig.ns, "gone")
			g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHolding))
			holdingSince = got.Status.HoldingSince.Time
		}, timeout, poll).Should(Succeed())
		g.Eventually(func(g Gomega) {
			got := getCanary(g, rig.ns, "gone")
			g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseRolledBack))
			g.Expect(got.Status.Decisions[0].Verdict).To(Equal(deliveryv1alpha1.VerdictHoldExpired))
			g.Expect(canaryWeight(rig.ns, "gone")).To(BeZero())
		}, 2*timeout, poll).Should(Succeed())
		d := getCanary(g, rig.ns, "gone").Status.Decisions[0]
		g.Expect(d.Time.Sub(holdingSince)).To(BeNumerically(">=", 25*time.Second), "not before maxHold")
		g.Expect(image(g, rig.ns, "gone-primary")).To(Equal("registry.invalid/app:1"))
	})
}
