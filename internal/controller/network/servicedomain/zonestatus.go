package servicedomain

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/dnsupdate"
	"orderly.dev/orderly/internal/kit"
)

// A DomainZone's status says whether records can be written to the zone, before any
// ServiceDomain tries: for RFC 2136, whether its TSIG Secret holds a usable key and
// the DNS server answers a query for the zone's SOA signed with it (a query writes
// nothing); for ExternalDNS, whether the DNSEndpoint kind is served. It is checked
// again at the zone's resync interval, and every zoneRecheck while not Ready (the
// Secret is read, never watched, and the server is outside the cluster).

// zoneRecheck is how soon a zone that is not Ready is checked again.
const zoneRecheck = 15 * time.Second

// zoneCheckTimeout bounds the query to the DNS server.
const zoneCheckTimeout = 5 * time.Second

// Reasons of a DomainZone's conditions.
const (
	ReasonZoneReady           = "Ready"
	ReasonKeyAccepted         = "KeyAccepted"
	ReasonKeyRejected         = "KeyRejected"
	ReasonAnswered            = "Answered"
	ReasonServerUnreachable   = "ServerUnreachable"
	ReasonNotAuthoritative    = "NotAuthoritative"
	ReasonNotChecked          = "NotChecked"
	ReasonExternalDNS         = "ExternalDNS"
	ReasonDNSEndpointServed   = "DNSEndpointServed"
	ReasonDNSEndpointNotFound = "DNSEndpointCRDNotFound"
)

// zoneCheck is what one check of a zone found; each part is ok, or why not.
type zoneCheck struct {
	credentials, server part
	// at is when the check ran (the controller's clock).
	at time.Time
}

// zoneReconciler writes DomainZones' status. It shares the ServiceDomain
// controller's clients, clock and kind detector.
type zoneReconciler struct{ *Reconciler }

// setupZones registers the DomainZone status controller.
func (r *Reconciler) setupZones(mgr ctrl.Manager, opts controller.Options) error {
	opts.MaxConcurrentReconciles = 2
	return ctrl.NewControllerManagedBy(mgr).
		Named("domainzone").
		WithOptions(opts).
		For(&networkv1alpha1.DomainZone{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(&zoneReconciler{r})
}

// Reconcile checks one DomainZone and writes its status.
func (r *zoneReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var z networkv1alpha1.DomainZone
	if err := r.Get(ctx, req.NamespacedName, &z); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !z.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	check := r.checkZone(ctx, &z)
	before, err := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, &z, func(latest *networkv1alpha1.DomainZone) {
		computeZoneStatus(latest, check)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if before != nil {
		r.zoneEvent(&z, before)
	}
	if check.credentials.ready && check.server.ready {
		return ctrl.Result{RequeueAfter: resyncOf(&z)}, nil
	}
	return ctrl.Result{RequeueAfter: min(zoneRecheck, resyncOf(&z))}, nil
}

// checkZone observes whether records can be written to z.
func (r *zoneReconciler) checkZone(ctx context.Context, z *networkv1alpha1.DomainZone) zoneCheck {
	c := zoneCheck{at: r.clock().Now()}
	if z.Spec.DNS.Provider == networkv1alpha1.ProviderExternalDNS {
		c.credentials.ok(ReasonExternalDNS, "external-dns holds the DNS provider's credentials; Orderly writes DNSEndpoints")
		version, err := r.kinds.Version(dnsEndpointKind)
		switch {
		case err != nil:
			c.server.fail("DiscoveryFailed", err.Error())
		case version == "":
			c.server.fail(ReasonDNSEndpointNotFound, "the DNSEndpoint CRD (externaldns.k8s.io) is not installed: install external-dns's CRD (config/crd/standard in its module), and run external-dns with --source=crd")
		default:
			c.server.ok(ReasonDNSEndpointServed, "DNSEndpoints ("+dnsEndpointKind.Group+"/"+version+") are served; external-dns publishes them")
		}
		return c
	}
	dc, reason, err := r.dnsClient(ctx, z)
	if err != nil {
		c.credentials.fail(reason, err.Error())
		c.server = part{set: true, reason: ReasonNotChecked, message: "the DNS server is asked once the TSIG key is usable"}
		return c
	}
	dc.Timeout = zoneCheckTimeout
	err = dc.CheckZone(ctx, z.Spec.Zone)
	switch {
	case err == nil:
		c.credentials.ok(ReasonKeyAccepted, fmt.Sprintf("the DNS server %s accepts TSIG key %q", dc.Server, dc.Key.Name))
		c.server.ok(ReasonAnswered, fmt.Sprintf("the DNS server %s answers authoritatively for %s", dc.Server, z.Spec.Zone))
	case errors.Is(err, dnsupdate.ErrKeyRejected):
		c.credentials.fail(ReasonKeyRejected, err.Error())
		c.server.ok(ReasonAnswered, fmt.Sprintf("the DNS server %s answers", dc.Server))
	case errors.Is(err, dnsupdate.ErrNotAuthoritative):
		c.credentials = part{set: true, reason: ReasonNotChecked, message: "the key is checked once the server answers for the zone"}
		c.server.fail(ReasonNotAuthoritative, err.Error())
	default:
		c.credentials = part{set: true, reason: ReasonNotChecked, message: "the key is checked once the server answers"}
		c.server.fail(ReasonServerUnreachable, err.Error())
	}
	return c
}

// computeZoneStatus sets z's conditions from what was checked.
func computeZoneStatus(z *networkv1alpha1.DomainZone, c zoneCheck) {
	conds := kit.ConditionsOf(&z.Status.Conditions, z.Generation).At(c.at)
	set := func(t string, p part) {
		switch {
		case p.ready:
			conds.True(t, p.reason, p.message)
		case p.reason == ReasonNotChecked:
			conds.Unknown(t, p.reason, p.message)
		default:
			conds.False(t, p.reason, p.message)
		}
	}
	set(networkv1alpha1.ZoneConditionCredentialsReady, c.credentials)
	set(networkv1alpha1.ZoneConditionServerReachable, c.server)
	switch {
	case c.credentials.ready && c.server.ready:
		conds.True(networkv1alpha1.ConditionReady, ReasonZoneReady, "records can be written to "+z.Spec.Zone)
	case !c.server.ready && c.server.reason != ReasonNotChecked:
		conds.False(networkv1alpha1.ConditionReady, c.server.reason, c.server.message)
	default:
		conds.False(networkv1alpha1.ConditionReady, c.credentials.reason, c.credentials.message)
	}
	z.Status.ObservedGeneration = z.Generation
}

// zoneEvent sends an Event when the zone's Ready condition changed.
func (r *zoneReconciler) zoneEvent(z, before *networkv1alpha1.DomainZone) {
	now := findCondition(z.Status.Conditions, networkv1alpha1.ConditionReady)
	was := findCondition(before.Status.Conditions, networkv1alpha1.ConditionReady)
	if now == nil || (was != nil && was.Status == now.Status && was.Reason == now.Reason) {
		return
	}
	typ := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(z, nil, typ, now.Reason, "Check", "%s", kit.Truncate(now.Message, 1024))
}
