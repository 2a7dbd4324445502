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
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/clock"
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
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
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
	// cache never holds every workload of the cluster. Status writes re-read the
	// policy from it when they lose the optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	// Clock dates the audits and decides when the next one is due; the wall clock
	// when nil.
	Clock clock.PassiveClock
	// AuditInterval is the time between audits; DefaultAuditInterval when zero.
	AuditInterval time.Duration
	// Admission says how missing labels are filled in, whether the API server served
	// MutatingAdmissionPolicy at start-up, and how it reaches Orderly's webhook.
	Admission admission.Config
	// DiscoveryInterval is how often the API server is asked again whether it serves
	// MutatingAdmissionPolicy, and the webhook's CA is compared with the one the
	// configurations carry; DefaultDiscoveryInterval when zero.
	DiscoveryInterval time.Duration
	// Namespace is the manager's own namespace (kit.Deps.Namespace): like every kube-*
	// namespace, no policy applies there (Protected). Empty when unknown: then only the
	// kube-* namespaces are protected.
	Namespace string

	// mapServed is whether the API server serves MutatingAdmissionPolicy at
	// admissionregistration.k8s.io/v1: Admission.MAPServed at start-up, then what
	// discovery last said.
	mapServed    atomic.Bool
	watchMAPOnce sync.Once
	ctrl         controller.Controller
	cache        cache.Cache

	// audited remembers the last audit per policy (auditMark), only to avoid auditing
	// again when the next reconcile reads a cached policy whose status does not show
	// that audit yet: an audit lists every matched workload of the cluster. Status
	// stays the source of truth, and kit.PatchStatus keeps a status computed from such
	// a stale copy from overwriting the audit's results.
	audited sync.Map
}

type auditMark struct {
	uid        types.UID
	generation int64
	at         time.Time
	// exceptions is activeKey when the audit ran.
	exceptions string
	// values is valuesKey when the audit ran.
	values string
	// retry: a label could not be written because the workload changed meanwhile;
	// the next reconcile audits again.
	retry bool
}

// valuesKey changes when the policy's LabelValueSet's values change (its
// generation: its status is written without changing them) or one of its values
// expires: the audit runs again, so running workloads with a value retired since are
// reported without waiting for the next audit. "" without a set.
func valuesKey(s *policyv1alpha1.LabelValueSet, now time.Time) string {
	if s == nil {
		return ""
	}
	return fmt.Sprintf("%s/%d@%s", s.UID, s.Generation, valuesCutoff(s, now))
}

// The audit reads (get, by name) the built-in controller of a pod that violates the
// policy, to tell whether it vouches for the pod (owners.go).
//
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelpolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelpolicies/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelpolicies/finalizers,verbs=update
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelvaluesets,verbs=get;list;watch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=labelvaluesets/status,verbs=get;patch
// +kubebuilder:rbac:groups=tenancy.orderly.dev,resources=tenants,verbs=get;list;watch
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings;mutatingadmissionpolicies;mutatingadmissionpolicybindings;mutatingwebhookconfigurations,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=list
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;patch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list;patch
// +kubebuilder:rbac:groups=batch,resources=jobs;cronjobs,verbs=list;patch
// +kubebuilder:rbac:groups=apps,resources=replicasets;statefulsets;daemonsets,verbs=get
// +kubebuilder:rbac:groups=batch,resources=jobs,verbs=get
// +kubebuilder:rbac:groups="",resources=replicationcontrollers,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the LabelPolicy controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	return NewReconciler(mgr, deps).SetupWithManager(ctx, mgr, deps.Options)
}

// NewReconciler is the reconciler the manager runs, before SetupWithManager; tests
// change its settings in between.
func NewReconciler(mgr ctrl.Manager, deps kit.Deps) *Reconciler {
	return &Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  kit.EventsFor(mgr, "orderly-labelpolicy"),
		Clock:     deps.ClockOrReal(),
		Admission: deps.Admission,
		Namespace: deps.Namespace,
	}
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

