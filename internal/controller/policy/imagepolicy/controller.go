// Package imagepolicy is the ImagePolicy controller: it compiles each policy into a
// ValidatingAdmissionPolicy (allowedRegistries, requireDigest: decided inside the
// API server) and a ValidatingWebhookConfiguration pointing at Orderly's webhook
// (maxSeverity, ignore, unscanned: decided from the ImageScans in the cache), and
// evaluates the running pods for status, Events and metrics.
package imagepolicy

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Name is the controller's name, as given to --controllers.
const Name = "imagepolicy"

// DefaultEvaluateInterval is how often running pods are evaluated when nothing
// else triggers it.
const DefaultEvaluateInterval = 30 * time.Second

// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagepolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagepolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagescans,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings;validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the ImagePolicy controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Cache trims Pods and ImageScans as the ImageScan controller does, and narrows the
// admission objects to those Orderly manages.
func Cache() kit.CacheRules {
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue})}
	return kit.CacheRules{
		&corev1.Pod{}:                                   imagescan.PodCache(),
		&policyv1alpha1.ImageScan{}:                     imagescan.ScanCache(),
		&admissionv1.ValidatingAdmissionPolicy{}:        managed,
		&admissionv1.ValidatingAdmissionPolicyBinding{}: managed,
		&admissionv1.ValidatingWebhookConfiguration{}:   managed,
		&admissionv1.MutatingWebhookConfiguration{}:     managed,
	}
}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	r := &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-imagepolicy"), Clock: deps.ClockOrReal(),
		Admission: deps.Admission, Namespace: deps.Namespace,
	}
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// Reconciler reconciles ImagePolicies.
type Reconciler struct {
	client.Client
	// APIReader reads the latest version of a policy when a status write loses the
	// optimistic lock (the manager's API reader: the cache may be behind).
	APIReader client.Reader
	Recorder  kit.Recorder
	Clock     clock.PassiveClock
	// Admission carries the webhook endpoint (Webhook, CABundle) when the manager
	// serves Orderly's webhook; without it the scan-based checks are not enforced
	// at admission, and the policy says so.
	Admission admission.Config
	// Namespace is the manager's namespace, out of every policy's reach.
	Namespace string
	// EvaluateInterval is the time between evaluations of running pods.
	EvaluateInterval time.Duration

	// reported remembers, per policy, the violations already announced by an Event.
	reported sync.Map
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	// A Reconciler built by hand (tests, the webhook's suite) gets the manager's reader.
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := imagescan.EnsureTagIndex(ctx, mgr); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&policyv1alpha1.ImagePolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&admissionv1.ValidatingAdmissionPolicy{}).
		Owns(&admissionv1.ValidatingAdmissionPolicyBinding{}).
		Owns(&admissionv1.ValidatingWebhookConfiguration{}).
		Owns(&admissionv1.MutatingWebhookConfiguration{}).
		// A scan's result changes what runs in violation: evaluate again.
		Watches(&policyv1alpha1.ImageScan{}, handler.EnqueueRequestsFromMapFunc(r.allPolicies)).
		Complete(r)
}

func (r *Reconciler) allPolicies(ctx context.Context, _ client.Object) []ctrl.Request {
	var list policyv1alpha1.ImagePolicyList
	if err := r.List(ctx, &list); err != nil {
		return nil
	}
	out := make([]ctrl.Request, 0, len(list.Items))
	for _, p := range list.Items {
		out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
	}
	return out
}

