//go:build integration

package servicedomain

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/testing/testdns"
)

// zoneReady waits until DomainZone name's Ready condition has status and reason,
// and returns the zone.
func zoneReady(t *testing.T, name string, status metav1.ConditionStatus, reason string) *networkv1alpha1.DomainZone {
	t.Helper()
	var z networkv1alpha1.DomainZone
	Eventually(func(g Gomega) {
		g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &z)).To(Succeed())
		c := findCondition(z.Status.Conditions, networkv1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil(), "no Ready condition")
		g.Expect(c.Status).To(Equal(status), "%s: %s", c.Reason, c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
		g.Expect(z.Status.ObservedGeneration).To(Equal(z.Generation))
	}).WithTimeout(timeout).WithPolling(poll).Should(Succeed())
	return &z
}

// A DomainZone says whether records can be written to it: Ready with a key the
// server accepts; KeyRejected with a wrong one; TSIGSecretNotFound until its Secret
// is created, then Ready without any edit of the zone; ServerUnreachable for a
// server that does not answer; NotAuthoritative for a zone the server does not
// serve. No message quotes the key.
func TestDomainZoneStatus(t *testing.T) {
	RegisterTestingT(t)
	ctx := context.Background()
	z := zoneReady(t, "fixed", metav1.ConditionTrue, ReasonZoneReady)
	Expect(findCondition(z.Status.Conditions, networkv1alpha1.ZoneConditionCredentialsReady).Reason).To(Equal(ReasonKeyAccepted))
	Expect(findCondition(z.Status.Conditions, networkv1alpha1.ZoneConditionServerReachable).Reason).To(Equal(ReasonAnswered))

	bad := zoneReady(t, "badkey", metav1.ConditionFalse, ReasonKeyRejected)
	for _, c := range bad.Status.Conditions {
		Expect(c.Message).NotTo(ContainSubstring(wrongKey))
	}

	secret := fmt.Sprintf("late-tsig-%d", seq.Add(1))
	rfc := func(server, secretName string) networkv1alpha1.DNS {
		return networkv1alpha1.DNS{Provider: networkv1alpha1.ProviderRFC2136, ResyncInterval: metav1.Duration{Duration: time.Minute},
			RFC2136: &networkv1alpha1.RFC2136{Server: server, TSIGSecretRef: networkv1alpha1.LocalSecretRef{Name: secretName}, TTL: 60}}
	}
	fixed := networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed, Addresses: []string{fixedAddr}}
	gw := networkv1alpha1.ZoneRoute{IngressClassName: "nginx"}
	for _, zone := range []*networkv1alpha1.DomainZone{
		// The suite's zone fixed.example.test again, allowing no namespace, so that the
		// suite's ServiceDomains there keep their zone.
		{ObjectMeta: metav1.ObjectMeta{Name: "status-late"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: zoneFixed, DNS: rfc(dns.Addr, secret), Route: gw, Target: fixed,
			AllowedNamespaces: metav1.LabelSelector{MatchLabels: map[string]string{"status-test": "none"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "status-down"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: "down.example.test", DNS: rfc("127.0.0.1:1", tsigSecret), Route: gw, Target: fixed}},
		{ObjectMeta: metav1.ObjectMeta{Name: "status-foreign"}, Spec: networkv1alpha1.DomainZoneSpec{Zone: "foreign.example.test", DNS: rfc(dns.Addr, tsigSecret), Route: gw, Target: fixed}},
	} {
		Expect(k.Create(ctx, zone)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), zone) })
	}
	zoneReady(t, "status-down", metav1.ConditionFalse, ReasonServerUnreachable)
	zoneReady(t, "status-foreign", metav1.ConditionFalse, ReasonNotAuthoritative)
	late := zoneReady(t, "status-late", metav1.ConditionFalse, "TSIGSecretNotFound")
	Expect(findCondition(late.Status.Conditions, networkv1alpha1.ZoneConditionServerReachable).Status).To(Equal(metav1.ConditionUnknown))
	Expect(k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: secret},
		StringData: map[string]string{"name": testdns.KeyName, "algorithm": testdns.KeyAlgorithm, "secret": dns.KeySecret}})).To(Succeed())
	late = zoneReady(t, "status-late", metav1.ConditionTrue, ReasonZoneReady)
	for _, c := range late.Status.Conditions {
		Expect(strings.Contains(c.Message, dns.KeySecret)).To(BeFalse(), "a condition quotes the key")
	}
}
