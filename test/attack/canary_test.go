//go:build e2e

package attack

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
)

var gatewayAPIOnce sync.Once

// installGatewayAPI installs the Gateway API standard CRDs into the suite's cluster,
// as `orderly dev up --with gateway-api` does.
func installGatewayAPI(t *testing.T) {
	t.Helper()
	var err error
	gatewayAPIOnce.Do(func() {
		var dir string
		if dir, err = devcluster.GatewayAPICRDDir(context.Background()); err == nil {
			_, err = envtest.InstallCRDs(env.AdminConfig, envtest.CRDInstallOptions{Paths: []string{dir}})
		}
	})
	if err != nil {
		t.Fatalf("installing the Gateway API CRDs: %v", err)
	}
}

// httpRoute is an HTTPRoute in ns that sends hostname's traffic to service.
func httpRoute(ns, name, hostname, service string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "gateway.networking.k8s.io/v1",
		"kind":       "HTTPRoute",
		"metadata":   map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "shared", "namespace": "infra"}},
			"hostnames":  []any{hostname},
			"rules": []any{map[string]any{"backendRefs": []any{
				map[string]any{"name": service, "port": int64(8080)},
			}}},
		},
	}}
	return u
}

// canaryZone is the zone of the hostnames the Canary attacks claim: both teams may
// register names in it (ServiceDomain), and a Canary's created route may carry only
// the names its namespace holds.
const canaryZone = "canary.attack.test"

// claimHostname has a ServiceDomain in ns claim host (in canaryZone) and waits until
// the claim is its own.
func claimHostname(t *testing.T, c client.Client, ns, name, host string) {
	t.Helper()
	sd := &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: networkv1alpha1.ServiceDomainSpec{
		Hostname: host, Service: networkv1alpha1.ServiceRef{Name: name, Port: 8080}, Route: networkv1alpha1.RouteIngress, TLS: networkv1alpha1.TLSNone}}
	create(t, c, sd)
	NewWithT(t).Eventually(func(g Gomega) {
		var claim networkv1alpha1.HostnameClaim
		g.Expect(admin.Get(context.Background(), client.ObjectKey{Name: host}, &claim)).To(Succeed())
		g.Expect(claim.Spec.Holder.Namespace + "/" + claim.Spec.Holder.Name).To(Equal(ns + "/" + name))
	}, timeout, poll).Should(Succeed())
}