// Reconcile compiles one ImagePolicy into admission objects and evaluates the pods
// running under it.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p policyv1alpha1.ImagePolicy
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
			r.reported.Delete(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := r.Clock.Now()
	obs := observation{now: now, webhook: r.Admission.Webhook != nil}
	c, err := Compile(&p)
	if err != nil {
		obs.invalid = err.Error()
		return ctrl.Result{}, r.updateStatus(ctx, &p, obs)
	}
	obs.admissionErr = r.applyAdmission(ctx, &p)
	eval, err := r.evaluate(ctx, c, now)
	if err != nil {
		obs.evalErr = err
	} else {
		obs.eval = eval
		r.announce(&p, eval)
		record(req.NamespacedName, eval)
	}
	if err := r.updateStatus(ctx, &p, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.admissionErr != nil {
		return ctrl.Result{}, obs.admissionErr
	}
	next := r.EvaluateInterval
	if next <= 0 {
		next = DefaultEvaluateInterval
	}
	if at, ok := NextIgnoreExpiry(&p, now); ok {
		next = min(next, at.Sub(now))
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// applyAdmission writes the admission objects the policy needs and deletes those
// it no longer needs (only when controlled by it).
func (r *Reconciler) applyAdmission(ctx context.Context, p *policyv1alpha1.ImagePolicy) error {
	var endpoint *admission.Endpoint
	if r.Admission.Webhook != nil && (NeedsScans(p) || NeedsRewrite(p)) {
		ca, err := r.Admission.CABundle()
		if err != nil {
			return err
		}
		e := *r.Admission.Webhook
		e.CABundle = ca
		endpoint = &e
	}
	a := CompileAdmission(p, endpoint, r.Namespace)
	type pair struct {
		want client.Object
		kind client.Object
	}
	for _, o := range []pair{
		{nilIf(a.VAP == nil, client.Object(a.VAP)), &admissionv1.ValidatingAdmissionPolicy{}},
		{nilIf(a.VAPBinding == nil, client.Object(a.VAPBinding)), &admissionv1.ValidatingAdmissionPolicyBinding{}},
		{nilIf(a.Webhook == nil, client.Object(a.Webhook)), &admissionv1.ValidatingWebhookConfiguration{}},
		{nilIf(a.Mutating == nil, client.Object(a.Mutating)), &admissionv1.MutatingWebhookConfiguration{}},
	} {
		if o.want != nil {
			if err := controllerutil.SetControllerReference(p, o.want, r.Scheme()); err != nil {
				return err
			}
			if err := kit.Apply(ctx, r.Client, o.want); err != nil {
				return err
			}
			continue
		}
		if err := r.deleteOwned(ctx, p, o.kind); err != nil {
			return err
		}
	}
	return nil
}

func nilIf(isNil bool, o client.Object) client.Object {
	if isNil {
		return nil
	}
	return o
}

func (r *Reconciler) deleteOwned(ctx context.Context, p *policyv1alpha1.ImagePolicy, o client.Object) error {
	if err := r.Get(ctx, client.ObjectKey{Name: ObjectName(p)}, o); err != nil {
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

// Evaluation is what the running pods look like under a policy.
type Evaluation struct {
	Coverage   policyv1alpha1.ImageCoverage
	Violations []policyv1alpha1.ImageViolation
	// Severities counts Vulnerable violations by their worst blocking severity.
	Severities map[policyv1alpha1.Severity]int
}

// evaluate checks every image of every running pod in the policy's namespaces.
func (r *Reconciler) evaluate(ctx context.Context, c *Compiled, now time.Time) (*Evaluation, error) {
	p := c.Policy
	matched, err := imagescan.MatchedNamespaces(ctx, r.Client, []*policyv1alpha1.ImagePolicy{p}, r.Namespace)
	if err != nil {
		return nil, err
	}
	var pods corev1.PodList
	if err := r.List(ctx, &pods); err != nil {
		return nil, err
	}
	lookup := CacheLookup{Ctx: ctx, Reader: r.Client}
	ev := &Evaluation{Severities: map[policyv1alpha1.Severity]int{}}
	seenImage := map[string]bool{}
	seenViolation := map[policyv1alpha1.ImageViolation]bool{}
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !matched[pod.Namespace] || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		images, _ := imagescan.PodImages(pod)
		w := imagescan.WorkloadOf(pod)
		for _, img := range images {
			// The kubelet's digest decides for a running container, whatever its tag
			// points at now.
			ref := img.Image
			if img.Digest != "" {
				ref = img.Pullable()
			}
			key := img.Repository + "@" + img.Digest + ":" + img.Tag
			if !seenImage[key] {
				seenImage[key] = true
				ev.Coverage.Running++
				var sc, pending *policyv1alpha1.ImageScan
				if img.Digest != "" {
					sc = lookup.ByDigest(img.Repository, img.Digest)
				} else {
					sc, pending = lookup.ByTag(img.Repository, img.Tag)
				}
				switch {
				case sc != nil && sc.Status.ScannedAt != nil && sc.Status.Error == nil:
					ev.Coverage.Scanned++
				case sc != nil && sc.Status.Error != nil, pending != nil && pending.Status.Error != nil:
					ev.Coverage.Failed++
				default:
					ev.Coverage.Pending++
				}
			}
			v := c.Evaluate(ref, lookup, All, now)
			if v.Reason == "" {
				continue
			}
			viol := policyv1alpha1.ImageViolation{Namespace: w.Namespace, Kind: w.Kind, Name: w.Name, Image: kit.Truncate(img.Image, 512), Reason: v.Reason, Message: kit.Truncate(v.Message, 512)}
			if seenViolation[viol] {
				continue
			}
			seenViolation[viol] = true
			ev.Violations = append(ev.Violations, viol)
			if v.Reason == policyv1alpha1.ImageReasonVulnerable {
				ev.Severities[v.Severity]++
			}
		}
	}
	slices.SortFunc(ev.Violations, func(a, b policyv1alpha1.ImageViolation) int {
		for _, pair := range [][2]string{{a.Namespace, b.Namespace}, {a.Kind, b.Kind}, {a.Name, b.Name}, {a.Image, b.Image}} {
			if pair[0] != pair[1] {
				if pair[0] < pair[1] {
					return -1
				}
				return 1
			}
		}
		return 0
	})
	return ev, nil
}

// announce records a Warning Event on the policy for each violation not announced
// before (at most 5 per evaluation, so a first evaluation of a large cluster does
// not flood Events).
func (r *Reconciler) announce(p *policyv1alpha1.ImagePolicy, ev *Evaluation) {
	prev, _ := r.reported.Load(p.Name)
	seen, _ := prev.(map[policyv1alpha1.ImageViolation]bool)
	next := map[policyv1alpha1.ImageViolation]bool{}
	sent := 0
	for _, v := range ev.Violations {
		next[v] = true
		if seen[v] || sent >= 5 {
			continue
		}
		sent++
		r.Recorder.Eventf(p, nil, corev1.EventTypeWarning, "ImageViolation", "Evaluate", "%s %s/%s: %s", v.Kind, v.Namespace, v.Name, v.Message)
	}
	r.reported.Store(p.Name, next)
}
