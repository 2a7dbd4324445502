//go:build integration

package canary

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/standin/canaryapp"
	"orderly.dev/orderly/internal/testing/testenv"
)

// healthy sets both variants of a target to the same low error ratio.
// 500 requests a second keep the error ratio's noise (about ±0.005 over 3 s) well
// within the allowed absolute shift of 0.02: a healthy canary is never failed by chance.
// It returns once Prometheus has scraped both, so that the first analysis has samples.
func healthy(t *testing.T, ns, target string) {
	t.Helper()
	app.Set(ns, target, deliveryv1alpha1.VariantPrimary, canaryapp.Behaviour{RPS: 500, ErrorRatio: 0.01})
	app.Set(ns, target, deliveryv1alpha1.VariantCanary, canaryapp.Behaviour{RPS: 500, ErrorRatio: 0.01})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, v := range []string{deliveryv1alpha1.VariantPrimary, deliveryv1alpha1.VariantCanary} {
		q := `canaryapp_requests_total{namespace="` + ns + `",target="` + target + `",variant="` + v + `"}`
		NewWithT(t).Expect(prom.WaitForData(ctx, q)).To(Succeed())
	}
}

// initializedCanary creates a target and its Canary, and waits until the primary
// serves and the target is held at zero.
func initializedCanary(t *testing.T, c *deliveryv1alpha1.Canary) {
	t.Helper()
	newTarget(t, c.Namespace, c.Spec.TargetRef.Name, "shop:1", 3)
	create(t, c)
	eventually(t, func(g Gomega) {
		got := getCanary(g, c.Namespace, c.Name)
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
		target := getDeployment(g, c.Namespace, c.Spec.TargetRef.Name)
		g.Expect(*target.Spec.Replicas).To(BeZero())
		g.Expect(target.Annotations).To(HaveKeyWithValue(deliveryv1alpha1.ReplicasAnnotation, "3"))
		primary := getDeployment(g, c.Namespace, c.Spec.TargetRef.Name+"-primary")
		g.Expect(*primary.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(primary.Spec.Template.Spec.Containers[0].Image).To(Equal("shop:1"))
	})
}

func TestHealthyRevisionIsPromotedStepByStep(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "web")
	c := canaryFor(ns, "web", 4*time.Second, 50, 100)
	initializedCanary(t, c)
	p, w := int64(-1), int64(-1)
	eventually(t, func(g Gomega) { p, w = routeWeights(g, ns, "web", "web"); g.Expect(w).To(BeZero()) })
	if p != 100 {
		t.Fatalf("primary weight %d at rest", p)
	}

	setImage(t, ns, "web", "shop:2")
	// Each weight is seen in the route, in order.
	for _, want := range []int64{50, 100} {
		eventually(t, func(g Gomega) {
			_, w := routeWeights(g, ns, "web", "web")
			g.Expect(w).To(Equal(want))
		})
	}
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "web")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(got.Status.PrimaryRevision).To(Equal(got.Status.Revision))
		g.Expect(getDeployment(g, ns, "web-primary").Spec.Template.Spec.Containers[0].Image).To(Equal("shop:2"))
		g.Expect(*getDeployment(g, ns, "web-canary").Spec.Replicas).To(BeZero())
		_, w := routeWeights(g, ns, "web", "web")
		g.Expect(w).To(BeZero())
	})
	got := getCanary(NewWithT(t), ns, "web")
	if len(got.Status.Decisions) < 2 {
		t.Fatalf("decisions %+v", got.Status.Decisions)
	}
	for _, d := range got.Status.Decisions[:2] {
		if d.Verdict != deliveryv1alpha1.VerdictPass || len(d.Metrics) != 1 || d.Metrics[0].PValue == "" || d.Metrics[0].Canary.Count < 3 || d.Metrics[0].Baseline.Count < 3 {
			t.Errorf("decision %+v", d)
		}
	}
	if got.Status.Decisions[0].Step != 1 || got.Status.Decisions[1].Step != 0 {
		t.Errorf("decisions are not newest first: %+v", got.Status.Decisions)
	}
}