// SetupWithManager registers the controller with mgr. Whether the API server serves
// MutatingAdmissionPolicy comes from r.Admission.MAPServed, which the manager asked
// once at start-up; the controller asks again every DiscoveryInterval.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Admission.Mode == "" {
		r.Admission.Mode = admission.Auto
	}
	served := r.Admission.MAPServed
	if r.Admission.Mode == admission.Native && !served {
		return fmt.Errorf("LabelPolicy mutation mode %q: the API server does not serve admissionregistration.k8s.io/v1 MutatingAdmissionPolicy", r.Admission.Mode)
	}
	if r.Admission.Webhook != nil && r.Admission.CABundle == nil {
		return errors.New("a LabelPolicy webhook endpoint needs its CABundle")
	}
	if r.Admission.Mode == admission.Webhook && r.Admission.Webhook == nil {
		return fmt.Errorf("LabelPolicy mutation mode %q needs a webhook endpoint", r.Admission.Mode)
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
		// A changed LabelValueSet is enforced by the API server at once (it is the
		// policy's parameter); the reconcile moves the expiry cutoff and audits again.
		// Its status (valuesets.go) changes nothing here.
		Watches(&policyv1alpha1.LabelValueSet{}, handler.EnqueueRequestsFromMapFunc(r.policiesUsing),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// A Tenant's costCenter is compiled into the mutating policy of every policy
		// with defaultFromTenant; its status writes change nothing there.
		Watches(&tenancyv1alpha1.Tenant{}, handler.EnqueueRequestsFromMapFunc(r.policiesFromTenants),
			builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Channel(events, &handler.EnqueueRequestForObject{})).
		Build(r)
	if err != nil {
		return err
	}
	r.ctrl, r.cache = c, mgr.GetCache()
	if err := r.setupValueSets(mgr, opts); err != nil {
		return err
	}
	if served {
		if err := r.watchMutatingPolicies(); err != nil {
			return err
		}
	}
	interval := r.DiscoveryInterval
	if interval <= 0 {
		interval = DefaultDiscoveryInterval
	}
	return mgr.Add(newDiscoveryWatcher(r, mgr.GetConfig(), interval, events))
}

func (r *Reconciler) now() time.Time {
	if r.Clock == nil {
		return time.Now()
	}
	return r.Clock.Now()
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
			series.Forget(req.NamespacedName)
			r.audited.Delete(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	now := r.now()
	obs := observation{mode: r.admissionMode(), managerNamespace: r.Namespace, now: now}
	re, err := CompilePattern(&p)
	if err == nil {
		err = validateExceptions(&p)
	}
	if err != nil {
		// The CRD refuses invalid patterns; this catches what CEL's regex dialect
		// accepts and Go's does not, and selectors with unknown operators.
		obs.invalidSpec = err.Error()
		return ctrl.Result{}, r.updateStatus(ctx, &p, obs)
	}
	// Admission and the audit see only the exceptions active now; the reconcile at the
	// next expiry (below) compiles the policy again without the expired one.
	active := withActiveExceptions(&p, now)
	set, vs, err := r.valueSet(ctx, &p, now)
	if err != nil {
		return ctrl.Result{}, err
	}
	if vs != nil && set == nil {
		obs.valueSetMissing = vs.name
	}
	defaults, totalDefaults, err := r.tenantDefaultsFor(ctx, &p)
	if err != nil {
		return ctrl.Result{}, err
	}
	obs.tenantDefaults, obs.tenantDefaultsTotal = len(defaults), totalDefaults
	obs.admissionErr = r.applyAdmission(ctx, active, obs.mode, Options{ValuesCutoff: valuesCutoff(set, now), TenantDefaults: defaults})
	var tenants map[string]TenantDefault
	if p.Spec.DefaultFromTenant {
		tenants = tenantIndex(defaults)
	}

	last, due := r.lastAudit(&p, now, valuesKey(set, now))
	due = due || !now.Before(last.Add(r.auditInterval()))
	if due {
		// The duration is measured on the wall clock: it is how long the audit took,
		// not a date.
		start := time.Now()
		res, auditErr := r.audit(ctx, active, re, vs, tenants)
		if auditErr != nil {
			log.FromContext(ctx).Error(auditErr, "Auditing workloads for LabelPolicy", "labelpolicy", p.Name)
			obs.auditErr = auditErr
		} else {
			recordAudit(req.NamespacedName, res, time.Since(start).Seconds())
			obs.audit = res
			obs.auditTime = now
		}
	}
	if err := r.updateStatus(ctx, &p, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.audit != nil {
		r.audited.Store(p.Name, auditMark{uid: p.UID, generation: p.Generation, at: now, exceptions: activeKey(&p, now), values: valuesKey(set, now),
			retry: obs.audit.remediationConflicts > 0})
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
	if at, ok := nextValueExpiry(set, now); ok {
		// At a value's expiry the policy is compiled again with a later cutoff.
		next = min(next, at.Sub(now))
	}
	if at, ok := nextExpiry(&p, now); ok {
		// At the expiry the policy is compiled again without the exception. A requeue
		// that comes a little early finds it still active and waits the rest.
		next = min(next, at.Sub(now))
	}
	if obs.audit != nil && obs.audit.remediationConflicts > 0 {
		next = min(next, conflictRetry)
	}
	return ctrl.Result{RequeueAfter: next}, nil
}

// conflictRetry is how soon a policy is audited again when a workload it labels
// changed between the audit's read and its write.
const conflictRetry = 5 * time.Second

// valueSet reads the policy's LabelValueSet from the cache: the set itself (nil when
// it does not exist) and as the audit reads it at now. Both are nil without
// allowedValuesFrom.
func (r *Reconciler) valueSet(ctx context.Context, p *policyv1alpha1.LabelPolicy, now time.Time) (*policyv1alpha1.LabelValueSet, *valueSet, error) {
	f := p.Spec.AllowedValuesFrom
	if f == nil {
		return nil, nil, nil
	}
	var s policyv1alpha1.LabelValueSet
	if err := r.Get(ctx, client.ObjectKey{Name: f.LabelValueSet}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, newValueSet(f.LabelValueSet, nil, now), nil
		}
		return nil, nil, fmt.Errorf("reading LabelValueSet %s: %w", f.LabelValueSet, err)
	}
	return &s, newValueSet(f.LabelValueSet, &s, now), nil
}

// policiesUsing maps a LabelValueSet to the LabelPolicies that take values from it.
func (r *Reconciler) policiesUsing(ctx context.Context, o client.Object) []ctrl.Request {
	var list policyv1alpha1.LabelPolicyList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "Listing LabelPolicies for a LabelValueSet", "labelvalueset", o.GetName())
		return nil
	}
	var out []ctrl.Request
	for i := range list.Items {
		if f := list.Items[i].Spec.AllowedValuesFrom; f != nil && f.LabelValueSet == o.GetName() {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Name: list.Items[i].Name}})
		}
	}
	return out
}

// lastAudit returns when the policy's current generation was last audited, and
// whether an audit is due regardless of the time (never audited, spec changed, an
// exception expired since: its workloads are violations now, or the LabelValueSet
// changed, values its valuesKey). After a restart, status tells the first three only.
func (r *Reconciler) lastAudit(p *policyv1alpha1.LabelPolicy, now time.Time, values string) (time.Time, bool) {
	key := activeKey(p, now)
	if v, ok := r.audited.Load(p.Name); ok {
		m := v.(auditMark)
		if m.uid == p.UID && m.generation == p.Generation {
			return m.at, m.exceptions != key || m.values != values || m.retry
		}
	}
	if p.Status.LastAuditTime == nil || p.Status.ObservedGeneration != p.Generation || statusActiveKey(&p.Status) != key {
		return time.Time{}, true
	}
	return p.Status.LastAuditTime.Time, false
}
