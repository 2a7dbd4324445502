package labelpolicy

import (
	"context"
	"fmt"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// MutationMode says how missing labels are filled in at admission (the manager's
// --labelpolicy-mutation flag).
type MutationMode string

const (
	// MutationAuto uses MutatingAdmissionPolicy where the API server serves it, else
	// Orderly's webhook when one is configured, else validates only.
	MutationAuto MutationMode = "auto"
	// MutationNative always uses MutatingAdmissionPolicy.
	MutationNative MutationMode = "native"
	// MutationWebhook always uses Orderly's webhook, even where MutatingAdmissionPolicy
	// is served (for benchmarks, and for clusters that keep it switched off).
	MutationWebhook MutationMode = "webhook"
	// MutationOff fills nothing in: Default policies reject missing labels.
	MutationOff MutationMode = "off"
)

// ParseMutationMode checks a --labelpolicy-mutation value.
func ParseMutationMode(s string) (MutationMode, error) {
	switch m := MutationMode(s); m {
	case MutationAuto, MutationNative, MutationWebhook, MutationOff:
		return m, nil
	case "":
		return MutationAuto, nil
	default:
		return "", fmt.Errorf("unknown LabelPolicy mutation mode %q: use auto, native, webhook or off", s)
	}
}

// DefaultDiscoveryInterval is how often the API server is asked again whether it
// serves MutatingAdmissionPolicy.
const DefaultDiscoveryInterval = time.Minute

// ServesMutatingAdmissionPolicy asks the API server's discovery whether it serves
// MutatingAdmissionPolicy at admissionregistration.k8s.io/v1.
func ServesMutatingAdmissionPolicy(cfg *rest.Config) (bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return false, err
	}
	list, err := dc.ServerResourcesForGroupVersion(admissionv1.SchemeGroupVersion.String())
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("discovering admissionregistration.k8s.io/v1: %w", err)
	}
	for _, r := range list.APIResources {
		if r.Name == "mutatingadmissionpolicies" {
			return true, nil
		}
	}
	return false, nil
}

// admissionMode is how a policy that needs mutating is enforced right now.
func (r *Reconciler) admissionMode() string {
	served := r.mapServed.Load()
	switch r.Mutation {
	case MutationOff:
		return policyv1alpha1.AdmissionModeValidationOnly
	case MutationWebhook:
		return policyv1alpha1.AdmissionModeWebhook
	case MutationNative:
		if served {
			return policyv1alpha1.AdmissionModeNative
		}
		return policyv1alpha1.AdmissionModeValidationOnly
	default:
		switch {
		case served:
			return policyv1alpha1.AdmissionModeNative
		case r.Webhook != nil:
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
// native admission without a restart of the manager.
type discoveryWatcher struct {
	r        *Reconciler
	cfg      *rest.Config
	interval time.Duration
	// events wakes the controller for every policy when the answer changes.
	events chan event.GenericEvent
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
		served, err := ServesMutatingAdmissionPolicy(d.cfg)
		if err != nil {
			log.FromContext(ctx).Error(err, "Asking the API server whether it serves MutatingAdmissionPolicy")
			continue
		}
		if served == d.r.mapServed.Load() {
			continue
		}
		log.FromContext(ctx).Info("MutatingAdmissionPolicy availability changed; re-enforcing every LabelPolicy", "served", served)
		if served {
			if err := d.r.watchMutatingPolicies(); err != nil {
				log.FromContext(ctx).Error(err, "Watching MutatingAdmissionPolicies")
				continue
			}
		}
		d.r.mapServed.Store(served)
		var list policyv1alpha1.LabelPolicyList
		if err := d.r.List(ctx, &list); err != nil {
			log.FromContext(ctx).Error(err, "Listing LabelPolicies")
			continue
		}
		for i := range list.Items {
			select {
			case d.events <- event.GenericEvent{Object: &list.Items[i]}:
			case <-ctx.Done():
				return nil
			}
		}
	}
}