// Canary: team-b runs the Deployment web behind its HTTPRoute web, reads metrics with
// a Prometheus token, and holds the hostname shop.canary.attack.test. Mallory aims her
// Canaries at team-b's Deployment and route, names team-b's token Secret, points the
// provider at a host she controls (and has it redirect to another), takes over a route
// in her namespace that is not the Canary's, and has Orderly create a route for
// team-b's hostnames, for a name nobody holds and for no hostname at all.
func TestAttackCanary(t *testing.T) {
	ctx := context.Background()
	installGatewayAPI(t)
	g := NewWithT(t)

	// A zone both teams may use (its records go to external-dns, which does not run
	// here: the claims are what matter), team-b's hostname in it, and hers.
	create(t, admin, &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: "attack-canary"}, Spec: networkv1alpha1.DomainZoneSpec{
		Zone: canaryZone,
		AllowedNamespaces: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: []string{teamA, teamB}}}},
		DNS:    networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderExternalDNS, ResyncInterval: metav1.Duration{Duration: time.Minute}},
		Route:  networkv1alpha1.ZoneRoute{IngressClassName: "attack"},
		Target: networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed, Addresses: []string{"192.0.2.40"}},
	}})
	drainOnCleanup(t, &networkv1alpha1.ServiceDomainList{})
	claimHostname(t, victim, teamB, "shop", "shop."+canaryZone)
	claimHostname(t, attacker, teamA, "probe", "probe."+canaryZone)
	claimHostname(t, attacker, teamA, "mine", "mine."+canaryZone)

	web := deployment(teamB, "web")
	create(t, victim, web)
	bRoute := httpRoute(teamB, "web", "shop.b.attack.test", "web")
	create(t, admin, bRoute) // edit does not grant HTTPRoutes: the platform made it
	bToken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "prometheus"}, StringData: map[string]string{"token": "team-b-prometheus-token"}}
	create(t, victim, bToken)
	mToken := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "prometheus"}, StringData: map[string]string{"token": "mallory-prometheus-token"}}
	create(t, attacker, mToken)
	app := deployment(teamA, "app")
	create(t, attacker, app)
	neverLeave := map[string]string{"team-b's Prometheus token": "team-b-prometheus-token", "the manager's token": managerToken(t)}

	canary := func(name, target string, traffic deliveryv1alpha1.HTTPRouteTraffic, address, secret string) *deliveryv1alpha1.Canary {
		c := &deliveryv1alpha1.Canary{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: name}, Spec: deliveryv1alpha1.CanarySpec{
			TargetRef: deliveryv1alpha1.TargetRef{Name: target},
			Service:   deliveryv1alpha1.CanaryService{Port: 8080},
			Traffic:   deliveryv1alpha1.Traffic{HTTPRoute: &traffic},
			Steps:     []deliveryv1alpha1.Step{{Weight: ptr.To(int32(50)), Interval: &metav1.Duration{Duration: 10 * time.Second}}},
			Analysis: deliveryv1alpha1.Analysis{
				Provider: deliveryv1alpha1.Provider{Address: address, Timeout: metav1.Duration{Duration: 2 * time.Second}},
				Metrics: []deliveryv1alpha1.Metric{{Name: "errors", Query: `sum(rate(errors_total{namespace="{{ .Namespace }}"}[1m]))`, MinSamples: 3,
					Threshold: &deliveryv1alpha1.Threshold{Max: ptr.To("1")}}},
				OnProviderError: deliveryv1alpha1.ProviderErrorHold,
				MaxHold:         metav1.Duration{Duration: time.Minute},
			},
		}}
		if secret != "" {
			c.Spec.Analysis.Provider.SecretRef = &deliveryv1alpha1.SecretRef{Name: secret}
		}
		create(t, attacker, c)
		return c
	}
	conds := func(c *deliveryv1alpha1.Canary) func() []metav1.Condition {
		return func() []metav1.Condition { return c.Status.Conditions }
	}
	webBefore, routeBefore := snap(g, web), snap(g, bRoute)

	t.Run("team-b's Deployment as her target", func(t *testing.T) {
		g := NewWithT(t)
		c := canary("web", "web", deliveryv1alpha1.HTTPRouteTraffic{Name: "web"}, "http://127.0.0.1:9/", "")
		waitCondition(g, c, conds(c), deliveryv1alpha1.ConditionReady, "TargetNotFound")
		untouched(g, web, webBefore)
		for _, n := range []string{"web-primary", "web-canary"} {
			g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: teamB, Name: n}, &appsv1.Deployment{}))).To(BeTrue())
			g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKey{Namespace: teamB, Name: n}, &corev1.Service{}))).To(BeTrue())
		}
	})

	t.Run("team-b's route and Prometheus token", func(t *testing.T) {
		g := NewWithT(t)
		host := startCaptureT(t, nil)
		c := canary("app", "app", deliveryv1alpha1.HTTPRouteTraffic{Name: "web"}, host.URL, "prometheus-b")
		waitCondition(g, c, conds(c), deliveryv1alpha1.ConditionTrafficReady, "RouteNotFound")
		// Control: the Canary works on her own Deployment.
		g.Eventually(func() error {
			return admin.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "app-primary"}, &appsv1.Deployment{})
		}, timeout, poll).Should(Succeed())
		unchanged(g, bRoute, routeBefore)
		// team-b's Secret of that name is never read: without a Secret of her own of
		// that name nothing is sent at all.
		g.Consistently(func() int { return len(host.requests()) }, 3*time.Second, poll).Should(BeZero())
		g.Eventually(func(g Gomega) {
			get(g, c)
			g.Expect(conditionOf(c.Status.Conditions, deliveryv1alpha1.ConditionQueriesValid).Reason).To(Equal("ProviderUnavailable"))
		}, timeout, poll).Should(Succeed())
	})

	t.Run("a provider address on a host she controls, and its redirect", func(t *testing.T) {
		g := NewWithT(t)
		elsewhere := startCaptureT(t, nil)
		other := strings.Replace(elsewhere.URL, "127.0.0.1", "localhost", 1)
		host := startCaptureT(t, func(w http.ResponseWriter, r *http.Request) {
			target := other
			if strings.Contains(r.URL.Path, "query_range") {
				target = elsewhere.URL // same address, another port
			}
			http.Redirect(w, r, target+r.URL.RequestURI(), http.StatusTemporaryRedirect)
		})
		create(t, attacker, deployment(teamA, "probe"))
		c := canary("probe", "probe", deliveryv1alpha1.HTTPRouteTraffic{Name: "probe-route", Create: true,
			ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "shared", Namespace: "infra"}}, Hostnames: []string{"probe." + canaryZone}}, host.URL, mToken.Name)
		g.Eventually(func() []string { return host.headerValues("Authorization") }, timeout, poll).ShouldNot(BeEmpty())
		// Control: her own token is what arrives.
		for _, a := range host.headerValues("Authorization") {
			g.Expect(a).To(Equal("Bearer mallory-prometheus-token"))
		}
		neverContains(g, host, neverLeave)
		// The redirect is not followed: nothing, credentials least of all, reaches
		// the other host.
		g.Consistently(func() []captured { return elsewhere.requests() }, 3*time.Second, poll).Should(BeEmpty())
		get(g, c)
		for _, cond := range c.Status.Conditions {
			g.Expect(cond.Message).NotTo(ContainSubstring("mallory-prometheus-token"))
		}
	})

	t.Run("a route in her namespace that is not the Canary's", func(t *testing.T) {
		g := NewWithT(t)
		teammates := httpRoute(teamA, "teammates", "teammates.a.attack.test", "teammates")
		create(t, admin, teammates)
		before := snap(g, teammates)
		create(t, attacker, deployment(teamA, "takeover"))
		c := canary("takeover", "takeover", deliveryv1alpha1.HTTPRouteTraffic{Name: "teammates", Create: true,
			ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "shared", Namespace: "infra"}}}, "http://127.0.0.1:9/", "")
		waitCondition(g, c, conds(c), deliveryv1alpha1.ConditionTrafficReady, "RouteConflict")
		unchanged(g, teammates, before)
	})

	t.Run("a created route that claims team-b's hostname", func(t *testing.T) {
		g := NewWithT(t)
		routeOf := func(name string) (*unstructured.Unstructured, error) {
			route := httpRoute(teamA, name, "", "")
			return route, admin.Get(ctx, client.ObjectKeyFromObject(route), route)
		}
		for name, tc := range map[string]struct {
			hostnames []string
			reason    string
			says      string
		}{
			// team-b's hostname in a zone she may not use, and in one both may use.
			"hijack":        {[]string{"shop.b.attack.test"}, "HostnameNotClaimed", "shop.b.attack.test"},
			"hijack-shared": {[]string{"mine." + canaryZone, "shop." + canaryZone}, "HostnameNotClaimed", "shop." + canaryZone + " is held by a ServiceDomain of another namespace"},
			// A name nobody holds, a wildcard over team-b's, and no hostname at all
			// (every hostname of the Gateway's listener).
			"unclaimed": {[]string{"free." + canaryZone}, "HostnameNotClaimed", "create a ServiceDomain for it in namespace " + teamA},
			"wildcard":  {[]string{"*." + canaryZone}, "HostnameNotClaimed", "no wildcard"},
			"catch-all": {nil, "HostnameRequired", "every hostname"},
		} {
			create(t, attacker, deployment(teamA, name))
			c := canary(name, name, deliveryv1alpha1.HTTPRouteTraffic{Name: name, Create: true,
				ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "shared", Namespace: "infra"}}, Hostnames: tc.hostnames}, "http://127.0.0.1:9/", "")
			cond := waitCondition(g, c, conds(c), deliveryv1alpha1.ConditionReady, tc.reason)
			g.Expect(cond.Message).To(ContainSubstring(tc.says), name)
			_, err := routeOf(name)
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "route %s was created: %v", name, err)
		}
		unchanged(g, bRoute, routeBefore)
		// Control: a hostname her own ServiceDomain holds gets its route.
		create(t, attacker, deployment(teamA, "own"))
		canary("own", "own", deliveryv1alpha1.HTTPRouteTraffic{Name: "own", Create: true,
			ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "shared", Namespace: "infra"}}, Hostnames: []string{"mine." + canaryZone}}, "http://127.0.0.1:9/", "")
		g.Eventually(func(g Gomega) {
			route, err := routeOf("own")
			g.Expect(err).NotTo(HaveOccurred())
			hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
			g.Expect(hosts).To(Equal([]string{"mine." + canaryZone}))
		}, timeout, poll).Should(Succeed())
	})
}
