package servicedomain

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/dnsupdate"
)

// targetOf is the record's values and where they came from; empty values, with a
// reason and message, when there are none yet.
func targetOf(zone *networkv1alpha1.DomainZone, obs *observation) (values []string, source, reason, message string) {
	if zone.Spec.Target.From == networkv1alpha1.TargetFromFixed {
		return zone.Spec.Target.Addresses, fmt.Sprintf("DomainZone %s target.addresses", zone.Name), "", ""
	}
	if obs.routeTarget == nil {
		return nil, "", "WaitingForRoute", "the record's value comes from the route, which is not ready: " + obs.route.message
	}
	if len(obs.routeTarget.addresses) == 0 {
		return nil, obs.routeTarget.source, "WaitingForAddress", fmt.Sprintf("%s is empty: no address to publish yet (the Gateway's or ingress controller writes it)", obs.routeTarget.source)
	}
	return obs.routeTarget.addresses, obs.routeTarget.source, "", ""
}

// reconcileDNS writes sd's record through the zone's provider.
func (r *Reconciler) reconcileDNS(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, obs *observation) error {
	values, source, reason, message := targetOf(zone, obs)
	obs.targetSource = source
	if len(values) == 0 {
		// Waiting on the route is the route's to report; on its address, on the
		// Gateway's or Ingress's watch.
		obs.dns.wait(reason, message, obs.routeTarget == nil || obs.routeTarget.watched)
		return nil
	}
	if _, _, _, err := dnsupdate.Records(values); err != nil {
		obs.dns.fail("InvalidTarget", fmt.Sprintf("the values from %s cannot be a record: %v", source, err))
		return nil
	}
	obs.record = dnsupdate.Describe(values)
	switch zone.Spec.DNS.Provider {
	case networkv1alpha1.ProviderExternalDNS:
		return r.reconcileEndpoint(ctx, sd, zone, values, obs)
	default:
		return r.reconcileRFC2136(ctx, sd, zone, values, obs)
	}
}

// dnsClient builds the zone's RFC 2136 client from its TSIG Secret, which is read
// from the manager's namespace only.
func (r *Reconciler) dnsClient(ctx context.Context, zone *networkv1alpha1.DomainZone) (*dnsupdate.Client, string, error) {
	cfg := zone.Spec.DNS.RFC2136
	if cfg == nil {
		return nil, "ZoneMisconfigured", errors.New("DomainZone " + zone.Name + " has provider RFC2136 and no rfc2136 settings")
	}
	if r.ManagerNamespace == "" {
		return nil, "NoManagerNamespace", errors.New("the manager runs without a namespace of its own (--namespace / POD_NAMESPACE), where TSIG Secrets are read from")
	}
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: r.ManagerNamespace, Name: cfg.TSIGSecretRef.Name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, "TSIGSecretNotFound", fmt.Errorf("DomainZone %s's TSIG Secret %s/%s does not exist; a platform admin must create it (keys name, algorithm, secret)", zone.Name, r.ManagerNamespace, cfg.TSIGSecretRef.Name)
		}
		return nil, "TSIGSecretReadFailed", fmt.Errorf("reading TSIG Secret %s/%s: %w", r.ManagerNamespace, cfg.TSIGSecretRef.Name, err)
	}
	key := dnsupdate.Key{Name: string(s.Data["name"]), Algorithm: string(s.Data["algorithm"]), Secret: strings.TrimSpace(string(s.Data["secret"]))}
	if err := key.Validate(); err != nil {
		return nil, "TSIGSecretInvalid", fmt.Errorf("TSIG Secret %s/%s: %w", r.ManagerNamespace, cfg.TSIGSecretRef.Name, err)
	}
	return &dnsupdate.Client{Server: cfg.Server, Key: key}, "", nil
}

