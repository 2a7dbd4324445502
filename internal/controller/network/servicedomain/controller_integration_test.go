//go:build integration

package servicedomain

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/dnsupdate"
)

func httpRoute(ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("gateway.networking.k8s.io/v1")
	u.SetKind("HTTPRoute")
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// A ServiceDomain publishes its record with an ownership TXT (resolvable by a real
// query), writes its HTTPRoute, repairs the record when it is deleted or changed by
// hand, and on deletion removes its record, TXT, route and claim.
func TestRecordPublishedRepairedAndRemoved(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "shop." + zoneFixed
	sd := newDomain(t, ns, "shop", host, func(sd *networkv1alpha1.ServiceDomain) { sd.Spec.Paths = []string{"/api", "/"} })
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")

	owner := dnsupdate.OwnerValue(ns, "shop")
	eventually(t, func(g Gomega) {
		g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf(fixedAddr))
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(ConsistOf(owner))
	})
	var got networkv1alpha1.ServiceDomain
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(sd), &got)).To(Succeed())
	NewWithT(t).Expect(got.Status.DNS.Record).To(Equal("A " + fixedAddr))
	NewWithT(t).Expect(got.Status.DNS.TargetSource).To(ContainSubstring("DomainZone fixed"))
	NewWithT(t).Expect(got.Status.Route).To(Equal(networkv1alpha1.RouteStatus{Kind: "HTTPRoute", Name: "shop"}))

	route := httpRoute(ns, "shop")
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
	hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
	NewWithT(t).Expect(hosts).To(ConsistOf(host))
	parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	NewWithT(t).Expect(parents).To(HaveLen(1))
	NewWithT(t).Expect(parents[0]).To(HaveKeyWithValue("name", gatewayName))
	NewWithT(t).Expect(parents[0]).To(HaveKeyWithValue("namespace", gatewayNamespace))
	rules, _, _ := unstructured.NestedSlice(route.Object, "spec", "rules")
	NewWithT(t).Expect(rules).To(HaveLen(1))
	NewWithT(t).Expect(rules[0].(map[string]any)["matches"]).To(HaveLen(2))
	NewWithT(t).Expect(rules[0].(map[string]any)["backendRefs"]).To(ConsistOf(HaveKeyWithValue("port", BeNumerically("==", 8080))))

	// Deleted by hand: repaired at the next resync (1s in this zone).
	NewWithT(t).Expect(dns.UpdateZone(zoneFixed, func(m *mdns.Msg) {
		m.RemoveRRset([]mdns.RR{&mdns.A{Hdr: mdns.RR_Header{Name: mdns.Fqdn(host), Rrtype: mdns.TypeA, Class: mdns.ClassINET}}})
	})).To(Succeed())
	NewWithT(t).Expect(dns.Query(host, mdns.TypeA)).To(BeEmpty())
	eventually(t, func(g Gomega) { g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf(fixedAddr)) })

	// Changed by hand: repaired too.
	rr, _ := mdns.NewRR(host + ". 60 IN A 198.51.100.66")
	NewWithT(t).Expect(dns.UpdateZone(zoneFixed, func(m *mdns.Msg) { m.Insert([]mdns.RR{rr}) })).To(Succeed())
	eventually(t, func(g Gomega) { g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf(fixedAddr)) })

	deleteAndWait(t, sd)
	eventually(t, func(g Gomega) {
		g.Expect(query(g, host, mdns.TypeA)).To(BeEmpty())
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(BeEmpty())
	})
	err := k.Get(ctx, client.ObjectKeyFromObject(route), route)
	NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the HTTPRoute is left: %v", err)
	err = k.Get(ctx, client.ObjectKey{Name: host}, &networkv1alpha1.HostnameClaim{})
	NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the claim is left: %v", err)
	// The zone's own records are untouched.
	NewWithT(t).Expect(dns.Query("ns1."+zoneFixed, mdns.TypeA)).To(ConsistOf("127.0.0.1"))
}

