//go:build e2e

package attack

import (
	"context"
	"net"
	"testing"
	"time"

	mdns "github.com/miekg/dns"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/dnsupdate"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testdns"
)

// ServiceDomain, DomainZone and HostnameClaim: one BIND serves three zones, each a
// DomainZone with a fixed address: a.attack.test (team-a only), b.attack.test (team-b
// only) and shared.attack.test (both). Team-b holds shop.b.attack.test and
// store.shared.attack.test. Mallory claims hostnames in team-b's zone, team-b's
// hostname in the shared zone, a name in no zone, and a name in her zone whose record
// someone else wrote; and has Orderly take over an Ingress in her namespace that is
// not her ServiceDomain's.
func TestAttackServiceDomain(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	dns, err := testdns.Start("a.attack.test", "b.attack.test", "shared.attack.test")
	if err != nil {
		t.Fatalf("starting named: %v", err)
	}
	t.Cleanup(dns.Close)
	tsig := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "attack-tsig"},
		StringData: map[string]string{"name": testdns.KeyName, "algorithm": testdns.KeyAlgorithm, "secret": dns.KeySecret}}
	create(t, admin, tsig)
	zone := func(name, domain, address string, allowed ...string) {
		create(t, admin, &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: networkv1alpha1.DomainZoneSpec{
			Zone: domain,
			AllowedNamespaces: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
				Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: allowed}}},
			DNS: networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderRFC2136, ResyncInterval: metav1.Duration{Duration: 5 * time.Second},
				RFC2136: &networkv1alpha1.RFC2136{Server: dns.Addr, TSIGSecretRef: networkv1alpha1.LocalSecretRef{Name: tsig.Name}, TTL: 60}},
			Route:  networkv1alpha1.ZoneRoute{IngressClassName: "attack"},
			Target: networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed, Addresses: []string{address}},
		}})
	}
	zone("attack-a", "a.attack.test", "192.0.2.10", teamA)
	zone("attack-b", "b.attack.test", "192.0.2.20", teamB)
	zone("attack-shared", "shared.attack.test", "192.0.2.30", teamA, teamB)
	for ns, svc := range map[string]string{teamA: "web", teamB: "shop"} {
		create(t, admin, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: svc}, Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 8080}}}})
	}
	drainOnCleanup(t, &networkv1alpha1.ServiceDomainList{})
	sd := func(c client.Client, ns, name, host, svc string) *networkv1alpha1.ServiceDomain {
		s := &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: networkv1alpha1.ServiceDomainSpec{
			Hostname: host, Service: networkv1alpha1.ServiceRef{Name: svc, Port: 8080}, Route: networkv1alpha1.RouteIngress, TLS: networkv1alpha1.TLSNone}}
		create(t, c, s)
		return s
	}
	condition := func(g Gomega, s *networkv1alpha1.ServiceDomain, typ, reason string) {
		waitCondition(g, s, func() []metav1.Condition { return s.Status.Conditions }, typ, reason)
	}
	records := func(g Gomega, host string) []string {
		a, err := dns.Query(host, mdns.TypeA)
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return a
	}
	owner := func(g Gomega, host string) []string {
		txt, err := dns.Query(dnsupdate.OwnerName(host), mdns.TypeTXT)
		g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
		return txt
	}
	published := func(g Gomega, host, address, ns, name string) {
		g.EventuallyWithOffset(1, func(g Gomega) {
			g.Expect(records(g, host)).To(ConsistOf(address))
			g.Expect(owner(g, host)).To(ConsistOf(dnsupdate.OwnerValue(ns, name)))
		}, timeout, poll).Should(Succeed())
	}
	claimedBy := func(g Gomega, host, ns, name string) {
		var c networkv1alpha1.HostnameClaim
		g.ExpectWithOffset(1, admin.Get(ctx, client.ObjectKey{Name: host}, &c)).To(Succeed())
		g.ExpectWithOffset(1, c.Spec.Holder.Namespace+"/"+c.Spec.Holder.Name).To(Equal(ns + "/" + name))
	}
	unclaimed := func(g Gomega, host string) {
		err := admin.Get(ctx, client.ObjectKey{Name: host}, &networkv1alpha1.HostnameClaim{})
		g.ExpectWithOffset(1, apierrors.IsNotFound(err)).To(BeTrue(), "%s is claimed", host)
	}

	// Team-b's hostnames, and (the control) mallory's own.
	bShop := sd(victim, teamB, "shop", "shop.b.attack.test", "shop")
	bStore := sd(victim, teamB, "store", "store.shared.attack.test", "shop")
	mine := sd(attacker, teamA, "web", "web.a.attack.test", "web")
	published(g, "shop.b.attack.test", "192.0.2.20", teamB, bShop.Name)
	published(g, "store.shared.attack.test", "192.0.2.30", teamB, bStore.Name)
	published(g, "web.a.attack.test", "192.0.2.10", teamA, mine.Name)
	claimedBy(g, "web.a.attack.test", teamA, mine.Name)

	t.Run("a hostname in a zone that does not allow her", func(t *testing.T) {
		g := NewWithT(t)
		for name, host := range map[string]string{"evil": "evil.b.attack.test", "shop-b": "shop.b.attack.test"} {
			s := sd(attacker, teamA, name, host, "web")
			condition(g, s, networkv1alpha1.ConditionReady, "HostnameNotAllowed")
		}
		g.Expect(records(g, "evil.b.attack.test")).To(BeEmpty())
		g.Expect(owner(g, "evil.b.attack.test")).To(BeEmpty())
		unclaimed(g, "evil.b.attack.test")
		g.Expect(records(g, "shop.b.attack.test")).To(ConsistOf("192.0.2.20"))
		claimedBy(g, "shop.b.attack.test", teamB, bShop.Name)
	})

	t.Run("team-b's hostname in a zone both may use", func(t *testing.T) {
		g := NewWithT(t)
		s := sd(attacker, teamA, "store", "store.shared.attack.test", "web")
		condition(g, s, networkv1alpha1.ConditionReady, "Conflict")
		g.Expect(records(g, "store.shared.attack.test")).To(ConsistOf("192.0.2.30"))
		g.Expect(owner(g, "store.shared.attack.test")).To(ConsistOf(dnsupdate.OwnerValue(teamB, bStore.Name)))
		claimedBy(g, "store.shared.attack.test", teamB, bStore.Name)
		// Her losing claim's deletion removes nothing of team-b's.
		g.Expect(attacker.Delete(ctx, s)).To(Succeed())
		g.Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(s), s)) }, timeout, poll).Should(BeTrue())
		g.Expect(records(g, "store.shared.attack.test")).To(ConsistOf("192.0.2.30"))
		claimedBy(g, "store.shared.attack.test", teamB, bStore.Name)
	})

	t.Run("a name in no zone, or a zone's own name", func(t *testing.T) {
		g := NewWithT(t)
		for name, host := range map[string]string{"outside": "www.attack.test", "apex": "b.attack.test"} {
			s := sd(attacker, teamA, name, host, "web")
			condition(g, s, networkv1alpha1.ConditionReady, "NoZone")
			unclaimed(g, host)
		}
		g.Expect(records(g, "b.attack.test")).To(BeEmpty())
	})

	t.Run("a record in her zone that someone else wrote", func(t *testing.T) {
		g := NewWithT(t)
		rr, err := mdns.NewRR("legacy.a.attack.test. 60 IN A 198.51.100.7")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(dns.UpdateZone("a.attack.test", func(m *mdns.Msg) { m.Insert([]mdns.RR{rr}) })).To(Succeed())
		s := sd(attacker, teamA, "legacy", "legacy.a.attack.test", "web")
		condition(g, s, networkv1alpha1.ConditionDNSReady, "Conflict")
		g.Expect(records(g, "legacy.a.attack.test")).To(ConsistOf(net.ParseIP("198.51.100.7").String()))
		g.Expect(owner(g, "legacy.a.attack.test")).To(BeEmpty())
	})

	t.Run("an Ingress in her namespace that is not the ServiceDomain's", func(t *testing.T) {
		g := NewWithT(t)
		// A teammate's Ingress, wearing Orderly's labels (anyone who may write
		// Ingresses may write those).
		ing := &networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "api",
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, networkv1alpha1.ServiceDomainLabel: "api"}},
			Spec: networkingv1.IngressSpec{DefaultBackend: &networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{Name: "web", Port: networkingv1.ServiceBackendPort{Number: 8080}}}}}
		create(t, admin, ing)
		before := snap(g, ing)
		s := sd(attacker, teamA, "api", "api.a.attack.test", "web")
		condition(g, s, networkv1alpha1.ConditionRouteReady, "Conflict")
		unchanged(g, ing, before)
		g.Expect(attacker.Delete(ctx, s)).To(Succeed())
		g.Eventually(func() bool { return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(s), s)) }, timeout, poll).Should(BeTrue())
		unchanged(g, ing, before)
		// Control: her ServiceDomain's own Ingress exists and is hers.
		var own networkingv1.Ingress
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: teamA, Name: mine.Name}, &own)).To(Succeed())
		g.Expect(metav1.IsControlledBy(&own, mine)).To(BeTrue())
	})
}