func (r *Reconciler) reconcileRFC2136(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, values []string, obs *observation) error {
	c, reason, err := r.dnsClient(ctx, zone)
	if err != nil {
		obs.dns.fail(reason, err.Error())
		return nil // a configuration problem: reported, retried on the pending recheck
	}
	ttl := zone.Spec.DNS.RFC2136.TTL
	if ttl <= 0 {
		ttl = 300
	}
	d := dnsupdate.Desired{
		Zone: zone.Spec.Zone, Host: sd.Spec.Hostname, Owner: dnsupdate.OwnerValue(sd.Namespace, sd.Name),
		Values: values, TTL: uint32(ttl),
	}
	obs.ownerRecord = fmt.Sprintf("TXT %s %q", dnsupdate.OwnerName(d.Host), d.Owner)
	seen, err := c.Observe(ctx, d.Host, dnsupdate.OwnerName(d.Host))
	if err != nil {
		dnsUpdates.WithLabelValues("failed").Inc()
		obs.dns.fail("DNSServerUnreachable", err.Error())
		return err
	}
	obs.dnsChecked = true
	action, why := dnsupdate.Plan(d, seen)
	switch action {
	case dnsupdate.Nothing:
		obs.dns.ok("Published", fmt.Sprintf("%s %s is in the DNS server %s", d.Host, obs.record, c.Server))
		return nil
	case dnsupdate.Conflict:
		dnsUpdates.WithLabelValues("conflict").Inc()
		obs.dns.fail("Conflict", why+"; Orderly changes nothing there")
		return nil
	}
	m, err := dnsupdate.UpdateFor(action, d)
	if err != nil {
		obs.dns.fail("InvalidTarget", err.Error())
		return nil
	}
	if err := c.Update(ctx, m); err != nil {
		if errors.Is(err, dnsupdate.ErrPrerequisite) {
			dnsUpdates.WithLabelValues("raced").Inc()
			obs.dns.fail("Changed", fmt.Sprintf("%s changed in the DNS server while Orderly wrote it; looking again", d.Host))
			return err
		}
		dnsUpdates.WithLabelValues("failed").Inc()
		obs.dns.fail("UpdateFailed", err.Error())
		return err
	}
	result := "created"
	verb := "RecordCreated"
	if action == dnsupdate.Replace {
		result, verb = "repaired", "RecordRepaired"
	}
	dnsUpdates.WithLabelValues(result).Inc()
	r.Recorder.Eventf(sd, nil, corev1.EventTypeNormal, verb, "UpdateDNS", "%s %s written to the DNS server %s", d.Host, obs.record, c.Server)
	obs.dns.ok("Published", fmt.Sprintf("%s %s is in the DNS server %s", d.Host, obs.record, c.Server))
	return nil
}

// reconcileEndpoint writes sd's DNSEndpoint for external-dns.
func (r *Reconciler) reconcileEndpoint(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone, values []string, obs *observation) error {
	gvk, existing, ok, err := r.ownChild(ctx, sd, dnsEndpointKind, &obs.dns, "ExternalDNSMissing",
		"external-dns's DNSEndpoint CRD (externaldns.k8s.io/v1alpha1) is not installed; install external-dns with its CRD source and this ServiceDomain goes on by itself")
	if !ok {
		return err
	}
	ttl := int64(300)
	if e := zone.Spec.DNS.ExternalDNS; e != nil && e.TTL > 0 {
		ttl = int64(e.TTL)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"endpoints": endpoints(sd.Spec.Hostname, values, ttl)}}}
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(sd.Namespace)
	u.SetName(sd.Name)
	u.SetLabels(childLabels(sd))
	u.SetOwnerReferences([]metav1.OwnerReference{ownerRef(sd)})
	if err := r.apply(ctx, u); err != nil {
		obs.dns.fail("EndpointWriteFailed", err.Error())
		return err
	}
	// external-dns sets status.observedGeneration once it has processed the endpoint.
	if existing != nil {
		seen, _, _ := unstructured.NestedInt64(existing.Object, "status", "observedGeneration")
		if seen > 0 && seen == existing.GetGeneration() {
			obs.dns.ok("Published", fmt.Sprintf("DNSEndpoint %s (%s %s) is processed by external-dns", sd.Name, sd.Spec.Hostname, obs.record))
			return nil
		}
	}
	obs.dns.fail("WaitingForExternalDNS", fmt.Sprintf("DNSEndpoint %s (%s %s) is written; external-dns has not processed it yet (is it running with --source=crd?)", sd.Name, sd.Spec.Hostname, obs.record))
	return nil
}

// endpoints are the DNSEndpoint endpoints of host's values: one per record type.
func endpoints(host string, values []string, ttl int64) []any {
	a, aaaa, cname, _ := dnsupdate.Records(values)
	var out []any
	add := func(t string, targets []string) {
		if len(targets) == 0 {
			return
		}
		ts := make([]any, len(targets))
		for i, v := range targets {
			ts[i] = v
		}
		out = append(out, map[string]any{"dnsName": host, "recordType": t, "targets": ts, "recordTTL": ttl})
	}
	add("A", a)
	add("AAAA", aaaa)
	if cname != "" {
		add("CNAME", []string{cname})
	}
	return out
}