// Two ServiceDomains claim one hostname: the first wins, the second reports Conflict
// and writes nothing; deleting the second removes nothing of the first's; once the
// first goes, the second takes the hostname over.
func TestSecondClaimConflictsAndTouchesNothing(t *testing.T) {
	ctx := context.Background()
	nsA, nsB := newNamespace(t, nil), newNamespace(t, nil)
	newService(t, nsA)
	newService(t, nsB)
	host := "pay." + zoneFixed
	first := newDomain(t, nsA, "pay", host)
	expectCondition(t, first, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")

	second := newDomain(t, nsB, "pay", host)
	expectCondition(t, second, networkv1alpha1.ConditionReady, metav1.ConditionFalse, "Conflict")
	eventually(t, func(g Gomega) {
		c := condition(g, second, networkv1alpha1.ConditionReady)
		g.Expect(c.Message).To(ContainSubstring("already claimed by ServiceDomain " + nsA + "/pay"))
	})
	err := k.Get(ctx, client.ObjectKeyFromObject(httpRoute(nsB, "pay")), httpRoute(nsB, "pay"))
	NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the loser wrote an HTTPRoute: %v", err)
	NewWithT(t).Expect(dns.Query(dnsupdate.OwnerName(host), mdns.TypeTXT)).To(ConsistOf(dnsupdate.OwnerValue(nsA, "pay")))

	deleteAndWait(t, second)
	consistently(t, 2*time.Second, func(g Gomega) {
		g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf(fixedAddr))
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(ConsistOf(dnsupdate.OwnerValue(nsA, "pay")))
		var claim networkv1alpha1.HostnameClaim
		g.Expect(k.Get(ctx, client.ObjectKey{Name: host}, &claim)).To(Succeed())
		g.Expect(claim.Spec.Holder.Namespace).To(Equal(nsA))
	})

	// The first goes: a new claimant takes over, with its own TXT.
	third := newDomain(t, nsB, "pay2", host)
	expectCondition(t, third, networkv1alpha1.ConditionReady, metav1.ConditionFalse, "Conflict")
	deleteAndWait(t, first)
	expectCondition(t, third, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	eventually(t, func(g Gomega) {
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(ConsistOf(dnsupdate.OwnerValue(nsB, "pay2")))
	})
	deleteAndWait(t, third)
}

// A hostname that already has records Orderly did not write is never touched, not
// even when the ServiceDomain is deleted.
func TestForeignRecordIsNeverTouched(t *testing.T) {
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "legacy." + zoneFixed
	rr, _ := mdns.NewRR(host + ". 60 IN A 198.51.100.7")
	NewWithT(t).Expect(dns.UpdateZone(zoneFixed, func(m *mdns.Msg) { m.Insert([]mdns.RR{rr}) })).To(Succeed())

	sd := newDomain(t, ns, "legacy", host)
	expectCondition(t, sd, networkv1alpha1.ConditionDNSReady, metav1.ConditionFalse, "Conflict")
	eventually(t, func(g Gomega) {
		g.Expect(condition(g, sd, networkv1alpha1.ConditionDNSReady).Message).To(ContainSubstring("Orderly did not write"))
	})
	consistently(t, 2*time.Second, func(g Gomega) {
		g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf("198.51.100.7"))
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(BeEmpty())
	})
	deleteAndWait(t, sd)
	NewWithT(t).Expect(dns.Query(host, mdns.TypeA)).To(ConsistOf("198.51.100.7"))
}

// A Gateway that does not exist is reported; once it exists and reports an address,
// the record takes that address.
func TestGatewayMissingThenAddress(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "api." + zoneRoute
	sd := newDomain(t, ns, "api", host)
	expectCondition(t, sd, networkv1alpha1.ConditionRouteReady, metav1.ConditionFalse, "GatewayNotFound")
	expectCondition(t, sd, networkv1alpha1.ConditionDNSReady, metav1.ConditionFalse, "WaitingForRoute")
	// The route is written all the same, with the listener the zone names.
	route := httpRoute(ns, "api")
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(route), route)).To(Succeed())
	parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
	NewWithT(t).Expect(parents).To(ConsistOf(HaveKeyWithValue("sectionName", "http")))

	gw := gateway(lateGW)
	NewWithT(t).Expect(k.Create(ctx, gw)).To(Succeed())
	expectCondition(t, sd, networkv1alpha1.ConditionDNSReady, metav1.ConditionFalse, "WaitingForAddress")
	NewWithT(t).Expect(unstructured.SetNestedSlice(gw.Object, []any{map[string]any{"type": "IPAddress", "value": "203.0.113.5"}}, "status", "addresses")).To(Succeed())
	NewWithT(t).Expect(k.Status().Update(ctx, gw)).To(Succeed())
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	eventually(t, func(g Gomega) { g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf("203.0.113.5")) })
	var got networkv1alpha1.ServiceDomain
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(sd), &got)).To(Succeed())
	NewWithT(t).Expect(got.Status.DNS.TargetSource).To(Equal("Gateway " + gatewayNamespace + "/" + lateGW + " status.addresses"))
	deleteAndWait(t, sd)
}

