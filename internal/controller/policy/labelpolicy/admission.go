package labelpolicy

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/labels"
)

// applyAdmission writes the admission objects compiled for mode with server-side
// apply, which also restores whatever was changed behind Orderly's back, and removes
// the mutating objects that the policy or the mode no longer needs.
func (r *Reconciler) applyAdmission(ctx context.Context, p *policyv1alpha1.LabelPolicy, mode string) error {
	var endpoint *admission.Endpoint
	if mode == policyv1alpha1.AdmissionModeWebhook && needsMutation(p) {
		ca, err := r.WebhookCABundle()
		if err != nil {
			return err
		}
		e := *r.Webhook
		e.CABundle = ca
		endpoint = &e
	}
	c := Compile(p, mode, endpoint)
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
	gvk, err := r.GroupVersionKindFor(o)
	if err != nil {
		return err
	}
	if err := controllerutil.SetControllerReference(p, o, r.Scheme()); err != nil {
		return err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	if err := r.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(labels.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", gvk.Kind, o.GetName(), err)
	}
	return nil
}

// deleteOwned deletes the object of o's kind generated for p, if it exists and is ours.
func (r *Reconciler) deleteOwned(ctx context.Context, p *policyv1alpha1.LabelPolicy, o client.Object) error {
	if err := r.Get(ctx, client.ObjectKey{Name: objectName(p)}, o); err != nil {
		return client.IgnoreNotFound(err)
	}
	if o.GetLabels()[policyv1alpha1.PolicyLabel] != p.Name {
		return nil
	}
	if err := r.Delete(ctx, o); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s: %w", o.GetName(), err)
	}
	return nil
}