func TestRaisedErrorRateIsRolledBackAtTheDetectingStep(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "api")
	c := canaryFor(ns, "api", 4*time.Second, 20, 60, 100)
	initializedCanary(t, c)
	app.Set(ns, "api", deliveryv1alpha1.VariantCanary, canaryapp.Behaviour{RPS: 500, ErrorRatio: 0.3})

	setImage(t, ns, "api", "shop:bad")
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "api")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseRolledBack))
		g.Expect(got.Status.Decisions).NotTo(BeEmpty())
		d := got.Status.Decisions[0]
		g.Expect(d.Verdict).To(Equal(deliveryv1alpha1.VerdictFail))
		g.Expect(d.Step).To(BeZero(), "rolled back at the first step, where the errors show")
		g.Expect(d.Weight).To(Equal(int32(20)))
		g.Expect(d.Metrics[0].PValue).NotTo(BeEmpty())
		g.Expect(d.Metrics[0].Effect).NotTo(BeEmpty())
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Reason).To(Equal("RolledBack"))
		_, w := routeWeights(g, ns, "api", "api")
		g.Expect(w).To(BeZero())
		g.Expect(*getDeployment(g, ns, "api-canary").Spec.Replicas).To(BeZero())
		g.Expect(getDeployment(g, ns, "api-primary").Spec.Template.Spec.Containers[0].Image).To(Equal("shop:1"))
	})
	// It stays rolled back: the failed revision is not tried again.
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(getCanary(g, ns, "api").Status.Phase).To(Equal(deliveryv1alpha1.PhaseRolledBack))
	}, 6*time.Second, 500*time.Millisecond).Should(Succeed())
	var events eventsv1.EventList
	NewWithT(t).Expect(k.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	found := false
	for _, e := range events.Items {
		if e.Reason == "RolledBack" && e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, "worse than the primary") {
			found = true
		}
	}
	if !found {
		t.Errorf("no RolledBack Event saying why among %d Events", len(events.Items))
	}
}

// A new revision during an analysis restarts it from step 0, and traffic goes back to
// the primary before the canary runs the new template: once the canary Deployment is
// seen with the new template, the route gives it nothing until step 0's weight.
// (The Deployment is read before the route each time, so a correct order can never
// fail this; a write of the canary before the route would show as weight 70.)
func TestNewRevisionDuringAnalysisRestartsFromStepZero(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "cart")
	c := canaryFor(ns, "cart", 5*time.Second, 30, 70)
	initializedCanary(t, c)
	setImage(t, ns, "cart", "shop:2")
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "cart")
		g.Expect(got.Status.CurrentStep).To(Equal(int32(1)))
		_, w := routeWeights(g, ns, "cart", "cart")
		g.Expect(w).To(Equal(int64(70)))
	})
	revision2 := getCanary(NewWithT(t), ns, "cart").Status.Revision

	type seen struct {
		image  string
		weight int64
	}
	var (
		mu      sync.Mutex
		history []seen
	)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			g := NewGomega(func(string, ...int) {})
			var d appsv1.Deployment
			if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "cart-canary"}, &d); err == nil {
				_, w := routeWeights(g, ns, "cart", "cart")
				mu.Lock()
				history = append(history, seen{image: d.Spec.Template.Spec.Containers[0].Image, weight: w})
				mu.Unlock()
			}
			select {
			case <-ctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	setImage(t, ns, "cart", "shop:3")
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "cart")
		g.Expect(got.Status.Revision).NotTo(Equal(revision2))
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(getDeployment(g, ns, "cart-primary").Spec.Template.Spec.Containers[0].Image).To(Equal("shop:3"))
	})
	stop()
	<-done

	mu.Lock()
	defer mu.Unlock()
	// Until shop:3 reaches step 0's 30% (after which it goes on to step 1's 70% by
	// itself), the canary running it must have had none of the old step's traffic.
	sawStep0 := false
	for _, s := range history {
		if s.image != "shop:3" {
			continue
		}
		if s.weight == 30 {
			sawStep0 = true
			break
		}
		if s.weight > 0 {
			t.Fatalf("the canary ran shop:3 while the route gave it %d%% before step 0: %+v", s.weight, history)
		}
	}
	if !sawStep0 {
		t.Errorf("shop:3 was not seen at step 0's weight in the canary: %+v", history)
	}
	got := getCanary(NewWithT(t), ns, "cart")
	var steps []int32
	for _, d := range got.Status.Decisions {
		// (An inconclusive analysis, judged again later, would be no error.)
		if d.Revision == got.Status.Revision && d.Verdict != deliveryv1alpha1.VerdictInconclusive {
			steps = append(steps, d.Step)
		}
	}
	if !slices.Equal(steps, []int32{1, 0}) {
		t.Errorf("the new revision's decisions are for steps %v, want [1 0] (newest first, each step once): %+v", steps, got.Status.Decisions)
	}
	found := false
	var events eventsv1.EventList
	NewWithT(t).Expect(k.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		found = found || e.Reason == "Restarted"
	}
	if !found {
		t.Error("no Restarted Event")
	}
}