// A namespace the zone does not allow gets HostnameNotAllowed and nothing is
// claimed; a hostname that is not a DNS name is refused by the API server.
func TestNotAllowedAndInvalid(t *testing.T) {
	ctx := context.Background()
	red := newNamespace(t, map[string]string{"team": "red"})
	sd := newDomain(t, red, "x", "x."+zoneTeam)
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionFalse, "HostnameNotAllowed")
	consistently(t, time.Second, func(g Gomega) {
		err := k.Get(ctx, client.ObjectKey{Name: "x." + zoneTeam}, &networkv1alpha1.HostnameClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "claimed: %v", err)
	})
	blue := newNamespace(t, map[string]string{"team": "blue"})
	ok := newDomain(t, blue, "x", "x."+zoneTeam)
	// No Service: reported on the route, which is written anyway.
	expectCondition(t, ok, networkv1alpha1.ConditionRouteReady, metav1.ConditionFalse, "ServiceNotFound")
	expectCondition(t, ok, networkv1alpha1.ConditionDNSReady, metav1.ConditionTrue, "Published")
	newService(t, blue)
	expectCondition(t, ok, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")

	outside := newDomain(t, blue, "y", "y.elsewhere.test")
	expectCondition(t, outside, networkv1alpha1.ConditionReady, metav1.ConditionFalse, "NoZone")

	for _, host := range []string{"Upper.team.example.test", "under_score.team.example.test", "single", "trailing.dot.", "*.team.example.test"} {
		bad := &networkv1alpha1.ServiceDomain{
			ObjectMeta: metav1.ObjectMeta{Namespace: blue, Name: "bad"},
			Spec:       networkv1alpha1.ServiceDomainSpec{Hostname: host, Service: networkv1alpha1.ServiceRef{Name: "web", Port: 80}},
		}
		err := k.Create(ctx, bad)
		NewWithT(t).Expect(apierrors.IsInvalid(err)).To(BeTrue(), "hostname %q: %v", host, err)
	}
	// The hostname cannot change.
	var cur networkv1alpha1.ServiceDomain
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(ok), &cur)).To(Succeed())
	cur.Spec.Hostname = "z." + zoneTeam
	NewWithT(t).Expect(apierrors.IsInvalid(k.Update(ctx, &cur))).To(BeTrue())
	deleteAndWait(t, ok)
	deleteAndWait(t, sd)
	deleteAndWait(t, outside)
}

// The Service is watched: in a zone that resyncs every 10 minutes, its creation and
// its deletion reach the ServiceDomain within the test's timeout only through the
// watch.
func TestServiceCreatedAndDeleted(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	sd := newDomain(t, ns, "late-svc", "late-svc."+zoneTLS)
	expectCondition(t, sd, networkv1alpha1.ConditionRouteReady, metav1.ConditionFalse, "ServiceNotFound")
	newService(t, ns)
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	NewWithT(t).Expect(k.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})).To(Succeed())
	expectCondition(t, sd, networkv1alpha1.ConditionRouteReady, metav1.ConditionFalse, "ServiceNotFound")
	deleteAndWait(t, sd)
}

// A namespace that loses its zone (its label no longer matches allowedNamespaces)
// has its ServiceDomain withdrawn: record, ownership TXT, route and claim removed,
// status naming none of them; given the zone back, it is registered again.
func TestLosingTheZoneWithdrawsTheRegistration(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, map[string]string{"team": "blue"})
	newService(t, ns)
	host := "leaving." + zoneTeam
	sd := newDomain(t, ns, "leaving", host)
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	eventually(t, func(g Gomega) { g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf(fixedAddr)) })

	relabel := func(team string) {
		var n corev1.Namespace
		NewWithT(t).Expect(k.Get(ctx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		n.Labels["team"] = team
		NewWithT(t).Expect(k.Update(ctx, &n)).To(Succeed())
	}
	relabel("red")
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionFalse, "HostnameNotAllowed")
	eventually(t, func(g Gomega) {
		g.Expect(query(g, host, mdns.TypeA)).To(BeEmpty())
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(BeEmpty())
		err := k.Get(ctx, client.ObjectKeyFromObject(httpRoute(ns, "leaving")), httpRoute(ns, "leaving"))
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the HTTPRoute is left: %v", err)
		err = k.Get(ctx, client.ObjectKey{Name: host}, &networkv1alpha1.HostnameClaim{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the claim is left: %v", err)
		var got networkv1alpha1.ServiceDomain
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(sd), &got)).To(Succeed())
		g.Expect(got.Status.DNS.Record).To(BeEmpty())
		g.Expect(got.Status.Route.Name).To(BeEmpty())
		g.Expect(got.Finalizers).To(BeEmpty(), "nothing is left to clean up")
	})

	relabel("blue")
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	eventually(t, func(g Gomega) { g.Expect(query(g, host, mdns.TypeA)).To(ConsistOf(fixedAddr)) })
	deleteAndWait(t, sd)
}

