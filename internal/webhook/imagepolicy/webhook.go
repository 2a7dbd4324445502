// Package imagepolicy is Orderly's validating admission webhook for the checks of an
// ImagePolicy that a ValidatingAdmissionPolicy cannot make: maxSeverity, ignore and
// unscanned, decided from the ImageScans in the manager's cache (a Get by name for a
// digest, an index lookup for a tag). It never calls a registry or a scanner. An
// image nothing is known of is queued by creating its pending ImageScan (or, for a
// digest, its ImageScan), which the scanner on the leader picks up: any replica can
// answer, leader or not.
package imagepolicy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	orderlyadmission "orderly.dev/orderly/internal/admission"
	controller "orderly.dev/orderly/internal/controller/policy/imagepolicy"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

var decisions = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "orderly_imagepolicy_webhook_decisions_total",
	Help: "Admission requests Orderly's ImagePolicy webhook answered, by policy and result (allowed, denied, warned, audited, error).",
}, []string{controller.MetricLabel, "result"})

func init() { metrics.Registry.MustRegister(decisions) }

// maxQueued bounds the pending ImageScans being created at once; beyond it a
// request queues nothing, and the next request for the image tries again.
const maxQueued = 16

// Handler answers the admission requests of every ImagePolicy, each at
// controller.WebhookPathPrefix + its name.
type Handler struct {
	// Reader reads ImagePolicies and ImageScans from the cache (with
	// imagescan.TagIndex).
	Reader client.Reader
	// Writer creates pending ImageScans.
	Writer client.Client
	// Namespace is the manager's namespace, out of every policy's reach.
	Namespace string
	Clock     clock.PassiveClock

	queued    chan struct{}
	compiled  sync.Map // types.UID -> compiledAt
	queueOnce sync.Once
	// wg tracks the pending ImageScans being created, for tests.
	wg sync.WaitGroup
}

type compiledAt struct {
	generation int64
	c          *controller.Compiled
}

type policyNameKey struct{}

