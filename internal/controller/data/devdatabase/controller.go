// Package devdatabase implements the DevDatabase controller: an isolated database
// with its own login role on a DatabaseServer, a connection Secret beside the
// DevDatabase, and a drop when its ttl runs out or it is deleted.
package devdatabase

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/engine"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Name is the controller's name, as given to --controllers.
const Name = "devdatabase"

// finalizer keeps a DevDatabase until its database and role are dropped (or released).
const finalizer = "data.orderly.dev/cleanup"

// serverIndex indexes DevDatabases by spec.serverRef.
const serverIndex = "spec.serverRef"

// Retry intervals for conditions that resolve by themselves.
const (
	recheckLimit    = 5 * time.Second
	recheckTemplate = 3 * time.Second
	recheckFailed   = time.Minute
)

// Reconciler reconciles DevDatabases.
type Reconciler struct {
	client.Client
	// APIReader reads the servers' admin credentials, which the cache does not hold,
	// and the latest DevDatabase when a write loses its optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	Connector engine.Connector
	Clock     clock.PassiveClock
}

// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases/finalizers,verbs=update
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the DevDatabase controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.NewRecorder(mgr.GetEventRecorder("orderly-devdatabase")),
		Connector: deps.Databases, Clock: deps.ClockOrReal()}
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// Cache narrows the shared cache: of Secrets, only those Orderly manages.
func Cache() kit.CacheRules {
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue})}
	return kit.CacheRules{&corev1.Secret{}: managed}
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &datav1alpha1.DevDatabase{}, serverIndex, func(o client.Object) []string {
		return []string{o.(*datav1alpha1.DevDatabase).Spec.ServerRef}
	}); err != nil {
		return fmt.Errorf("indexing DevDatabases by server: %w", err)
	}
	if opts.RateLimiter == nil {
		// An unreachable server is retried with backoff, capped so that a namespace
		// waiting on a finalizer is freed soon after the server is back.
		opts.RateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](500*time.Millisecond, 30*time.Second)
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		// Annotation changes too: `kubectl annotate` makes Orderly look again now.
		For(&datav1alpha1.DevDatabase{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		Owns(&corev1.Secret{}).
		Watches(&datav1alpha1.DatabaseServer{}, forgetServerOnDelete{handler.EnqueueRequestsFromMapFunc(r.devDatabasesOnServer)},
			builder.WithPredicates(serverChanged{})).
		Complete(r)
}

// serverChanged passes DatabaseServer events that matter to DevDatabases: spec,
// reachability and deletion changes.
type serverChanged struct{ predicate.Funcs }

func (serverChanged) Update(e event.UpdateEvent) bool {
	o, ok1 := e.ObjectOld.(*datav1alpha1.DatabaseServer)
	n, ok2 := e.ObjectNew.(*datav1alpha1.DatabaseServer)
	if !ok1 || !ok2 {
		return true
	}
	return o.Generation != n.Generation || o.Status.Reachable != n.Status.Reachable ||
		o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero()
}

// forgetServerOnDelete drops the per-server series of a DatabaseServer that is gone
// (this controller counts the databases it creates and drops on each server), and
// otherwise handles server events as its EventHandler does.
type forgetServerOnDelete struct{ handler.EventHandler }

func (h forgetServerOnDelete) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	serverSeries.Forget(client.ObjectKey{Name: e.Object.GetName()})
	h.EventHandler.Delete(ctx, e, q)
}

func (r *Reconciler) devDatabasesOnServer(ctx context.Context, o client.Object) []reconcile.Request {
	var list datav1alpha1.DevDatabaseList
	if err := r.List(ctx, &list, client.MatchingFields{serverIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Listing DevDatabases for DatabaseServer", "databaseServer", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile creates, keeps or drops one DevDatabase's database, role and Secret.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var d datav1alpha1.DevDatabase
	if err := r.Get(ctx, req.NamespacedName, &d); err != nil {
		if apierrors.IsNotFound(err) {
			objectSeries.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !d.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &d)
	}
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &d, finalizer); err != nil {
		if errors.Is(err, kit.ErrDeleting) {
			return r.finalize(ctx, &d)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}

	now := r.Clock.Now()
	out := r.converge(ctx, &d, now)
	if err := r.updateStatus(ctx, &d, out, now); err != nil {
		return ctrl.Result{}, err
	}
	if out.err != nil {
		return ctrl.Result{}, out.err
	}
	return ctrl.Result{RequeueAfter: out.requeueAfter(&d, now)}, nil
}

// converge runs the phases in order and returns what it observed.
func (r *Reconciler) converge(ctx context.Context, d *datav1alpha1.DevDatabase, now time.Time) outcome {
	var server datav1alpha1.DatabaseServer
	if err := r.Get(ctx, client.ObjectKey{Name: d.Spec.ServerRef}, &server); err != nil {
		if apierrors.IsNotFound(err) {
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonServerNotFound,
				message: fmt.Sprintf("DatabaseServer %q does not exist; create it or correct spec.serverRef", d.Spec.ServerRef)}
		}
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonServerNotFound, message: err.Error(), err: err}
	}
	if expired(d, now) {
		return r.expire(ctx, d, &server)
	}
	if !server.DeletionTimestamp.IsZero() && d.Status.Phase != datav1alpha1.PhaseReady {
		// A server being deleted serves the DevDatabases it has until they go; it
		// takes no new ones.
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonServerDeleting,
			message: fmt.Sprintf("DatabaseServer %s is being deleted and takes no new databases; delete this DevDatabase and create one on another server", server.Name)}
	}
	if out, ok := r.admit(ctx, d, &server); !ok {
		return out
	}
	return r.ensure(ctx, d, &server)
}

// finalize drops (or releases) the database and role, removes the Secret and lets
// the DevDatabase go. An unreachable server is retried with backoff and reported.
func (r *Reconciler) finalize(ctx context.Context, d *datav1alpha1.DevDatabase) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(d, finalizer) {
		return ctrl.Result{}, nil
	}
	var server datav1alpha1.DatabaseServer
	err := r.Get(ctx, client.ObjectKey{Name: d.Spec.ServerRef}, &server)
	switch {
	case apierrors.IsNotFound(err):
		// Nothing left that says where the database is (the server's finalizer was
		// removed by hand, or the server controller does not run): let go and say so.
		r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, ReasonServerNotFound, "Delete",
			"DatabaseServer %q no longer exists; database %s was not dropped", d.Spec.ServerRef, databaseName(d))
	case err != nil:
		return ctrl.Result{}, err
	default:
		if err := r.drop(ctx, d, &server); err != nil {
			now := r.Clock.Now()
			out := outcomeFor(err, datav1alpha1.PhaseDeleting)
			if uerr := r.updateStatus(ctx, d, out, now); uerr != nil {
				log.FromContext(ctx).Error(uerr, "Updating DevDatabase status while deleting")
			}
			if errors.Is(err, engine.ErrNotOwned) {
				// Never drop what is not ours; the person deleting must act.
				r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, ReasonNotOwned, "Delete", "%v; left in place", err)
			} else {
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.deleteSecrets(ctx, d, ""); err != nil {
		return ctrl.Result{}, err
	}
	if err := kit.RemoveFinalizer(ctx, r.Client, r.APIReader, d, finalizer); err != nil {
		return ctrl.Result{}, err
	}
	objectSeries.Forget(client.ObjectKeyFromObject(d))
	return ctrl.Result{}, nil
}
