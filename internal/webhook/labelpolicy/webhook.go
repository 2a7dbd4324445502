// Package labelpolicy is Orderly's mutating admission webhook for LabelPolicies: the
// fallback that fills labels in where the API server does not serve
// MutatingAdmissionPolicy. It only adapts HTTP to labelpolicy.Mutate, the Go twin of
// the MutatingAdmissionPolicy the controller compiles; the controller writes the
// MutatingWebhookConfiguration that points here.
package labelpolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	controller "orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/kit"
)

// series holds the webhook's per-policy series. The webhook runs on every replica,
// not only on the leader that reconciles, so each replica forgets a policy's series
// itself, when its cache sees the policy go.
var series = kit.ClusterSeries(controller.MetricLabel)

var mutations = series.Counter(prometheus.CounterOpts{
	Name: "orderly_labelpolicy_webhook_requests_total",
	Help: "Admission requests Orderly's LabelPolicy webhook answered, by policy and result (mutated, unchanged, error).",
}, "result")

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

// Handler answers the admission requests of every LabelPolicy, each at
// controller.WebhookPathPrefix + its name.
type Handler struct {
	// Reader reads LabelPolicies, namespace metadata and (for defaultFromTenant)
	// Tenants, normally from the cache.
	Reader client.Reader
	// Namespace is the manager's namespace. Like the kube-* namespaces it is out of
	// every policy's reach (controller.Protected); the configurations already leave
	// them out, and the handler makes sure of it.
	Namespace string
}

type policyNameKey struct{}

// Register serves the webhook of every LabelPolicy on mgr's webhook server, reading
// policies and namespaces from mgr's cache, and forgets a policy's series when the
// policy is deleted. namespace is the manager's namespace.
func Register(ctx context.Context, mgr ctrl.Manager, namespace string) error {
	informer, err := mgr.GetCache().GetInformer(ctx, &policyv1alpha1.LabelPolicy{})
	if err != nil {
		return fmt.Errorf("watching LabelPolicies for the webhook's metrics: %w", err)
	}
	if _, err := informer.AddEventHandler(toolscache.ResourceEventHandlerFuncs{DeleteFunc: forget}); err != nil {
		return fmt.Errorf("watching LabelPolicies for the webhook's metrics: %w", err)
	}
	mgr.GetWebhookServer().Register(controller.WebhookPathPrefix, (&Handler{Reader: mgr.GetClient(), Namespace: namespace}).Webhook())
	return nil
}

// forget drops the series of a deleted policy; obj is the policy, or the tombstone
// of one whose deletion the watch missed.
func forget(obj any) {
	if tomb, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if p, ok := obj.(client.Object); ok {
		series.Forget(client.ObjectKeyFromObject(p))
	}
}

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
	if kit.ProtectedNamespace(req.Namespace, h.Namespace) {
		return admission.Allowed("namespace " + req.Namespace + " is out of every LabelPolicy's reach")
	}
	key := client.ObjectKey{Name: name}
	var p policyv1alpha1.LabelPolicy
	if err := h.Reader.Get(ctx, key, &p); err != nil {
		if apierrors.IsNotFound(err) {
			// Deleted: its MutatingWebhookConfiguration goes with it in a moment.
			return admission.Allowed("LabelPolicy " + name + " no longer exists")
		}
		mutations.WithLabelValues(series.Values(key, "error")...).Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var obj map[string]any
	if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
		mutations.WithLabelValues(series.Values(key, "error")...).Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	mr := controller.MutationRequest{Kind: policyv1alpha1.Kind(req.Kind.Kind), Update: req.Operation == admissionv1.Update, Object: obj}
	if len(req.OldObject.Raw) > 0 {
		if err := json.Unmarshal(req.OldObject.Raw, &mr.OldObject); err != nil {
			mutations.WithLabelValues(series.Values(key, "error")...).Inc()
			return admission.Errored(http.StatusBadRequest, err)
		}
	}
	if p.Spec.Action == policyv1alpha1.ActionDefault && req.Namespace != "" {
		ns := &metav1.PartialObjectMetadata{}
		ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
		if err := h.Reader.Get(ctx, client.ObjectKey{Name: req.Namespace}, ns); err != nil && !apierrors.IsNotFound(err) {
			mutations.WithLabelValues(series.Values(key, "error")...).Inc()
			return admission.Errored(http.StatusInternalServerError, err)
		}
		mr.NamespaceLabels, mr.NamespaceAnnotations = ns.Labels, ns.Annotations
		if p.Spec.DefaultFromTenant {
			var tenants tenancyv1alpha1.TenantList
			if err := h.Reader.List(ctx, &tenants); err != nil {
				mutations.WithLabelValues(series.Values(key, "error")...).Inc()
				return admission.Errored(http.StatusInternalServerError, err)
			}
			mr.Tenants = controller.TenantIndex(tenants.Items)
		}
	}
	if !controller.Mutate(&p, mr) {
		mutations.WithLabelValues(series.Values(key, "unchanged")...).Inc()
		return admission.Allowed("")
	}
	mutated, err := json.Marshal(mr.Object)
	if err != nil {
		mutations.WithLabelValues(series.Values(key, "error")...).Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	mutations.WithLabelValues(series.Values(key, "mutated")...).Inc()
	log.FromContext(ctx).V(1).Info("Filled label in", "labelpolicy", name, "kind", req.Kind.Kind, "namespace", req.Namespace, "name", req.Name)
	return admission.PatchResponseFromRaw(req.Object.Raw, mutated)
}
