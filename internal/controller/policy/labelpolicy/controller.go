package labelpolicy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Name is the controller's name, as given to --controllers.
const Name = "labelpolicy"

// DefaultAuditInterval is how often the workloads already running are audited.
const DefaultAuditInterval = 5 * time.Minute

// Reconciler reconciles LabelPolicies.
type Reconciler struct {
	client.Client
	// APIReader lists workloads page by page straight from the API server, so the
	// cache never holds every workload of the cluster.
	APIReader client.Reader
	Recorder  kit.Recorder
	// AuditInterval is the time between audits; DefaultAuditInterval when zero.
	AuditInterval time.Duration
	// Mutation says how missing labels are filled in; admission.Auto when empty.
	Mutation admission.Mode
	// Webhook is how the API server reaches Orderly's mutating webhook; nil when the
	// manager serves none. Its CABundle is filled in from WebhookCABundle.
	Webhook *admission.Endpoint
	// WebhookCABundle returns the CA certificate of the webhook's serving certificate,
	// read at every reconcile so that a renewed CA reaches the configurations.
	WebhookCABundle func() ([]byte, error)
	// DiscoveryInterval is how often the API server is asked whether it serves
	// MutatingAdmissionPolicy; DefaultDiscoveryInterval when zero.
	DiscoveryInterval time.Duration
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	// mapServed is whether the API server serves MutatingAdmissionPolicy at
	// admissionregistration.k8s.io/v1, as discovery last said.
	mapServed    atomic.Bool
	watchMAPOnce sync.Once
	ctrl         controller.Controller
	cache        cache.Cache

	// audited remembers the last audit per policy (auditMark), only to avoid auditing
	// twice when the next reconcile reads a cached policy whose status is not yet
	// updated; status stays the source of truth.
	audited sync.Map
}

type auditMark struct {
	uid        types.UID
	generation int64
	at         time.Time
}

// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings;mutatingadmissionpolicies;mutatingadmissionpolicybindings;mutatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list;patch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=list;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the LabelPolicy controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.NewRecorder(mgr.GetEventRecorder("orderly-labelpolicy")),
		Mutation: deps.Admission.Mode, Webhook: deps.Admission.Webhook, WebhookCABundle: deps.Admission.CABundle}
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// Cache narrows the manager's cache to the admission objects Orderly manages. The
// MutatingAdmissionPolicy kinds are left out on purpose: naming a kind here makes the
// manager fail to start on an API server that does not serve it, and a cluster holds
// few MutatingAdmissionPolicies.
func Cache() kit.CacheRules {
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue})}
	return kit.CacheRules{
		&admissionv1.ValidatingAdmissionPolicy{}:        managed,
		&admissionv1.ValidatingAdmissionPolicyBinding{}: managed,
		&admissionv1.MutatingWebhookConfiguration{}:     managed,
	}
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Mutation == "" {
		r.Mutation = admission.Auto
	}
	served, err := admission.ServesMutatingAdmissionPolicy(mgr.GetConfig())
	if err != nil {
		return err
	}
	if r.Mutation == admission.Native && !served {
		return fmt.Errorf("LabelPolicy mutation mode %q: the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy", r.Mutation)
	}
	if r.Webhook != nil && r.WebhookCABundle == nil {
		return errors.New("a LabelPolicy webhook endpoint needs WebhookCABundle")
	}
	if r.Mutation == admission.Webhook && r.Webhook == nil {
		return fmt.Errorf("LabelPolicy mutation mode %q needs a webhook endpoint", r.Mutation)
	}
	r.mapServed.Store(served)
	events := make(chan event.GenericEvent)
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&policyv1alpha1.LabelPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&admissionv1.ValidatingAdmissionPolicy{}).
		Owns(&admissionv1.ValidatingAdmissionPolicyBinding{}).
		Owns(&admissionv1.MutatingWebhookConfiguration{}).
		WatchesRawSource(source.Channel(events, &handler.EnqueueRequestForObject{})).
		Build(r)
	if err != nil {
		return err
	}
	r.ctrl, r.cache = c, mgr.GetCache()
	if served {
		if err := r.watchMutatingPolicies(); err != nil {
			return err
		}
	}
	interval := r.DiscoveryInterval
	if interval <= 0 {
		interval = DefaultDiscoveryInterval
	}
	return mgr.Add(&discoveryWatcher{r: r, cfg: mgr.GetConfig(), interval: interval, events: events})
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

