package servicedomain

import (
	"context"
	"errors"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/dnsupdate"
	"orderly.dev/orderly/internal/kit"
)

// finalize removes what sd wrote, and only that: its record and ownership TXT (only
// while the TXT is still its own), its route, Certificate and DNSEndpoint (only
// those it controls), then its claim. A ServiceDomain that never held the hostname
// wrote nothing and removes nothing.
func (r *Reconciler) finalize(ctx context.Context, sd *networkv1alpha1.ServiceDomain) (ctrl.Result, error) {
	if !containsFinalizer(sd) {
		return ctrl.Result{}, nil
	}
	claim, err := r.holds(ctx, sd)
	if err != nil {
		return ctrl.Result{}, err
	}
	if claim != nil {
		if err := r.cleanup(ctx, sd); err != nil {
			return ctrl.Result{}, err
		}
		if err := r.release(ctx, claim); err != nil {
			return ctrl.Result{}, err
		}
	}
	series.Forget(client.ObjectKeyFromObject(sd))
	return ctrl.Result{}, client.IgnoreNotFound(kit.RemoveFinalizer(ctx, r.Client, r.APIReader, sd, finalizer))
}

func containsFinalizer(sd *networkv1alpha1.ServiceDomain) bool {
	for _, f := range sd.Finalizers {
		if f == finalizer {
			return true
		}
	}
	return false
}

func (r *Reconciler) cleanup(ctx context.Context, sd *networkv1alpha1.ServiceDomain) error {
	var errs []error
	// The zone the record was written in: the one status names, else the one the
	// hostname falls in now.
	var zone *networkv1alpha1.DomainZone
	var zones networkv1alpha1.DomainZoneList
	if err := r.List(ctx, &zones); err != nil {
		return err
	}
	for i := range zones.Items {
		z := &zones.Items[i]
		if (sd.Status.DNS.Zone != "" && z.Name == sd.Status.DNS.Zone) || (sd.Status.DNS.Zone == "" && inZone(sd.Spec.Hostname, z.Spec.Zone)) {
			zone = z
			break
		}
	}
	switch {
	case zone == nil:
		r.Recorder.Eventf(sd, nil, corev1.EventTypeWarning, "ZoneGone", "Delete", "the DomainZone of %s is gone: its DNS record, if any, is left in the DNS server", sd.Spec.Hostname)
	case zone.Spec.DNS.Provider == networkv1alpha1.ProviderRFC2136:
		errs = append(errs, r.deleteRecord(ctx, sd, zone))
	}
	for _, gk := range []schema.GroupKind{httpRouteKind, certificateKind, dnsEndpointKind} {
		v, err := r.kinds.Version(gk)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if v != "" {
			errs = append(errs, r.deleteOwned(ctx, sd, gk.WithVersion(v)))
		}
	}
	errs = append(errs, r.deleteOwned(ctx, sd, networkingv1.SchemeGroupVersion.WithKind("Ingress")))
	return errors.Join(errs...)
}

// deleteRecord removes sd's record and ownership TXT, in one update that the server
// applies only while the TXT is sd's own.
func (r *Reconciler) deleteRecord(ctx context.Context, sd *networkv1alpha1.ServiceDomain, zone *networkv1alpha1.DomainZone) error {
	c, _, err := r.dnsClient(ctx, zone)
	if err != nil {
		r.Recorder.Eventf(sd, nil, corev1.EventTypeWarning, "RecordLeft", "Delete", "the DNS record of %s cannot be removed: %v", sd.Spec.Hostname, err)
		return nil
	}
	owner := dnsupdate.OwnerValue(sd.Namespace, sd.Name)
	// Nothing of ours at the name (never written, or removed by hand): no update, so
	// that a server that refuses this zone's key does not hold the deletion forever.
	seen, err := c.Observe(ctx, sd.Spec.Hostname, dnsupdate.OwnerName(sd.Spec.Hostname))
	if err != nil {
		return fmt.Errorf("reading the DNS records of %s before removing them: %w", sd.Spec.Hostname, err)
	}
	if !slices.Contains(seen.Owner, owner) {
		return nil
	}
	err = c.Update(ctx, dnsupdate.DeleteFor(zone.Spec.Zone, sd.Spec.Hostname, owner))
	switch {
	case errors.Is(err, dnsupdate.ErrPrerequisite):
		// The TXT is not ours (or gone): the name is someone else's now, or empty.
		log.FromContext(ctx).Info("Leaving DNS records of ServiceDomain not owned by it", "hostname", sd.Spec.Hostname)
		return nil
	case err != nil:
		dnsUpdates.WithLabelValues("failed").Inc()
		return fmt.Errorf("removing the DNS record of %s (the ServiceDomain stays until it is removed, or its finalizer is removed by hand): %w", sd.Spec.Hostname, err)
	}
	dnsUpdates.WithLabelValues("deleted").Inc()
	return nil
}
