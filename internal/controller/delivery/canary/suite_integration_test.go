//go:build integration

package canary

import (
	"context"
	"fmt"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/standin/canaryapp"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testprom"
)

// The suite runs the controller against a real API server and etcd (envtest), with
// the Gateway API CRDs installed, and a real Prometheus that scrapes the test program
// (canaryapp) whose variants' error ratios the tests set. envtest runs no Deployment
// controller: rolloutStandIn plays its part, so that Deployments become ready.
var (
	k    client.Client
	env  *testenv.Env
	app  *canaryapp.App
	prom *testprom.Server
	seq  atomic.Int32
)

const (
	timeout          = 60 * time.Second
	poll             = 100 * time.Millisecond
	managerNamespace = "orderly-test-system"
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		env, k = e, e.Client
		dir, err := devcluster.GatewayAPICRDDir(context.Background())
		if err != nil {
			return nil, err
		}
		if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{dir}}); err != nil {
			return nil, fmt.Errorf("installing the Gateway API CRDs: %w", err)
		}
		if app, err = canaryapp.Start(); err != nil {
			return nil, err
		}
		if prom, err = testprom.Start(testprom.Options{Targets: []string{app.Address}}); err != nil {
			app.Close()
			return nil, err
		}
		ctx, cancel := context.WithCancel(context.Background())
		go rolloutStandIn(ctx, k)
		stop, err := e.StartManager(kit.Deps{Namespace: managerNamespace}, []kit.Controller{Controller})
		return func() {
			if stop != nil {
				stop()
			}
			cancel()
			prom.Close()
			app.Close()
		}, err
	})
}

// rolloutStandIn does what the Deployment controller and kubelets would: it reports
// every Deployment as rolled out, with all its replicas available.
func rolloutStandIn(ctx context.Context, c client.Client) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		var list appsv1.DeploymentList
		if err := c.List(ctx, &list); err != nil {
			continue
		}
		for i := range list.Items {
			d := &list.Items[i]
			n := ptr.Deref(d.Spec.Replicas, 1)
			s := &d.Status
			if s.ObservedGeneration == d.Generation && s.Replicas == n && s.UpdatedReplicas == n && s.ReadyReplicas == n && s.AvailableReplicas == n {
				continue
			}
			d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
			if err := c.Status().Update(ctx, d); err != nil && ctx.Err() == nil {
				fmt.Fprintln(os.Stderr, "rollout stand-in:", err)
			}
		}
	}
}

func eventually(t *testing.T, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(f, timeout, poll).Should(Succeed())
}

// newNamespace creates a namespace of the test's own.
func newNamespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("canary-%d", seq.Add(1))
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
	return name
}

func newTarget(t *testing.T, ns, name, image string, replicas int32) {
	t.Helper()
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
	NewWithT(t).Expect(k.Create(context.Background(), d)).To(Succeed())
}

// setImage gives the target a new pod template: a new revision.
func setImage(t *testing.T, ns, name, image string) {
	t.Helper()
	eventually(t, func(g Gomega) {
		var d appsv1.Deployment
		g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		d.Spec.Template.Spec.Containers[0].Image = image
		g.Expect(k.Update(context.Background(), &d)).To(Succeed())
	})
}

