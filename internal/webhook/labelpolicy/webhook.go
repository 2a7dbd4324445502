// Package labelpolicy is Orderly's mutating admission webhook for LabelPolicies: the
// fallback that fills labels in where the API server does not serve
// MutatingAdmissionPolicy. It only adapts HTTP to labelpolicy.Mutate, the Go twin of
// the MutatingAdmissionPolicy the controller compiles; the controller writes the
// MutatingWebhookConfiguration that points here.
package labelpolicy

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	controller "orderly.dev/orderly/internal/controller/policy/labelpolicy"
)

var mutations = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "orderly_labelpolicy_webhook_requests_total",
	Help: "Admission requests Orderly's LabelPolicy webhook answered, by policy and result (mutated, unchanged, error).",
}, []string{"labelpolicy", "result"})

func init() { metrics.Registry.MustRegister(mutations) }

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Handler answers the admission requests of every LabelPolicy, each at
// controller.WebhookPathPrefix + its name.
type Handler struct {
	// Reader reads LabelPolicies and namespace metadata, normally from the cache.
	Reader client.Reader
}

type policyNameKey struct{}

// Webhook is the http.Handler to register at controller.WebhookPathPrefix.
func (h *Handler) Webhook() *admission.Webhook {
	return &admission.Webhook{
		Handler: h,
		WithContextFunc: func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, policyNameKey{}, strings.TrimPrefix(r.URL.Path, controller.WebhookPathPrefix))
		},
	}
}

// Handle fills the policy's label in. It never rejects: rejection is the validating
// policy's job, which runs after every mutation.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	name, _ := ctx.Value(policyNameKey{}).(string)
	var p policyv1alpha1.LabelPolicy
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: its MutatingWebhookConfiguration goes with it in a moment.
			return admission.Allowed("LabelPolicy " + name + " no longer exists")
		}
		mutations.WithLabelValues(name, "error").Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		mutations.WithLabelValues(name, "error").Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	mr := controller.MutationRequest{Kind: policyv1alpha1.Kind(req.Kind.Kind), Update: req.Operation == admissionv1.Update, Object: obj}
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, &mr.OldObject); err != nil {
			mutations.WithLabelValues(name, "error").Inc()
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if p.Spec.Action == policyv1alpha1.ActionDefault && req.Namespace != "" {
		ns := &metav1.PartialObjectMetadata{}
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := h.Reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
			mutations.WithLabelValues(name, "error").Inc()
			return admission.Errored(http.StatusInternalServerError, err)
		}
		mr.NamespaceLabels = ns.Labels
	}
	if !controller.Mutate(&p, mr) {
		mutations.WithLabelValues(name, "unchanged").Inc()
		return admission.Allowed("")
	}
	mutated, err := json.Marshal(mr.Object)
	if err != nil {
		mutations.WithLabelValues(name, "error").Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	mutations.WithLabelValues(name, "mutated").Inc()
	log.FromContext(ctx).V(1).Info("Filled label in", "labelpolicy", name, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}
