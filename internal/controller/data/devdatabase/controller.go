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
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
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
	"orderly.dev/orderly/internal/database"
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
	// APIReader reads the servers' admin credentials and the connection Secrets'
	// content, which the cache does not hold, and the latest DevDatabase when a
	// write loses its optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	Connector database.Connector
	Clock     clock.PassiveClock
	// Namespace is the manager's namespace, the only one servers' Secrets are read from.
	Namespace string
}

// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases/finalizers,verbs=update
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;create;patch

// Controller is the DevDatabase controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	connector, err := database.ConnectorOf(deps)
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-devdatabase"),
		Connector: connector, Clock: deps.ClockOrReal(), Namespace: deps.Namespace}
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// Cache narrows the shared cache. Of Secrets it holds the metadata only (the
// controller watches them metadata-only and reads their content straight from the
// API server), of those labelled as a DevDatabase's connection Secret, trimmed to
// what the controller reads: anyone who may create Secrets in a namespace can set
// those labels, so neither their data nor their annotations may reach the cache.
// The custom resources are kept without their managed fields.
func Cache() kit.CacheRules {
	return kit.CacheRules{
		&corev1.Secret{}:               {Label: connectionSecrets(), Transform: trimSecret},
		&datav1alpha1.DevDatabase{}:    {Transform: cache.TransformStripManagedFields()},
		&datav1alpha1.DatabaseServer{}: {Transform: cache.TransformStripManagedFields()},
	}
}

// connectionSecrets selects the Secrets labelled as DevDatabases' connection Secrets.
func connectionSecrets() k8slabels.Selector {
	managed, _ := k8slabels.NewRequirement(labels.ManagedBy, selection.Equals, []string{labels.ManagedByValue})
	owned, _ := k8slabels.NewRequirement(datav1alpha1.DevDatabaseLabel, selection.Exists, nil)
	return k8slabels.NewSelector().Add(*managed, *owned)
}

// trimSecret keeps of a cached Secret (metadata, or a whole Secret should anything
// ever read one through the cache) its identity, the two labels the controller
// lists by and the owner references to DevDatabases: a cached entry stays under a
// kilobyte however large the Secret someone labelled.
func trimSecret(in any) (any, error) {
	obj, err := meta.Accessor(in)
	if err != nil {
		return in, nil
	}
	obj.SetManagedFields(nil)
	obj.SetAnnotations(nil)
	obj.SetFinalizers(nil)
	kept := map[string]string{}
	for _, k := range []string{labels.ManagedBy, datav1alpha1.DevDatabaseLabel} {
		if v, ok := obj.GetLabels()[k]; ok {
			kept[k] = v
		}
	}
	obj.SetLabels(kept)
	var refs []metav1.OwnerReference
	for _, ref := range obj.GetOwnerReferences() {
		if ref.Kind == "DevDatabase" && ref.APIVersion == datav1alpha1.GroupVersion.String() {
			refs = append(refs, ref)
		}
	}
	obj.SetOwnerReferences(refs)
	if sec, ok := in.(*corev1.Secret); ok {
		sec.Data, sec.StringData = nil, nil
	}
	return in, nil
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if err := mgr.GetFieldIndexer().IndexField(ctx, &datav1alpha1.DevDatabase{}, serverIndex, func(o client.Object) []string {
		return []string{o.(*datav1alpha1.DevDatabase).Spec.ServerRef}
	}); err != nil {
		return fmt.Errorf("indexing DevDatabases by server: %w", err)
	}
	// The deletion protection policy, applied while this manager leads.
	if err := mgr.Add(protectionInstaller{c: mgr.GetClient()}); err != nil {
		return err
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
		Owns(&corev1.Secret{}, builder.OnlyMetadata).
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
	return kit.Requests(list.Items)
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
	return r.convergeOn(ctx, d, &server, now).on(&server)
}

// convergeOn is converge once the DatabaseServer is known.
func (r *Reconciler) convergeOn(ctx context.Context, d *datav1alpha1.DevDatabase, server *datav1alpha1.DatabaseServer, now time.Time) outcome {
	if expired(d, server.Spec.MaxTTL.Duration, now) {
		return r.expire(ctx, d, server)
	}
	if !server.DeletionTimestamp.IsZero() && !provisioned(d) {
		// A server being deleted serves the DevDatabases it has until they go; it
		// takes no new ones.
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonServerDeleting,
			message: fmt.Sprintf("DatabaseServer %s is being deleted and takes no new databases; delete this DevDatabase and create one on another server", server.Name)}
	}
	if out, ok := r.admit(ctx, d, server); !ok {
		return out
	}
	return r.ensure(ctx, d, server)
}

// finalize drops (or releases) the database and role, removes the Secret and lets
// the DevDatabase go. An unreachable server is retried with backoff and reported;
// the annotation data.orderly.dev/abandon lets go without the drop.
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
	case d.Spec.DeletionProtected:
		// The API server's policy refuses to delete a protected DevDatabase; one
		// deleted anyway (the policy was not installed yet, or the flag was set
		// after the deletion began) keeps its database until the flag is lifted.
		out := outcome{phase: datav1alpha1.PhaseDeleting, reason: ReasonDeletionProtected,
			message: fmt.Sprintf("Deletion waits: spec.deletionProtected is true, so database %s is kept. Set it to false to let the deletion go on", databaseName(d))}
		return ctrl.Result{}, r.updateStatus(ctx, d, out.on(&server), r.Clock.Now())
	default:
		res, err := r.drop(ctx, d, &server)
		if err == nil {
			r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, ReasonDropped, "Delete", "DevDatabase deleted: %s", dropNote(d, res))
		}
		if err != nil {
			now := r.Clock.Now()
			out := outcomeFor(err, datav1alpha1.PhaseDeleting).on(&server)
			if uerr := r.updateStatus(ctx, d, out, now); uerr != nil {
				log.FromContext(ctx).Error(uerr, "Updating DevDatabase status while deleting")
			}
			switch {
			case errors.Is(err, database.ErrNotOwned):
				// Never drop what is not ours; the person deleting must act.
				r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, ReasonNotOwned, "Delete", "%v; left in place", err)
			case d.Annotations[datav1alpha1.AbandonAnnotation] == "true":
				r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, ReasonAbandoned, "Delete",
					"Database %s and its role on DatabaseServer %s were not dropped (%v); let go because of the annotation %s=true: remove them by hand",
					databaseName(d), server.Name, err, datav1alpha1.AbandonAnnotation)
			default:
				return ctrl.Result{}, err
			}
		}
	}
	if err := r.deleteSecrets(ctx, d); err != nil {
		return ctrl.Result{}, err
	}
	if err := kit.RemoveFinalizer(ctx, r.Client, r.APIReader, d, finalizer); err != nil {
		return ctrl.Result{}, err
	}
	objectSeries.Forget(client.ObjectKeyFromObject(d))
	return ctrl.Result{}, nil
}
