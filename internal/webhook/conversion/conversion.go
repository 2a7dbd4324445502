// Package conversion serves the conversion webhook of the kinds Orderly serves in two
// versions (v1alpha1, the stored hub, and v1beta1) and keeps their CRDs pointing at
// it: spec.conversion is written by the manager, with the webhook's endpoint (the
// orderly-webhook Service, or --webhook-url for a manager outside the cluster) and
// the CA of its serving certificate (Orderly's own, or the one in --webhook-cert-dir,
// such as a cert-manager Certificate's ca.crt). The CRDs are shipped without it: the
// two versions have the same fields, so until a manager writes it the API server's
// default (None, which rewrites only apiVersion) converts them the same.
package conversion

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	ctrlconversion "sigs.k8s.io/controller-runtime/pkg/webhook/conversion"

	"orderly.dev/orderly/internal/admission"
)

// Path is where the webhook server serves conversion reviews.
const Path = "/convert"

// CRDs are the CustomResourceDefinitions whose objects the webhook converts. The
// manager may get and patch these and no other CRD: the RBAC marker in
// cmd/orderly/conversion.go names the same.
var CRDs = []string{
	"devdatabases.data.orderly.dev",
	"sleepschedules.power.orderly.dev",
}

// Handler is the conversion webhook for the kinds of scheme: each v1beta1 object
// converts through its v1alpha1 hub (api/<group>/v1beta1, ConvertTo and ConvertFrom).
func Handler(scheme *runtime.Scheme) http.Handler {
	return ctrlconversion.NewWebhookHandler(scheme, ctrlconversion.NewRegistry())
}

// Writer keeps spec.conversion of each CRD in CRDs pointing at the webhook with the
// current CA. It runs on the leader, at start and then every Interval, so that a
// renewed CA, a CRD applied again or a new install reaches the API server; it writes
// only what differs.
type Writer struct {
	// Client reads and patches CRDs; its scheme needs apiextensions.k8s.io/v1.
	Client client.Client
	// Endpoint is how the API server reaches the webhook server (Service or URL).
	Endpoint *admission.Endpoint
	// CABundle returns the PEM CA of the serving certificate.
	CABundle func() ([]byte, error)
	// Interval between checks; a minute when zero.
	Interval time.Duration
}

// NeedLeaderElection makes only the leader write the CRDs.
func (w *Writer) NeedLeaderElection() bool { return true }

// Start writes the CRDs at once and then every Interval until ctx ends. A failure is
// logged and tried again at the next tick: the CRDs keep what they had.
func (w *Writer) Start(ctx context.Context) error {
	interval := w.Interval
	if interval == 0 {
		interval = time.Minute
	}
	logger := log.FromContext(ctx).WithName("conversion")
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		if err := w.Ensure(ctx); err != nil {
			logger.Error(err, "Could not set the CRDs' conversion; trying again", "in", interval.String())
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// Ensure writes spec.conversion of every CRD in CRDs that is installed and differs.
// A CRD that is not installed is skipped.
//
// A Writer without an Endpoint belongs to a manager that serves no conversion (run
// from a workstation without --webhook-url): it sets the strategy None, so that CRDs
// a manager with a webhook pointed at itself before do not stay pointed at a server
// that is gone (every request for the other version, and the namespace controller's
// deletions, would fail). None converts correctly while the versions have the same
// fields, as v1alpha1 and v1beta1 do in this release.
func (w *Writer) Ensure(ctx context.Context) error {
	want := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	if w.Endpoint != nil {
		ca, err := w.CABundle()
		if err != nil {
			return fmt.Errorf("reading the webhook's CA: %w", err)
		}
		want = Desired(w.Endpoint, ca)
	}
	var errs []error
	for _, name := range CRDs {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := w.Client.Get(ctx, types.NamespacedName{Name: name}, &crd); err != nil {
			if client.IgnoreNotFound(err) != nil {
				errs = append(errs, fmt.Errorf("reading CRD %s: %w", name, err))
			}
			continue
		}
		if Same(crd.Spec.Conversion, want) {
			continue
		}
		var conv any = want
		if want.Webhook == nil {
			// A merge patch keeps fields it does not name: the webhook's must go with it.
			conv = map[string]any{"strategy": want.Strategy, "webhook": nil}
		}
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"conversion": conv}})
		if err != nil {
			return err
		}
		if err := w.Client.Patch(ctx, &crd, client.RawPatch(types.MergePatchType, patch)); err != nil {
			errs = append(errs, fmt.Errorf("setting the conversion of CRD %s: %w", name, err))
			continue
		}
		log.FromContext(ctx).Info("Set the CRD's conversion", "crd", name, "strategy", want.Strategy)
	}
	if len(errs) > 0 {
		return errs[0]
	}
	return nil
}

// Desired is the conversion a CRD needs to reach the webhook at e with CA ca.
func Desired(e *admission.Endpoint, ca []byte) *apiextensionsv1.CustomResourceConversion {
	cc := &apiextensionsv1.WebhookClientConfig{CABundle: ca}
	if e.URL != "" {
		cc.URL = ptr.To(e.URL + Path)
	} else {
		cc.Service = &apiextensionsv1.ServiceReference{
			Namespace: e.Service.Namespace, Name: e.Service.Name, Path: ptr.To(Path), Port: e.Service.Port,
		}
	}
	return &apiextensionsv1.CustomResourceConversion{
		Strategy: apiextensionsv1.WebhookConverter,
		Webhook: &apiextensionsv1.WebhookConversion{
			ClientConfig:             cc,
			ConversionReviewVersions: []string{"v1"},
		},
	}
}

// Same says whether the CRD's conversion is already want.
func Same(have, want *apiextensionsv1.CustomResourceConversion) bool {
	if want.Strategy == apiextensionsv1.NoneConverter {
		return have == nil || have.Strategy == apiextensionsv1.NoneConverter
	}
	if have == nil || have.Strategy != want.Strategy || have.Webhook == nil || have.Webhook.ClientConfig == nil {
		return false
	}
	h, w := have.Webhook.ClientConfig, want.Webhook.ClientConfig
	if !bytes.Equal(h.CABundle, w.CABundle) || ptr.Deref(h.URL, "") != ptr.Deref(w.URL, "") ||
		!slices.Equal(have.Webhook.ConversionReviewVersions, want.Webhook.ConversionReviewVersions) {
		return false
	}
	if (h.Service == nil) != (w.Service == nil) {
		return false
	}
	if h.Service == nil {
		return true
	}
	return h.Service.Namespace == w.Service.Namespace && h.Service.Name == w.Service.Name &&
		ptr.Deref(h.Service.Path, "") == ptr.Deref(w.Service.Path, "") &&
		ptr.Deref(h.Service.Port, 443) == ptr.Deref(w.Service.Port, 443)
}