// A write the API server refuses (here a ResourceQuota that allows no Service) is
// reported in the status with the API server's message, not only logged; once the
// quota is gone, the Canary goes on by itself. (Before the fix the Canary had no
// status at all.)
func TestRefusedWriteIsReported(t *testing.T) {
	ns := newNamespace(t)
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "no-services"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}},
	}
	NewWithT(t).Expect(k.Create(context.Background(), quota)).To(Succeed())
	// envtest runs no quota controller: its status, which admission checks, is set here.
	quota.Status = corev1.ResourceQuotaStatus{
		Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")},
		Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")},
	}
	NewWithT(t).Expect(k.Status().Update(context.Background(), quota)).To(Succeed())
	newTarget(t, ns, "quota", "shop:1", 1)
	create(t, canaryFor(ns, "quota", 4*time.Second, 50))
	eventually(t, func(g Gomega) {
		ready := condition(getCanary(g, ns, "quota"), deliveryv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal("WriteRefused"))
		g.Expect(ready.Message).To(ContainSubstring("quota"))
	})
	NewWithT(t).Expect(k.Delete(context.Background(), quota)).To(Succeed())
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "quota")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	})
}

// Prometheus itself is asked whether a query parses; one it refuses is reported and
// stops the analysis, with Prometheus' own message.
func TestQueryPrometheusRefusesIsReported(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "bad")
	c := canaryFor(ns, "bad", 4*time.Second, 50)
	c.Spec.Analysis.Metrics[0].Query = `sum(rate(canaryapp_requests_total{variant="{{ .Variant }}"}[5s])`
	newTarget(t, ns, "bad", "shop:1", 3)
	create(t, c)
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "bad")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded), "initialized all the same")
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Reason).To(Equal("InvalidQuery"))
		q := condition(got, deliveryv1alpha1.ConditionQueriesValid)
		g.Expect(q.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(q.Reason).To(Equal("InvalidQuery"))
		g.Expect(q.Message).To(ContainSubstring("parse error"))
	})
	setImage(t, ns, "bad", "shop:2")
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "bad")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseProgressing))
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Reason).To(Equal("InvalidQuery"))
	})
	// Fixing the query lets the analysis go on.
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "bad")
		got.Spec.Analysis.Metrics[0].Query = canaryapp.ErrorRatioQuery("3s")
		g.Expect(k.Update(context.Background(), got)).To(Succeed())
	})
	eventually(t, func(g Gomega) {
		g.Expect(getCanary(g, ns, "bad").Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(getDeployment(g, ns, "bad-primary").Spec.Template.Spec.Containers[0].Image).To(Equal("shop:2"))
	})
}