// canaryFor is a Canary of the target with an HTTPRoute that Orderly creates, steps of
// the given weights at interval, and one metric: the error ratio, canary against
// primary.
func canaryFor(ns, target string, interval time.Duration, weights ...int32) *deliveryv1alpha1.Canary {
	steps := make([]deliveryv1alpha1.Step, 0, len(weights))
	for _, w := range weights {
		steps = append(steps, deliveryv1alpha1.Step{Weight: ptr.To(w), Interval: &metav1.Duration{Duration: interval}})
	}
	return &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: target},
		Spec: deliveryv1alpha1.CanarySpec{
			TargetRef: deliveryv1alpha1.TargetRef{Name: target},
			Service:   deliveryv1alpha1.CanaryService{Port: 8080},
			Traffic: deliveryv1alpha1.Traffic{HTTPRoute: &deliveryv1alpha1.HTTPRouteTraffic{
				Name: target, Create: true, ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "gateway", Namespace: "infra"}},
				Hostnames: []string{hostnameOf(ns, target)},
			}},
			Steps: steps,
			Analysis: deliveryv1alpha1.Analysis{
				Provider:   deliveryv1alpha1.Provider{Address: prom.URL, Timeout: metav1.Duration{Duration: 2 * time.Second}},
				Resolution: metav1.Duration{Duration: time.Second},
				Metrics: []deliveryv1alpha1.Metric{{
					Name: "error-ratio", Query: canaryapp.ErrorRatioQuery("3s"), MinSamples: 3,
					Baseline: &deliveryv1alpha1.BaselineComparison{Direction: deliveryv1alpha1.HigherIsWorse, MaxRelativeShift: "0.1", MaxAbsoluteShift: "0.02", Alpha: "0.05"},
				}},
				OnProviderError: deliveryv1alpha1.ProviderErrorHold,
				MaxHold:         metav1.Duration{Duration: time.Minute},
				MaxInconclusive: 3,
			},
		},
	}
}

// create creates c, after claiming for its namespace the hostnames of the route
// Orderly creates for it.
func create(t *testing.T, c *deliveryv1alpha1.Canary) {
	t.Helper()
	if h := c.Spec.Traffic.HTTPRoute; h != nil && h.Create {
		for _, host := range h.Hostnames {
			claim(t, c.Namespace, host)
		}
	}
	NewWithT(t).Expect(k.Create(context.Background(), c)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), c) })
}

// hostnameOf is the hostname of target's created route in namespace ns.
func hostnameOf(ns, target string) string { return target + "." + ns + ".example.test" }

// claim makes ns hold host as the ServiceDomain controller would (it does not run in
// this suite): a ServiceDomain in ns, and the HostnameClaim naming it. It returns the
// ServiceDomain.
func claim(t *testing.T, ns, host string) *networkv1alpha1.ServiceDomain {
	t.Helper()
	return claimWith(t, k, ns, host)
}

// claimWith is claim on the API server of k.
func claimWith(t *testing.T, k client.Client, ns, host string) *networkv1alpha1.ServiceDomain {
	t.Helper()
	ctx := context.Background()
	sd := &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(host, ".", "-")},
		Spec: networkv1alpha1.ServiceDomainSpec{Hostname: host, Service: networkv1alpha1.ServiceRef{Name: "web", Port: 8080}}}
	NewWithT(t).Expect(k.Create(ctx, sd)).To(Succeed())
	c := &networkv1alpha1.HostnameClaim{ObjectMeta: metav1.ObjectMeta{Name: host}, Spec: networkv1alpha1.HostnameClaimSpec{
		Hostname: host, Holder: networkv1alpha1.ClaimHolder{Namespace: ns, Name: sd.Name, UID: string(sd.UID)}}}
	NewWithT(t).Expect(k.Create(ctx, c)).To(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), c)
		_ = k.Delete(context.Background(), sd)
	})
	return sd
}

func getCanary(g Gomega, ns, name string) *deliveryv1alpha1.Canary {
	var c deliveryv1alpha1.Canary
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &c)).To(Succeed())
	return &c
}

func getDeployment(g Gomega, ns, name string) *appsv1.Deployment {
	var d appsv1.Deployment
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
	return &d
}

func condition(c *deliveryv1alpha1.Canary, typ string) metav1.Condition {
	if cond := meta.FindStatusCondition(c.Status.Conditions, typ); cond != nil {
		return *cond
	}
	return metav1.Condition{}
}

// routeWeights returns the primary's and the canary's weights in an HTTPRoute's first
// rule that names them.
func routeWeights(g Gomega, ns, name, target string) (primary, canary int64) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(httpRouteKind.WithVersion("v1"))
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	primary, canary = -1, -1
	for _, rule := range rules {
		refs, _, _ := unstructured.NestedSlice(asMap(rule), "backendRefs")
		for _, ref := range refs {
			switch asMap(ref)["name"] {
			case target + "-primary":
				primary = intOf(asMap(ref)["weight"], 1)
			case target + "-canary":
				canary = intOf(asMap(ref)["weight"], 1)
			}
		}
	}
	return primary, canary
}
