package servicedomain

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

func TestComputeZoneStatus(t *testing.T) {
	ok := func(reason string) part { return part{set: true, ready: true, reason: reason, message: reason} }
	fail := func(reason string) part { return part{set: true, reason: reason, message: reason} }
	notChecked := part{set: true, reason: ReasonNotChecked, message: "later"}
	for _, tc := range []struct {
		name                    string
		check                   zoneCheck
		wantReady               metav1.ConditionStatus
		wantReason              string
		wantCredentials, wantSv metav1.ConditionStatus
	}{
		{"both ok", zoneCheck{credentials: ok(ReasonKeyAccepted), server: ok(ReasonAnswered)}, metav1.ConditionTrue, ReasonZoneReady, metav1.ConditionTrue, metav1.ConditionTrue},
		{"no Secret: the server is not asked", zoneCheck{credentials: fail("TSIGSecretNotFound"), server: notChecked}, metav1.ConditionFalse, "TSIGSecretNotFound", metav1.ConditionFalse, metav1.ConditionUnknown},
		{"key rejected by a server that answers", zoneCheck{credentials: fail(ReasonKeyRejected), server: ok(ReasonAnswered)}, metav1.ConditionFalse, ReasonKeyRejected, metav1.ConditionFalse, metav1.ConditionTrue},
		{"server down: the key is not judged", zoneCheck{credentials: notChecked, server: fail(ReasonServerUnreachable)}, metav1.ConditionFalse, ReasonServerUnreachable, metav1.ConditionUnknown, metav1.ConditionFalse},
		{"ExternalDNS without its CRD", zoneCheck{credentials: ok(ReasonExternalDNS), server: fail(ReasonDNSEndpointNotFound)}, metav1.ConditionFalse, ReasonDNSEndpointNotFound, metav1.ConditionTrue, metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			z := &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: "z", Generation: 3}, Spec: networkv1alpha1.DomainZoneSpec{Zone: "int.example.test"}}
			computeZoneStatus(z, tc.check)
			get := func(typ string) metav1.Condition {
				c := findCondition(z.Status.Conditions, typ)
				if c == nil {
					t.Fatalf("no %s condition", typ)
				}
				if c.ObservedGeneration != 3 {
					t.Errorf("%s: observedGeneration %d", typ, c.ObservedGeneration)
				}
				return *c
			}
			if r := get(networkv1alpha1.ConditionReady); r.Status != tc.wantReady || r.Reason != tc.wantReason {
				t.Errorf("Ready %s/%s, want %s/%s", r.Status, r.Reason, tc.wantReady, tc.wantReason)
			}
			if c := get(networkv1alpha1.ZoneConditionCredentialsReady); c.Status != tc.wantCredentials {
				t.Errorf("CredentialsReady %s, want %s", c.Status, tc.wantCredentials)
			}
			if c := get(networkv1alpha1.ZoneConditionServerReachable); c.Status != tc.wantSv {
				t.Errorf("ServerReachable %s, want %s", c.Status, tc.wantSv)
			}
			if z.Status.ObservedGeneration != 3 {
				t.Errorf("observedGeneration %d", z.Status.ObservedGeneration)
			}
		})
	}
}