// A user's own route: it must exist; Orderly sets only the weights of the rules that
// send traffic to the primary, and adds the canary beside it.
func TestUserRouteMustExistAndOnlyItsWeightsChange(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "shop")
	c := canaryFor(ns, "shop", 4*time.Second, 30)
	c.Spec.Traffic.HTTPRoute = &deliveryv1alpha1.HTTPRouteTraffic{Name: "storefront"}
	newTarget(t, ns, "shop", "shop:1", 2)
	create(t, c)
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "shop")
		tr := condition(got, deliveryv1alpha1.ConditionTrafficReady)
		g.Expect(tr.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(tr.Reason).To(Equal("RouteNotFound"))
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	})
	route := &unstructured.Unstructured{}
	NewWithT(t).Expect(yaml.Unmarshal([]byte(`
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: storefront}
spec:
  parentRefs: [{name: gateway, namespace: infra}]
  rules:
  - matches: [{path: {type: PathPrefix, value: /shop}}]
    backendRefs: [{name: shop-primary, port: 8080}]
  - matches: [{path: {type: PathPrefix, value: /static}}]
    backendRefs: [{name: static, port: 80}]
`), &route.Object)).To(Succeed())
	route.SetNamespace(ns)
	NewWithT(t).Expect(k.Create(context.Background(), route)).To(Succeed())
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "shop")
		g.Expect(condition(got, deliveryv1alpha1.ConditionTrafficReady).Status).To(Equal(metav1.ConditionTrue))
		p, w := routeWeights(g, ns, "storefront", "shop")
		g.Expect([]int64{p, w}).To(Equal([]int64{100, 0}))
	})
	setImage(t, ns, "shop", "shop:2")
	eventually(t, func(g Gomega) {
		p, w := routeWeights(g, ns, "storefront", "shop")
		g.Expect([]int64{p, w}).To(Equal([]int64{70, 30}))
	})
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(httpRouteKind.WithVersion("v1"))
	NewWithT(t).Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "storefront"}, u)).To(Succeed())
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	static, _, _ := unstructured.NestedSlice(asMap(rules[1]), "backendRefs")
	if len(static) != 1 || asMap(static[0])["name"] != "static" || intOf(asMap(static[0])["weight"], 1) != 1 {
		t.Errorf("another rule was changed: %v", static)
	}
	if len(u.GetOwnerReferences()) != 0 {
		t.Errorf("the user's route got owner references: %v", u.GetOwnerReferences())
	}
}

// Nothing Orderly would create is taken over: a primary Deployment someone else made
// is reported, and left as it is.
func TestExistingPrimaryIsNotTakenOver(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "taken")
	newTarget(t, ns, "taken-primary", "someone:1", 1)
	c := canaryFor(ns, "taken", 4*time.Second, 50)
	newTarget(t, ns, "taken", "shop:1", 2)
	create(t, c)
	eventually(t, func(g Gomega) {
		ready := condition(getCanary(g, ns, "taken"), deliveryv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal("Conflict"))
		g.Expect(ready.Message).To(ContainSubstring("taken-primary"))
	})
	d := getDeployment(NewWithT(t), ns, "taken-primary")
	if d.Spec.Template.Spec.Containers[0].Image != "someone:1" || len(d.OwnerReferences) != 0 {
		t.Errorf("the Deployment someone else made was changed: %+v", d.Spec.Template.Spec.Containers)
	}
	if target := getDeployment(NewWithT(t), ns, "taken"); *target.Spec.Replicas != 2 {
		t.Errorf("the target was scaled to %d", *target.Spec.Replicas)
	}
}

