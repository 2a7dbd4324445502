package labelpolicy

import (
	"bytes"
	"context"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
)

// DefaultDiscoveryInterval is how often the API server is asked again whether it
// serves MutatingAdmissionPolicy, and the webhook's CA certificate compared with the
// last one seen.
const DefaultDiscoveryInterval = time.Minute

// admissionMode is how a policy that needs mutating is enforced right now.
func (r *Reconciler) admissionMode() string {
	served := r.mapServed.Load()
	switch r.Admission.Mode {
	case admission.Off:
		return policyv1alpha1.AdmissionModeValidationOnly
	case admission.Webhook:
		return policyv1alpha1.AdmissionModeWebhook
	case admission.Native:
		if served {
			return policyv1alpha1.AdmissionModeNative
		}
		return policyv1alpha1.AdmissionModeValidationOnly
	default:
		switch {
		case served:
			return policyv1alpha1.AdmissionModeNative
		case r.Admission.Webhook != nil:
			return policyv1alpha1.AdmissionModeWebhook
		default:
			return policyv1alpha1.AdmissionModeValidationOnly
		}
	}
}

// watchMutatingPolicies makes the controller watch the MutatingAdmissionPolicies it
// owns, once: before the API server serves them, a watch would fail.
func (r *Reconciler) watchMutatingPolicies() error {
	var err error
	r.watchMAPOnce.Do(func() {
		owner := handler.EnqueueRequestForOwner(r.Scheme(), r.RESTMapper(), &policyv1alpha1.LabelPolicy{}, handler.OnlyControllerOwner())
		for _, o := range []client.Object{&admissionv1.MutatingAdmissionPolicy{}, &admissionv1.MutatingAdmissionPolicyBinding{}} {
			if err = r.ctrl.Watch(source.Kind(r.cache, o, owner)); err != nil {
				return
			}
		}
	})
	return err
}

// discoveryWatcher asks the API server again and again whether it serves
// MutatingAdmissionPolicy, so that an upgrade of the API server moves the policies to
// native admission without a restart of the manager. It also compares the webhook's
// CA certificate with the one it saw last: when another replica re-issued it (or
// cert-manager renewed it), every policy is reconciled at once, so the webhook
// configurations' caBundle follows within a DiscoveryInterval rather than at the next
// audit.
type discoveryWatcher struct {
	r *Reconciler
	// serves asks the API server's discovery.
	serves   func() (bool, error)
	interval time.Duration
	// events wakes the controller for every policy when an answer changes.
	events chan event.GenericEvent
	// ca is the CA certificate seen at the last check.
	ca []byte
}

func newDiscoveryWatcher(r *Reconciler, cfg *rest.Config, interval time.Duration, events chan event.GenericEvent) *discoveryWatcher {
	d := &discoveryWatcher{r: r, interval: interval, events: events,
		serves: func() (bool, error) { return admission.ServesMutatingAdmissionPolicy(cfg) }}
	d.ca = d.currentCA()
	return d
}

// NeedLeaderElection: only the leader reconciles, so only it needs to know.
func (d *discoveryWatcher) NeedLeaderElection() bool { return true }

func (d *discoveryWatcher) Start(ctx context.Context) error {
	t := time.NewTicker(d.interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
		if !d.check(ctx) {
			return nil
		}
	}
}

// currentCA is the webhook's CA certificate now; nil without a webhook or while it
// cannot be read (the reconcile reports that).
func (d *discoveryWatcher) currentCA() []byte {
	if d.r.Admission.CABundle == nil {
		return nil
	}
	ca, err := d.r.Admission.CABundle()
	if err != nil {
		return nil
	}
	return ca
}

// check asks both questions once and wakes every policy when an answer changed. It
// returns false when ctx ended.
func (d *discoveryWatcher) check(ctx context.Context) bool {
	changed := false
	if ca := d.currentCA(); ca != nil && !bytes.Equal(ca, d.ca) {
		log.FromContext(ctx).Info("The webhook's CA certificate changed; updating every LabelPolicy's webhook configuration")
		d.ca = ca
		changed = true
	}
	served, err := d.serves()
	switch {
	case err != nil:
		log.FromContext(ctx).Error(err, "Asking the API server whether it serves MutatingAdmissionPolicy")
	case served != d.r.mapServed.Load():
		log.FromContext(ctx).Info("MutatingAdmissionPolicy availability changed; re-enforcing every LabelPolicy", "served", served)
		if served {
			if err := d.r.watchMutatingPolicies(); err != nil {
				log.FromContext(ctx).Error(err, "Watching MutatingAdmissionPolicies")
				break
			}
		}
		d.r.mapServed.Store(served)
		changed = true
	}
	if !changed {
		return true
	}
	var list policyv1alpha1.LabelPolicyList
	if err := d.r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "Listing LabelPolicies")
		return true
	}
	for i := range list.Items {
		select {
		case d.events <- event.GenericEvent{Object: &list.Items[i]}:
		case <-ctx.Done():
			return false
		}
	}
	return true
}