func (r *Reconciler) auditInterval() time.Duration {
	if r.AuditInterval > 0 {
		return r.AuditInterval
	}
	return DefaultAuditInterval
}

// Reconcile compiles one LabelPolicy into admission objects and audits the workloads.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var p policyv1alpha1.LabelPolicy
	if err := r.Get(ctx, req.NamespacedName, &p); err != nil {
		if apierrors.IsNotFound(err) {
			// The admission objects carry owner references: the garbage collector
			// removes them.
			forgetMetrics(req.Name)
			r.audited.Delete(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	obs := observation{mode: r.admissionMode()}
	re, err := CompilePattern(&p)
	if err != nil {
		// The CRD refuses invalid patterns; this catches what CEL's regex dialect
		// accepts and Go's does not.
		obs.invalidSpec = err.Error()
		return ctrl.Result{}, r.updateStatus(ctx, &p, obs)
	}
	obs.admissionErr = r.applyAdmission(ctx, &p, obs.mode)

	if r.staleStatus(&p) {
		// This copy of the policy predates the status our last audit wrote: writing a
		// status computed from it would undo that audit's results. The cache catches
		// up in moments.
		return ctrl.Result{RequeueAfter: time.Second}, obs.admissionErr
	}
	now := r.now()
	last, due := r.lastAudit(&p)
	due = due || !now.Before(last.Add(r.auditInterval()))
	if due {
		start := time.Now()
		res, auditErr := r.audit(ctx, &p, re)
		if auditErr != nil {
			log.FromContext(ctx).Error(auditErr, "Auditing workloads for LabelPolicy", "labelpolicy", p.Name)
			obs.auditErr = auditErr
		} else {
			recordAudit(p.Name, res, time.Since(start).Seconds())
			obs.audit = res
			obs.auditTime = now
		}
	}
	if err := r.updateStatus(ctx, &p, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.audit != nil {
		r.audited.Store(p.Name, auditMark{uid: p.UID, generation: p.Generation, at: now})
	}
	if obs.admissionErr != nil {
		return ctrl.Result{}, obs.admissionErr
	}
	if obs.auditErr != nil {
		return ctrl.Result{}, obs.auditErr
	}
	next := r.auditInterval()
	if !due {
		next = last.Add(r.auditInterval()).Sub(now)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// staleStatus says whether p's status is older than the last audit this process
// wrote for p's current generation.
func (r *Reconciler) staleStatus(p *policyv1alpha1.LabelPolicy) bool {
	v, ok := r.audited.Load(p.Name)
	if !ok {
		return false
	}
	m := v.(auditMark)
	if m.uid != p.UID || m.generation != p.Generation {
		return false
	}
	return p.Status.LastAuditTime == nil || p.Status.LastAuditTime.Before(&metav1.Time{Time: m.at.Truncate(time.Second)})
}

// lastAudit returns when the policy's current generation was last audited, and
// whether an audit is due regardless of the time (never audited, or spec changed).
func (r *Reconciler) lastAudit(p *policyv1alpha1.LabelPolicy) (time.Time, bool) {
	if v, ok := r.audited.Load(p.Name); ok {
		m := v.(auditMark)
		if m.uid == p.UID && m.generation == p.Generation {
			return m.at, false
		}
	}
	if p.Status.LastAuditTime == nil || p.Status.ObservedGeneration != p.Generation {
		return time.Time{}, true
	}
	return p.Status.LastAuditTime.Time, false
}

// eventf records an Event on the policy.
func (r *Reconciler) eventf(p *policyv1alpha1.LabelPolicy, typ, reason, action, format string, args ...any) {
	r.Recorder.Eventf(p, nil, typ, reason, action, format, args...)
}