// Deleting a Canary gives the target its replicas back and removes Orderly's
// annotations; the Canary goes once the target is ready.
func TestDeletionRestoresTheTarget(t *testing.T) {
	ns := newNamespace(t)
	healthy(t, ns, "gone")
	c := canaryFor(ns, "gone", 4*time.Second, 50)
	initializedCanary(t, c)
	NewWithT(t).Expect(k.Delete(context.Background(), c)).To(Succeed())
	eventually(t, func(g Gomega) {
		err := k.Get(context.Background(), client.ObjectKeyFromObject(c), &deliveryv1alpha1.Canary{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Canary is gone")
		target := getDeployment(g, ns, "gone")
		g.Expect(*target.Spec.Replicas).To(Equal(int32(3)))
		g.Expect(target.Annotations).NotTo(HaveKey(deliveryv1alpha1.ReplicasAnnotation))
		g.Expect(target.Annotations).NotTo(HaveKey(deliveryv1alpha1.TargetAnnotation))
	})
}

// The provider's Secret is read from the Canary's own namespace, and its token never
// shows in the status or the Events.
func TestProviderSecretComesFromTheCanarysNamespaceAndNeverShows(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	healthy(t, ns, "sec")
	const token = "t0p-s3cret-token-value"
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: other, Name: "prom"},
		StringData: map[string]string{"token": token}})).To(Succeed())
	c := canaryFor(ns, "sec", 4*time.Second, 50)
	c.Spec.Analysis.Provider.SecretRef = &deliveryv1alpha1.SecretRef{Name: "prom"}
	initializedCanary(t, c)
	setImage(t, ns, "sec", "shop:2")
	// The Secret of that name is in another namespace: it is not found, and the
	// analysis holds rather than reading it.
	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "sec")
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseHolding))
		p := condition(got, deliveryv1alpha1.ConditionProviderAvailable)
		g.Expect(p.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(p.Message).To(ContainSubstring("does not exist in namespace " + ns))
	})
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "prom"},
		StringData: map[string]string{"token": token}})).To(Succeed())
	eventually(t, func(g Gomega) {
		g.Expect(getCanary(g, ns, "sec").Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
	})
	got := getCanary(NewWithT(t), ns, "sec")
	status, _ := yaml.Marshal(got.Status)
	if strings.Contains(string(status), token) {
		t.Error("the token is in the status")
	}
	var events eventsv1.EventList
	NewWithT(t).Expect(k.List(context.Background(), &events, client.InNamespace(ns))).To(Succeed())
	for _, e := range events.Items {
		if strings.Contains(e.Note, token) {
			t.Errorf("the token is in Event %s", e.Reason)
		}
	}
}

func TestKubeNamespacesAreLeftAlone(t *testing.T) {
	c := canaryFor("kube-public", "sys", 4*time.Second, 50)
	create(t, c)
	eventually(t, func(g Gomega) {
		got := getCanary(g, "kube-public", "sys")
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Reason).To(Equal("NamespaceNotAllowed"))
		g.Expect(got.Finalizers).To(BeEmpty())
	})
}

