package servicedomain

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

func TestComputeStatus(t *testing.T) {
	ready := func() *observation {
		o := &observation{zone: &networkv1alpha1.DomainZone{ObjectMeta: metav1.ObjectMeta{Name: "int"}}, record: "A 192.0.2.1", dnsChecked: true}
		o.dns.ok("Published", "in the server")
		o.cert.ok("NotRequested", "none")
		o.route.ok("Attached", "attached")
		return o
	}
	tests := []struct {
		name        string
		obs         func() *observation
		wantReady   metav1.ConditionStatus
		wantReason  string
		wantRequeue time.Duration
	}{
		{name: "all ready", obs: ready, wantReady: metav1.ConditionTrue, wantReason: "Ready", wantRequeue: time.Minute},
		{name: "blocked by a conflict", obs: func() *observation {
			o := &observation{}
			o.block("Conflict", "claimed by a/b")
			return o
		}, wantReady: metav1.ConditionFalse, wantReason: "Conflict", wantRequeue: time.Minute},
		{name: "DNS waits, its reason leads", obs: func() *observation {
			o := ready()
			o.dns.fail("WaitingForAddress", "no address")
			o.cert.fail("CertManagerMissing", "install it")
			return o
		}, wantReady: metav1.ConditionFalse, wantReason: "WaitingForAddress", wantRequeue: pendingRecheck},
		{name: "a part not looked at", obs: func() *observation {
			o := ready()
			o.cert = part{}
			return o
		}, wantReady: metav1.ConditionFalse, wantReason: "NotChecked", wantRequeue: pendingRecheck},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sd := &networkv1alpha1.ServiceDomain{ObjectMeta: metav1.ObjectMeta{Generation: 3}}
			obs := tt.obs()
			computeStatus(sd, obs, time.Unix(1000, 0))
			c := meta.FindStatusCondition(sd.Status.Conditions, networkv1alpha1.ConditionReady)
			if c == nil || c.Status != tt.wantReady || c.Reason != tt.wantReason || c.ObservedGeneration != 3 {
				t.Fatalf("Ready = %+v, want %s %s", c, tt.wantReady, tt.wantReason)
			}
			if len(sd.Status.Conditions) != 4 {
				t.Fatalf("conditions = %d, want DNSReady, CertificateReady, RouteReady and Ready", len(sd.Status.Conditions))
			}
			if got := obs.requeue(time.Minute); got != tt.wantRequeue {
				t.Fatalf("requeue = %s, want %s", got, tt.wantRequeue)
			}
			// Computing again from the same observation changes nothing (status is
			// written only when it changes).
			before := sd.DeepCopy()
			computeStatus(sd, obs, time.Unix(1010, 0))
			if !equalConditions(before.Status.Conditions, sd.Status.Conditions) || !equality.Semantic.DeepEqual(before.Status.DNS, sd.Status.DNS) {
				t.Fatalf("a second compute changed the status:\n%+v\n%+v", before.Status, sd.Status)
			}
		})
	}
}

func equalConditions(a, b []metav1.Condition) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Type != b[i].Type || a[i].Status != b[i].Status || a[i].Reason != b[i].Reason || a[i].Message != b[i].Message {
			return false
		}
	}
	return true
}

// A ServiceDomain that waits only on what its watches report is polled rarely; one
// that also waits on something unwatched, soon.
func TestRequeueOfWatchedWaits(t *testing.T) {
	const resync = 10 * time.Minute
	o := &observation{}
	o.route.ok("Attached", "attached")
	o.cert.wait("Issuing", "cert-manager issues it", true)
	o.dns.wait("WaitingForAddress", "the Gateway has no address", true)
	if got := o.requeue(resync); got != watchedRecheck {
		t.Fatalf("requeue while only watched things are pending = %s, want %s", got, watchedRecheck)
	}
	o.cert.wait("Issuing", "cert-manager issues it", false)
	if got := o.requeue(resync); got != pendingRecheck {
		t.Fatalf("requeue while the Certificate kind is not watched yet = %s, want %s", got, pendingRecheck)
	}
	o.cert.ok("Issued", "issued")
	o.dns.ok("Published", "in the server")
	if got := o.requeue(resync); got != resync {
		t.Fatalf("requeue when all is ready = %s, want the resync %s", got, resync)
	}
}