// route: Ingress writes an Ingress of the zone's class, whose load balancer address
// becomes the record's value when the zone takes its target from the route.
func TestIngressRoute(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "ing." + zoneFixed
	sd := newDomain(t, ns, "ing", host, func(sd *networkv1alpha1.ServiceDomain) { sd.Spec.Route = networkv1alpha1.RouteIngress })
	expectCondition(t, sd, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	var ing networkingv1.Ingress
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ing"}, &ing)).To(Succeed())
	NewWithT(t).Expect(*ing.Spec.IngressClassName).To(Equal("nginx"))
	NewWithT(t).Expect(ing.Spec.Rules).To(HaveLen(1))
	NewWithT(t).Expect(ing.Spec.Rules[0].Host).To(Equal(host))
	NewWithT(t).Expect(ing.Spec.TLS).To(BeEmpty(), "tls None: no TLS section")
	NewWithT(t).Expect(metav1.IsControlledBy(&ing, sd)).To(BeTrue())
	deleteAndWait(t, sd)
	err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ing"}, &ing)
	NewWithT(t).Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the Ingress is left: %v", err)
}

// A TSIG key the server does not accept is reported on DNSReady, and no key (the
// wrong one, nor the server's) appears in the status or the Events.
func TestWrongKeyReportedWithoutTheKey(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t, nil)
	newService(t, ns)
	host := "k." + zoneBadKey
	sd := newDomain(t, ns, "k", host)
	eventually(t, func(g Gomega) {
		c := condition(g, sd, networkv1alpha1.ConditionDNSReady)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(BeElementOf("UpdateFailed", "DNSServerUnreachable"), c.Message)
		g.Expect(c.Message).To(ContainSubstring(dns.Addr))
	})
	NewWithT(t).Expect(dns.Query(host, mdns.TypeA)).To(BeEmpty())
	var got networkv1alpha1.ServiceDomain
	NewWithT(t).Expect(k.Get(ctx, client.ObjectKeyFromObject(sd), &got)).To(Succeed())
	status, _ := json.Marshal(got.Status)
	var events eventsv1.EventList
	NewWithT(t).Expect(k.List(ctx, &events, client.InNamespace(ns))).To(Succeed())
	all, _ := json.Marshal(events.Items)
	for _, key := range []string{wrongKey, dns.KeySecret} {
		NewWithT(t).Expect(string(status)).NotTo(ContainSubstring(key))
		NewWithT(t).Expect(string(all)).NotTo(ContainSubstring(key))
	}
	deleteAndWait(t, sd)
}

// The claim lives in the cluster: a manager that starts after the first ServiceDomain
// won still refuses the second, and leaves the first's record alone.
func TestClaimSurvivesRestart(t *testing.T) {
	nsA, nsB := newNamespace(t, nil), newNamespace(t, nil)
	newService(t, nsA)
	newService(t, nsB)
	host := "restart." + zoneFixed
	first := newDomain(t, nsA, "r", host)
	expectCondition(t, first, networkv1alpha1.ConditionReady, metav1.ConditionTrue, "Ready")
	stopManager()
	second := newDomain(t, nsB, "r", host)
	NewWithT(t).Expect(restartManager()).To(Succeed())
	expectCondition(t, second, networkv1alpha1.ConditionReady, metav1.ConditionFalse, "Conflict")
	consistently(t, 2*time.Second, func(g Gomega) {
		g.Expect(query(g, dnsupdate.OwnerName(host), mdns.TypeTXT)).To(ConsistOf(dnsupdate.OwnerValue(nsA, "r")))
		g.Expect(condition(g, first, networkv1alpha1.ConditionReady).Status).To(Equal(metav1.ConditionTrue))
	})
	deleteAndWait(t, second)
	deleteAndWait(t, first)
}
