package labelpolicy

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
)

// applyAdmission writes the admission objects compiled for mode with server-side
// apply, which also restores whatever was changed behind Orderly's back, and removes
// the mutating objects that the policy or the mode no longer needs.
func (r *Reconciler) applyAdmission(ctx context.Context, p *policyv1alpha1.LabelPolicy, mode string, opts Options) error {
	var endpoint *admission.Endpoint
	if mode == policyv1alpha1.AdmissionModeWebhook && needsMutation(p) {
		ca, err := r.Admission.CABundle()
		if err != nil {
			return err
		}
		e := *r.Admission.Webhook
		e.CABundle = ca
		endpoint = &e
	}
	c := CompileWith(p, mode, endpoint, r.Namespace, opts)
	objs := []client.Object{c.VAP, c.VAPBinding}
	if c.MAP != nil {
		objs = append(objs, c.MAP, c.MAPBinding)
	}
	if c.Webhook != nil {
		objs = append(objs, c.Webhook)
	}
	for _, o := range objs {
		if err := r.apply(ctx, p, o); err != nil {
			return err
		}
	}
	var stale []client.Object
	if c.MAP == nil && r.mapServed.Load() {
		stale = append(stale, &admissionv1.MutatingAdmissionPolicyBinding{}, &admissionv1.MutatingAdmissionPolicy{})
	}
	if c.Webhook == nil {
		stale = append(stale, &admissionv1.MutatingWebhookConfiguration{})
	}
	for _, o := range stale {
		if err := r.deleteOwned(ctx, p, o); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) apply(ctx context.Context, p *policyv1alpha1.LabelPolicy, o client.Object) error {
	if err := controllerutil.SetControllerReference(p, o, r.Scheme()); err != nil {
		return err
	}
	return kit.Apply(ctx, r.Client, o)
}

// deleteOwned deletes the object of o's kind generated for p, if it exists and is ours.
// Ours means controlled by p: labels anyone can write, so they never decide a deletion.
func (r *Reconciler) deleteOwned(ctx context.Context, p *policyv1alpha1.LabelPolicy, o client.Object) error {
	if err := r.Get(ctx, client.ObjectKey{Name: objectName(p)}, o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !metav1.IsControlledBy(o, p) {
		return nil
	}
	if err := r.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", o.GetName(), err)
	}
	return nil
}
