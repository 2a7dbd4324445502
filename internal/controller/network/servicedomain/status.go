package servicedomain

import (
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// part is what was observed of one of the three parts (DNS, certificate, route).
type part struct {
	// set is false when the part was not looked at (the reconcile stopped before).
	set     bool
	ready   bool
	reason  string
	message string
	// watched: what the part waits on is reported by a running watch (cert-manager
	// issuing, a Gateway's address or its controller's verdict on the route), so
	// the ServiceDomain need not be polled for it.
	watched bool
}

func (p *part) ok(reason, message string) {
	*p = part{set: true, ready: true, reason: reason, message: message}
}

func (p *part) fail(reason, message string) {
	*p = part{set: true, reason: reason, message: message}
}

// wait is fail for a part that waits on something a watch reports when watched.
func (p *part) wait(reason, message string, watched bool) {
	*p = part{set: true, reason: reason, message: message, watched: watched}
}

// observation is what one reconcile saw and did.
type observation struct {
	// blocked, when set, is why nothing was done at all (no zone, not allowed, a
	// hostname held by another ServiceDomain).
	blockedReason, blockedMessage string
	// withdrawn: what the ServiceDomain had registered was removed (its zone no
	// longer allows its namespace); status no longer names any of it.
	withdrawn bool

	zone           *networkv1alpha1.DomainZone
	serviceMissing bool
	// serviceWatched: the Service's creation will wake the ServiceDomain.
	serviceWatched bool

	dns, cert, route part

	targetSource, record, ownerRecord string
	dnsChecked                        bool
	certName, certSecret              string
	certNotAfter                      *metav1.Time
	routeKind, routeName              string
	routeTarget                       *routeTarget
}

func (o *observation) block(reason, message string) {
	o.blockedReason, o.blockedMessage = reason, message
}

// requeue is when to look again: soon while something is pending that no watch
// reports (a CRD being installed, the DNS server), now and then while
// only watched things are pending, else at the zone's resync interval, when the
// records are read back from the DNS server and repaired.
func (o *observation) requeue(resync time.Duration) time.Duration {
	if o.blockedReason != "" {
		return resync
	}
	wait := resync
	for _, p := range []part{o.dns, o.cert, o.route} {
		switch {
		case p.ready:
		case p.watched:
			wait = min(wait, watchedRecheck)
		default:
			return min(pendingRecheck, resync)
		}
	}
	return wait
}

// computeStatus sets sd's status from obs: pure, so that it can be called again on
// a newer copy after a conflicting write.
func computeStatus(sd *networkv1alpha1.ServiceDomain, obs *observation, now time.Time) {
	st := &sd.Status
	st.ObservedGeneration = sd.Generation
	conds := kit.ConditionsOf(&st.Conditions, sd.Generation).At(now)
	if obs.blockedReason != "" {
		for _, t := range []string{networkv1alpha1.ConditionDNSReady, networkv1alpha1.ConditionCertificateReady, networkv1alpha1.ConditionRouteReady, networkv1alpha1.ConditionReady} {
			conds.False(t, obs.blockedReason, obs.blockedMessage)
		}
		if obs.blockedReason != "Conflict" && obs.zone == nil {
			st.DNS.Zone = ""
		}
		if obs.withdrawn {
			st.DNS = networkv1alpha1.DNSStatus{}
			st.Route = networkv1alpha1.RouteStatus{}
			st.Certificate = networkv1alpha1.CertificateStatus{}
		}
		return
	}
	if obs.zone != nil {
		st.DNS.Zone = obs.zone.Name
	}
	st.DNS.TargetSource = obs.targetSource
	st.DNS.Record = obs.record
	st.DNS.OwnerRecord = obs.ownerRecord
	if obs.dnsChecked {
		t := metav1.NewTime(now.Truncate(time.Second))
		// lastChecked moves at most once a minute: a status write per check (every
		// resync, or every recheck while pending) would wake every watcher of
		// ServiceDomains for nothing.
		if st.DNS.LastChecked == nil || now.Sub(st.DNS.LastChecked.Time) >= time.Minute {
			st.DNS.LastChecked = &t
		}
	}
	st.Certificate = networkv1alpha1.CertificateStatus{Name: obs.certName, SecretName: obs.certSecret, NotAfter: obs.certNotAfter}
	st.Route = networkv1alpha1.RouteStatus{Kind: obs.routeKind, Name: obs.routeName}

	set := func(t string, p part) {
		if !p.set {
			conds.Unknown(t, "NotChecked", "not looked at yet")
			return
		}
		if p.ready {
			conds.True(t, p.reason, p.message)
		} else {
			conds.False(t, p.reason, p.message)
		}
	}
	set(networkv1alpha1.ConditionDNSReady, obs.dns)
	set(networkv1alpha1.ConditionCertificateReady, obs.cert)
	set(networkv1alpha1.ConditionRouteReady, obs.route)
	switch {
	case obs.dns.ready && obs.cert.ready && obs.route.ready:
		conds.True(networkv1alpha1.ConditionReady, "Ready", "the record, the certificate and the route are ready")
	default:
		// The first part that is not ready says why, in its own words.
		for _, c := range []struct {
			t string
			p part
		}{{networkv1alpha1.ConditionDNSReady, obs.dns}, {networkv1alpha1.ConditionRouteReady, obs.route}, {networkv1alpha1.ConditionCertificateReady, obs.cert}} {
			if !c.p.ready {
				reason, msg := c.p.reason, c.p.message
				if !c.p.set {
					reason, msg = "NotChecked", c.t+" not looked at yet"
				}
				conds.False(networkv1alpha1.ConditionReady, reason, c.t+": "+msg)
				break
			}
		}
	}
}
