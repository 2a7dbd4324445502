// Package secretrotation implements the SecretRotation controller: a credential
// rotated on a schedule, the workloads that use it rolled, and the previous
// credential revoked only after every consumer has rolled and is healthy.
//
// Each rotation is a state machine persisted in the SecretRotation's status (phase,
// rotation, consumers) and on the objects themselves (the rotation's own Secret, the
// consumers' pod-template annotation), never in memory: every phase's work is
// idempotent, so a manager killed in any phase resumes where the status says.
package secretrotation

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/kit"
)

// Name is the controller's name, as given to --controllers.
const Name = "secretrotation"

// MinInterval is the shortest spec.interval accepted (--secretrotation-min-interval).
var MinInterval = time.Hour

// Polling intervals. The Secret a SecretRotation names is watched (watch.go): its
// creation and changes wake the SecretRotation at once. Workloads are not cached (see
// Cache), so while consumers roll the controller looks at them on a timer,
// rollingPoll. An idle SecretRotation is looked at again every DefaultPoll only as a
// safety net (the watch already reports what it waits for; time-driven work asks for
// its own time), which is why it is long.
const (
	rollingPoll = 3 * time.Second
	DefaultPoll = 10 * time.Minute
)

// Reconciler reconciles SecretRotations.
type Reconciler struct {
	client.Client
	// APIReader reads Secrets' content and workloads, which no cache holds, and the
	// latest SecretRotation when a write loses its optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	Clock     clock.PassiveClock
	// MinInterval is the shortest spec.interval accepted.
	MinInterval time.Duration
	// Poll is how often an idle SecretRotation looks at its Secret again, besides
	// when the Secret's watch reports a change.
	Poll time.Duration
	// Namespace is the manager's namespace: SecretRotations there are not acted on,
	// and DatabaseServers' admin credentials are read from it.
	Namespace string
	// Databases connects to the DatabaseServers of postgresRole generators.
	Databases database.Connector
}

// +kubebuilder:rbac:groups=secrets.orderly.dev,resources=secretrotations,verbs=get;list;watch
// +kubebuilder:rbac:groups=secrets.orderly.dev,resources=secretrotations/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=get;list;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the SecretRotation controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	databases, err := database.ConnectorOf(deps)
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-secretrotation"),
		Clock: deps.ClockOrReal(), MinInterval: MinInterval, Poll: DefaultPoll, Namespace: deps.Namespace, Databases: databases}
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// Cache keeps SecretRotations without their managed fields. Secrets and workloads
// are not in the shared cache for this controller: the Secrets it reads are any
// Secret a user names (caching them would put every Secret of the cluster, with its
// data, in the manager's memory), and other controllers already hold Secrets and
// Deployments there in their own trimmed shapes. It watches Secrets through a cache
// of its own that keeps only their names (watch.go), and reads their content and the
// workloads straight from the API server, only while it has work: a Secret that
// changed, a rotation in flight.
func Cache() kit.CacheRules {
	return kit.CacheRules{
		&secretsv1alpha1.SecretRotation{}: {Transform: cache.TransformStripManagedFields()},
	}
}

// SetupWithManager registers the controller with mgr. Spec changes (and deletion)
// trigger a reconcile, and so does any change of the Secret a SecretRotation names;
// the controller's own status writes do not.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &secretsv1alpha1.SecretRotation{}, secretIndex, indexSecretName); err != nil {
		return fmt.Errorf("indexing SecretRotations by Secret: %w", err)
	}
	secrets, err := kit.NewNameCache(mgr)
	if err != nil {
		return fmt.Errorf("building the cache of Secret names: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&secretsv1alpha1.SecretRotation{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(source.Kind(secrets, client.Object(secretObject()),
			handler.EnqueueRequestsFromMapFunc(r.rotationsOfSecret), secretChanged())).
		Complete(r)
}

// Reconcile advances one SecretRotation's rotation as far as it can go now.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sr secretsv1alpha1.SecretRotation
	if err := r.Get(ctx, req.NamespacedName, &sr); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// The cache may not have seen this controller's last status write yet, and the
	// state machine must never run from an older phase: read the latest version.
	if err := r.APIReader.Get(ctx, req.NamespacedName, &sr); err != nil {
		if apierrors.IsNotFound(err) {
			forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sr.DeletionTimestamp.IsZero() {
		// Nothing outside the object to clean up: the rotation's own Secret is
		// owned (garbage collected); the Secret and the roles stay, consumers use them.
		forget(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	m := &machine{r: r, sr: &sr, now: r.Clock.Now()}
	res, err := m.run(ctx)
	record(&sr, m.now)
	return res, err
}

// patchWorkload merge-patches one workload's pod-template annotation for sr to
// version: this is what restarts its pods. The patch is guarded by the
// resourceVersion read, so a template changed meanwhile is read again.
func (r *Reconciler) patchWorkload(ctx context.Context, w workload, annotation, version string) error {
	before := w.obj.DeepCopyObject().(client.Object)
	if w.template.Annotations == nil {
		w.template.Annotations = map[string]string{}
	}
	w.template.Annotations[annotation] = version
	if err := r.Patch(ctx, w.obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("patching %s %s: %w", w.ref.Kind, w.ref.Name, err)
	}
	return nil
}

// getWorkload reads one workload from the API server; nil when it does not exist.
func (r *Reconciler) getWorkload(ctx context.Context, ns string, ref secretsv1alpha1.ConsumerRef) (*workload, error) {
	var obj client.Object
	switch ref.Kind {
	case secretsv1alpha1.KindDeployment:
		obj = &appsv1.Deployment{}
	case secretsv1alpha1.KindStatefulSet:
		obj = &appsv1.StatefulSet{}
	case secretsv1alpha1.KindDaemonSet:
		obj = &appsv1.DaemonSet{}
	default:
		return nil, fmt.Errorf("unknown consumer kind %q", ref.Kind)
	}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, obj); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading %s %s: %w", ref.Kind, ref.Name, err)
	}
	w := asWorkload(obj)
	return &w, nil
}

// listWorkloads reads the namespace's Deployments, StatefulSets and DaemonSets.
func (r *Reconciler) listWorkloads(ctx context.Context, ns string) ([]workload, error) {
	var out []workload
	var deps appsv1.DeploymentList
	if err := r.APIReader.List(ctx, &deps, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing Deployments: %w", err)
	}
	for i := range deps.Items {
		w := asWorkload(&deps.Items[i])
		out = append(out, w)
	}
	var sts appsv1.StatefulSetList
	if err := r.APIReader.List(ctx, &sts, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing StatefulSets: %w", err)
	}
	for i := range sts.Items {
		w := asWorkload(&sts.Items[i])
		out = append(out, w)
	}
	var dss appsv1.DaemonSetList
	if err := r.APIReader.List(ctx, &dss, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing DaemonSets: %w", err)
	}
	for i := range dss.Items {
		w := asWorkload(&dss.Items[i])
		out = append(out, w)
	}
	return out, nil
}

// getSecret reads a Secret from the API server; nil when it does not exist.
func (r *Reconciler) getSecret(ctx context.Context, ns, name string) (*corev1.Secret, error) {
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading Secret %s: %w", name, err)
	}
	return &s, nil
}