// Bad specs are refused by the API server with a clear message.
func TestInvalidSpecsAreRefused(t *testing.T) {
	ns := newNamespace(t)
	for _, tt := range []struct {
		name   string
		change func(*deliveryv1alpha1.Canary)
		want   string
	}{
		{"weights that do not increase", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Steps = []deliveryv1alpha1.Step{weightStep(50, time.Second), weightStep(20, time.Second)}
		}, "step weights must increase"},
		{"a weight above 100", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Steps = []deliveryv1alpha1.Step{weightStep(150, time.Second)}
		}, "less than or equal to 100"},
		{"a weight step without an interval", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Steps = []deliveryv1alpha1.Step{{Weight: ptr.To[int32](10)}}
		}, "a weight step needs an interval"},
		{"a step both weight and pause", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Steps = []deliveryv1alpha1.Step{{Weight: ptr.To[int32](10), Interval: &metav1.Duration{Duration: time.Second}, Pause: true}}
		}, "either a weight"},
		{"only pauses", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Steps = []deliveryv1alpha1.Step{{Pause: true}}
		}, "at least one weight step"},
		{"a metric with both checks", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Analysis.Metrics[0].Threshold = &deliveryv1alpha1.Threshold{Max: ptr.To("1")}
		}, "either a threshold or a baseline"},
		{"a baseline query without the variant", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Analysis.Metrics[0].Query = "up"
		}, "needs {{ .Variant }}"},
		{"an address that is not http", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Analysis.Provider.Address = "file:///etc/passwd"
		}, "http:// or https://"},
		{"a created route without parents", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Traffic.HTTPRoute.ParentRefs = nil
		}, "needs parentRefs"},
		{"no traffic at all", func(c *deliveryv1alpha1.Canary) {
			c.Spec.Traffic = deliveryv1alpha1.Traffic{}
		}, "name an httpRoute"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := canaryFor(ns, "invalid", time.Second, 50)
			tt.change(c)
			err := k.Create(context.Background(), c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// Without the HTTPRoute CRD the Canary says so and waits; installing it lets the
// Canary go on without a restart of the manager. (An API server of its own, so that
// the suite's CRDs are not there.)
func TestHTTPRouteCRDInstalledLater(t *testing.T) {
	own := testenv.StartForTest(t)
	kk := own.Client
	own.StartManagerForTest(t, kit.Deps{Namespace: managerNamespace}, []kit.Controller{Controller})
	ctx := context.Background()
	NewWithT(t).Expect(kk.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "later"}})).To(Succeed())
	app.Set("later", "web", deliveryv1alpha1.VariantPrimary, canaryapp.Behaviour{})
	app.Set("later", "web", deliveryv1alpha1.VariantCanary, canaryapp.Behaviour{})
	NewWithT(t).Expect(kk.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "later", Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}},
	})).To(Succeed())
	standIn, cancel := context.WithCancel(ctx)
	defer cancel()
	go rolloutStandIn(standIn, kk)
	c := canaryFor("later", "web", 2*time.Second, 50)
	claimWith(t, kk, "later", hostnameOf("later", "web"))
	NewWithT(t).Expect(kk.Create(ctx, c)).To(Succeed())
	get := func(g Gomega) *deliveryv1alpha1.Canary {
		var got deliveryv1alpha1.Canary
		g.Expect(kk.Get(ctx, client.ObjectKeyFromObject(c), &got)).To(Succeed())
		return &got
	}
	eventually(t, func(g Gomega) {
		got := get(g)
		tr := condition(got, deliveryv1alpha1.ConditionTrafficReady)
		g.Expect(tr.Reason).To(Equal("HTTPRouteCRDMissing"))
		g.Expect(got.Status.Traffic).To(HaveLen(1))
		g.Expect(got.Status.Traffic[0].Installed).To(BeFalse())
		g.Expect(condition(got, deliveryv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionFalse))
	})
	dir, err := devcluster.GatewayAPICRDDir(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(own.Config, envtest.CRDInstallOptions{Paths: []string{dir}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	eventually(t, func(g Gomega) {
		got := get(g)
		g.Expect(condition(got, deliveryv1alpha1.ConditionTrafficReady).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.Traffic[0].Installed).To(BeTrue())
		g.Expect(got.Status.Traffic[0].Found).To(BeTrue())
	})
}

// The sample is valid: the API server accepts it as written.
func TestSampleIsAccepted(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "delivery_v1alpha1_canary.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ns := newNamespace(t)
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		u := &unstructured.Unstructured{}
		NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		if u.GetKind() != "Canary" {
			continue
		}
		u.SetNamespace(ns)
		NewWithT(t).Expect(k.Create(context.Background(), u, client.DryRunAll)).To(Succeed())
		return
	}
	t.Fatal("no Canary in the sample")
}

// virtualServiceCRD is Istio's own (testdata/crds/README.md).
const virtualServiceCRD = "testdata/crds/networking.istio.io_virtualservices.yaml"

// An Istio VirtualService of the user's: Orderly leaves it as written until the
// first step, then sets the weights of the routes to the primary and adds the
// canary's destination in the same host form, without the primary's subset. A
// route that picks testers by header is left alone throughout.
func TestVirtualServiceRouteWeights(t *testing.T) {
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{virtualServiceCRD}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	ns := newNamespace(t)
	healthy(t, ns, "cart")
	vs := &unstructured.Unstructured{}
	NewWithT(t).Expect(yaml.Unmarshal([]byte(`
apiVersion: networking.istio.io/v1
kind: VirtualService
metadata: {name: cart}
spec:
  hosts: [cart.example.com]
  http:
  - name: testers
    match: [{headers: {x-tester: {exact: "yes"}}}]
    route:
    - destination: {host: cart-primary.`+ns+`.svc.cluster.local, port: {number: 8080}, subset: stable}
  - name: main
    route:
    - destination: {host: cart-primary.`+ns+`.svc.cluster.local, port: {number: 8080}, subset: stable}
`), &vs.Object)).To(Succeed())
	vs.SetNamespace(ns)
	NewWithT(t).Expect(k.Create(context.Background(), vs)).To(Succeed())
	c := canaryFor(ns, "cart", 4*time.Second, 40)
	c.Spec.Traffic = deliveryv1alpha1.Traffic{VirtualService: &deliveryv1alpha1.VirtualServiceTraffic{Name: "cart"}}
	initializedCanary(t, c)
	// weights are the destinations of one route: host (and subset) to weight, -1
	// for none.
	weights := func(g Gomega, route string) map[string]int64 {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(virtualServiceKind.WithVersion("v1"))
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cart"}, u)).To(Succeed())
		http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
		out := map[string]int64{}
		for _, r := range http {
			if asMap(r)["name"] != route {
				continue
			}
			for _, d := range asMap(r)["route"].([]any) {
				host, _, _ := unstructured.NestedString(asMap(d), "destination", "host")
				if subset, _, _ := unstructured.NestedString(asMap(d), "destination", "subset"); subset != "" {
					host += "/" + subset
				}
				out[host] = intOf(asMap(d)["weight"], -1)
			}
		}
		return out
	}
	primaryHost, canaryHost := "cart-primary."+ns+".svc.cluster.local", "cart-canary."+ns+".svc.cluster.local"
	asWritten := map[string]int64{primaryHost + "/stable": -1}
	NewWithT(t).Consistently(func(g Gomega) {
		g.Expect(weights(g, "main")).To(Equal(asWritten), "an idle Canary leaves the VirtualService as written")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	setImage(t, ns, "cart", "shop:2")
	eventually(t, func(g Gomega) {
		g.Expect(weights(g, "main")).To(Equal(map[string]int64{primaryHost + "/stable": 60, canaryHost: 40}))
		g.Expect(weights(g, "testers")).To(Equal(asWritten))
	})
	eventually(t, func(g Gomega) {
		g.Expect(getCanary(g, ns, "cart").Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		g.Expect(weights(g, "main")).To(Equal(map[string]int64{primaryHost + "/stable": 100, canaryHost: 0}))
	})
	g := NewWithT(t)
	g.Expect(weights(g, "testers")).To(Equal(asWritten))
}

// A restart of the manager mid-analysis resumes at the same step and weight, from
// the status: the weight never drops, the step's window is kept, no step is judged
// twice. (An API server and manager of its own, so that the suite's manager is not
// stopped.)
func TestManagerRestartResumesAtTheSameStep(t *testing.T) {
	own := testenv.StartForTest(t)
	kk := own.Client
	ctx := context.Background()
	dir, err := devcluster.GatewayAPICRDDir(ctx)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_, err = envtest.InstallCRDs(own.Config, envtest.CRDInstallOptions{Paths: []string{dir}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	standIn, cancel := context.WithCancel(ctx)
	defer cancel()
	go rolloutStandIn(standIn, kk)
	stop := own.StartManagerForTest(t, kit.Deps{Namespace: managerNamespace}, []kit.Controller{Controller})

	NewWithT(t).Expect(kk.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "restart"}})).To(Succeed())
	healthy(t, "restart", "web")
	NewWithT(t).Expect(kk.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "restart", Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}},
	})).To(Succeed())
	c := canaryFor("restart", "web", 8*time.Second, 30, 100)
	claimWith(t, kk, "restart", hostnameOf("restart", "web"))
	NewWithT(t).Expect(kk.Create(ctx, c)).To(Succeed())
	get := func(g Gomega) *deliveryv1alpha1.Canary {
		var got deliveryv1alpha1.Canary
		g.Expect(kk.Get(ctx, client.ObjectKeyFromObject(c), &got)).To(Succeed())
		return &got
	}
	weight := func(g Gomega) int64 {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(httpRouteKind.WithVersion("v1"))
		g.Expect(kk.Get(ctx, client.ObjectKey{Namespace: "restart", Name: "web"}, u)).To(Succeed())
		rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
		refs, _, _ := unstructured.NestedSlice(asMap(rules[0]), "backendRefs")
		return intOf(asMap(refs[1])["weight"], -1)
	}
	eventually(t, func(g Gomega) { g.Expect(get(g).Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded)) })
	eventually(t, func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(kk.Get(ctx, client.ObjectKey{Namespace: "restart", Name: "web"}, &d)).To(Succeed())
		d.Spec.Template.Spec.Containers[0].Image = "web:2"
		g.Expect(kk.Update(ctx, &d)).To(Succeed())
	})
	var started metav1.Time
	eventually(t, func(g Gomega) {
		got := get(g)
		g.Expect(weight(g)).To(Equal(int64(30)))
		g.Expect(got.Status.StepStartedAt).NotTo(BeNil())
		started = *got.Status.StepStartedAt
	})
	stop()
	// Nothing runs for a while: the world stays where the manager left it.
	NewWithT(t).Consistently(func(g Gomega) { g.Expect(weight(g)).To(Equal(int64(30))) }, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	own.StartManagerForTest(t, kit.Deps{Namespace: managerNamespace}, []kit.Controller{Controller})
	// The new manager goes on with step 0 (8 s long, of which about 4 are left).
	NewWithT(t).Consistently(func(g Gomega) {
		got := get(g)
		g.Expect(weight(g)).To(Equal(int64(30)), "the weight never drops")
		g.Expect(got.Status.CurrentStep).To(BeZero())
		g.Expect(got.Status.StepStartedAt.Time).To(BeTemporally("==", started.Time), "the step's window is kept")
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	eventually(t, func(g Gomega) { g.Expect(get(g).Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded)) })
	got := get(NewWithT(t))
	steps := map[int32]int{}
	for _, d := range got.Status.Decisions {
		steps[d.Step]++
	}
	if steps[0] != 1 || steps[1] != 1 {
		t.Errorf("each step judged once: %v (%+v)", steps, got.Status.Decisions)
	}
}

// A Canary written from Go with the defaulted fields left at their zero values is
// accepted, and the API server fills in the defaults (a zero duration must not be
// sent as "0s", which the validation refuses).
func TestDefaultsApplyToUnsetFields(t *testing.T) {
	ns := newNamespace(t)
	c := canaryFor(ns, "defaults", time.Second, 50)
	c.Spec.Analysis = deliveryv1alpha1.Analysis{
		Provider: deliveryv1alpha1.Provider{Address: "http://prometheus.monitoring:9090"},
		Metrics: []deliveryv1alpha1.Metric{{Name: "errors", Query: `rate(x{v="{{ .Variant }}"}[1m])`,
			Baseline: &deliveryv1alpha1.BaselineComparison{}}},
	}
	NewWithT(t).Expect(k.Create(context.Background(), c, client.DryRunAll)).To(Succeed())
	a := c.Spec.Analysis
	m := a.Metrics[0]
	if a.Provider.Timeout.Duration != 5*time.Second || a.Resolution.Duration != 5*time.Second || a.MaxHold.Duration != 10*time.Minute ||
		a.OnProviderError != deliveryv1alpha1.ProviderErrorHold || a.MaxInconclusive != 3 || m.MinSamples != 10 ||
		m.Baseline.Direction != deliveryv1alpha1.HigherIsWorse || m.Baseline.Alpha != "0.05" || m.Baseline.MaxRelativeShift != "0.1" || m.Baseline.MaxAbsoluteShift != "0" {
		t.Errorf("defaults not applied: %+v", a)
	}
}