// Register serves the webhooks of every ImagePolicy on mgr's webhook server: the
// validating one, and the mutating one of requireDigest.rewrite.
func Register(ctx context.Context, mgr ctrl.Manager, namespace string) error {
	if err := imagescan.EnsureTagIndex(ctx, mgr); err != nil {
		return err
	}
	h := &Handler{Reader: mgr.GetClient(), Writer: mgr.GetClient(), Namespace: namespace}
	mgr.GetWebhookServer().Register(controller.WebhookPathPrefix, h.Webhook())
	pin := &Pinner{Reader: mgr.GetClient(), Namespace: namespace, Queue: h.queue}
	mgr.GetWebhookServer().Register(controller.MutatePathPrefix, pin.Webhook())
	return nil
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

// Wait waits for the pending ImageScans being created (tests).
func (h *Handler) Wait() { h.wg.Wait() }

func (h *Handler) now() time.Time {
	if h.Clock == nil {
		return time.Now()
	}
	return h.Clock.Now()
}

// Handle decides from scan results.
func (h *Handler) Handle(ctx context.Context, req admission.Request) admission.Response {
	name, _ := ctx.Value(policyNameKey{}).(string)
	if kit.ProtectedNamespace(req.Namespace, h.Namespace) {
		return admission.Allowed("namespace " + req.Namespace + " is out of every ImagePolicy's reach")
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var p policyv1alpha1.ImagePolicy
	if err := h.Reader.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Allowed("ImagePolicy " + name + " no longer exists")
		}
		decisions.WithLabelValues(name, "error").Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	spec, err := orderlyadmission.PodSpecOf(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		decisions.WithLabelValues(name, "error").Inc()
		return admission.Errored(http.StatusBadRequest, err)
	}
	images := orderlyadmission.ImagesOf(spec)
	if req.Operation == admissionv1.Update && len(req.OldObject.Raw) > 0 {
		if old, err := Images(req.Kind.Kind, req.OldObject.Raw); err == nil && slices.Equal(old, images) {
			return admission.Allowed("images unchanged")
		}
	}
	c, err := h.compile(&p)
	if err != nil {
		decisions.WithLabelValues(name, "error").Inc()
		return admission.Errored(http.StatusInternalServerError, err)
	}
	now := h.now()
	lookup := controller.CacheLookup{Ctx: ctx, Reader: h.Reader}
	var problems []string
	for _, image := range dedupe(images) {
		// An image from a registry the policy does not allow is refused by the
		// ValidatingAdmissionPolicy, with its own message; it is never queued for a scan.
		if ref, err := imagescan.ParseRef(image); err == nil && !c.Registries.Allowed(ref.Repository) {
			continue
		}
		v := c.Evaluate(image, lookup, controller.Checks{Scan: true}, now)
		if v.Queue && (req.DryRun == nil || !*req.DryRun) {
			h.queue(v.Ref, imagescan.PullSecretsFor(req.Namespace, spec.ImagePullSecrets))
		}
		if v.Reason != "" {
			problems = append(problems, v.Message)
		}
	}
	if len(problems) == 0 {
		decisions.WithLabelValues(name, "allowed").Inc()
		return admission.Allowed("")
	}
	objName := req.Name
	if objName == "" {
		objName = generateName(req.Object.Raw)
	}
	msg := fmt.Sprintf("ImagePolicy %s: %s %s/%s: %s", p.Name, req.Kind.Kind, req.Namespace, objName, strings.Join(problems, "; "))
	switch p.Spec.Action {
	case policyv1alpha1.ImageActionWarn:
		decisions.WithLabelValues(name, "warned").Inc()
		return admission.Allowed("").WithWarnings(msg)
	case policyv1alpha1.ImageActionAudit:
		decisions.WithLabelValues(name, "audited").Inc()
		log.FromContext(ctx).Info("Admitted an image that breaks an ImagePolicy (action Audit)", "imagepolicy", p.Name, "message", msg)
		return admission.Allowed("")
	}
	decisions.WithLabelValues(name, "denied").Inc()
	return admission.Denied(msg)
}

func dedupe(in []string) []string {
	out := slices.Clone(in)
	slices.Sort(out)
	return slices.Compact(out)
}

func generateName(raw []byte) string {
	var o struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Metadata.GenerateName != "" {
		return o.Metadata.GenerateName + "*"
	}
	return ""
}

func (h *Handler) compile(p *policyv1alpha1.ImagePolicy) (*controller.Compiled, error) {
	if v, ok := h.compiled.Load(p.UID); ok && v.(compiledAt).generation == p.Generation {
		// The cached copy's spec is the same generation's: only the object differs.
		return v.(compiledAt).c, nil
	}
	c, err := controller.Compile(p)
	if err != nil {
		return nil, err
	}
	h.compiled.Store(p.UID, compiledAt{generation: p.Generation, c: c})
	return c, nil
}

// queue creates the ImageScan that makes the scanner look at ref: the pending one
// of a tag, or the ImageScan of a digest, naming the pull secrets of the object
// admission met (the scanner tries them first: no pod may run the image yet). In the background, with a deadline, so
// the request does not wait for it.
func (h *Handler) queue(ref imagescan.Ref, pullSecrets []client.ObjectKey) {
	h.queueOnce.Do(func() { h.queued = make(chan struct{}, maxQueued) })
	select {
	case h.queued <- struct{}{}:
	default:
		return
	}
	sc := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
		labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.ImageScanLabel: "true",
	}}}
	sc.Spec.Repository = ref.Repository
	if ref.Digest != "" {
		sc.Name, sc.Spec.Digest = imagescan.ScanName(ref.Repository, ref.Digest), ref.Digest
	} else {
		sc.Name, sc.Spec.Tag = imagescan.PendingName(ref.Repository, ref.Tag), ref.Tag
	}
	if len(pullSecrets) > 0 {
		sc.Annotations = map[string]string{policyv1alpha1.ImageScanPullSecretsAnnotation: imagescan.FormatPullSecrets(pullSecrets)}
	}
	h.wg.Go(func() {
		defer func() { <-h.queued }()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := h.Writer.Create(ctx, sc); err != nil && !apierrors.IsAlreadyExists(err) {
			log.Log.Error(err, "Queueing an image for scanning", "image", ref.Image, "imagescan", sc.Name)
		}
	})
}
