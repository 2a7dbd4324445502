// Package databaseserver implements the DatabaseServer controller: it checks that a
// registered server is reachable with its admin credentials and reports its version
// and how many of Orderly's databases it holds. A finalizer keeps a server being
// deleted until no DevDatabase uses it, so that their databases can still be dropped.
package databaseserver

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
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
)

// Name is the controller's name, as given to --controllers.
const Name = "databaseserver"

// finalizer keeps a DatabaseServer until no DevDatabase refers to it: a DevDatabase
// being deleted needs the server's address and admin credentials to drop its database.
const finalizer = "data.orderly.dev/in-use"

// usersIndex indexes DevDatabases by spec.serverRef (the DevDatabase controller has
// an index of its own; either controller can run alone).
const usersIndex = "databaseserver.spec.serverRef"

// Recheck intervals: servers are polled, since nothing in the cluster announces
// that a database server went down or came back.
const (
	recheckReachable   = time.Minute
	recheckUnreachable = 15 * time.Second
)

// Reconciler reconciles DatabaseServers.
type Reconciler struct {
	client.Client
	// APIReader reads the admin credentials Secret, which the cache does not hold,
	// and the latest DatabaseServer when a status write loses its optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	Connector database.Connector
	Clock     clock.PassiveClock
	// Namespace is the manager's namespace, the only one servers' Secrets are read from.
	Namespace string
	// RecheckReachable and RecheckUnreachable are how soon a server is checked again
	// after a check that reached it, or did not; zero takes the defaults (tests
	// shorten them).
	RecheckReachable, RecheckUnreachable time.Duration
}

// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers/finalizers,verbs=update
// +kubebuilder:rbac:groups=data.orderly.dev,resources=devdatabases,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the DatabaseServer controller as the manager runs it. It caches
// nothing beyond DatabaseServers and DevDatabases, and asks nothing of how: the
// DevDatabase controller, which runs beside it, strips their managed fields (two
// rules for one kind would have to be the same function).
var Controller = kit.Controller{Name: Name, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	connector, err := database.ConnectorOf(deps)
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-databaseserver"),
		Connector: connector, Clock: deps.ClockOrReal(), Namespace: deps.Namespace}
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.RecheckReachable == 0 {
		r.RecheckReachable = recheckReachable
	}
	if r.RecheckUnreachable == 0 {
		r.RecheckUnreachable = recheckUnreachable
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &datav1alpha1.DevDatabase{}, usersIndex, func(o client.Object) []string {
		return []string{o.(*datav1alpha1.DevDatabase).Spec.ServerRef}
	}); err != nil {
		return fmt.Errorf("indexing DevDatabases by server: %w", err)
	}
	// The server's count of databases in use follows DevDatabases coming, going, and
	// changing phase (created on the server, expired, dropped), rather than waiting for
	// the next recheck; a server being deleted also learns when its last user is gone.
	usersChanged := predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.(*datav1alpha1.DevDatabase).Status.Phase != e.ObjectNew.(*datav1alpha1.DevDatabase).Status.Phase
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&datav1alpha1.DatabaseServer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&datav1alpha1.DevDatabase{}, handler.EnqueueRequestsFromMapFunc(serverOf), builder.WithPredicates(usersChanged)).
		Complete(r)
}

// serverOf maps a DevDatabase to the server it uses.
func serverOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*datav1alpha1.DevDatabase).Spec.ServerRef}}}
}

// Reconcile connects to one server and reports what it found.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s datav1alpha1.DatabaseServer
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !s.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &s)
	}
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &s, finalizer); err != nil {
		if errors.Is(err, kit.ErrDeleting) {
			return r.finalize(ctx, &s)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	obs := r.observe(ctx, &s)
	if err := r.updateStatus(ctx, &s, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.err != nil {
		return ctrl.Result{RequeueAfter: r.RecheckUnreachable}, nil
	}
	return ctrl.Result{RequeueAfter: r.RecheckReachable}, nil
}

// finalize lets a server being deleted go once no DevDatabase refers to it; until
// then it keeps checking the server (the DevDatabases' drops need it) and reports
// who holds it.
func (r *Reconciler) finalize(ctx context.Context, s *datav1alpha1.DatabaseServer) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(s, finalizer) {
		return ctrl.Result{}, nil
	}
	users, err := r.users(ctx, s.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(users) == 0 {
		if err := kit.RemoveFinalizer(ctx, r.Client, r.APIReader, s, finalizer); err != nil {
			return ctrl.Result{}, err
		}
		log.FromContext(ctx).Info("DatabaseServer released: no DevDatabase uses it any more", "databaseServer", s.Name)
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonReleased, "Delete", "No DevDatabase uses this server any more; it is deleted")
		r.forget(s.Name)
		return ctrl.Result{}, nil
	}
	obs := r.observe(ctx, s)
	obs.deleting, obs.users = true, users
	if err := r.updateStatus(ctx, s, obs); err != nil {
		return ctrl.Result{}, err
	}
	// DevDatabases going away trigger a reconcile; the recheck covers a lost event.
	return ctrl.Result{RequeueAfter: r.RecheckUnreachable}, nil
}

// forget drops what Orderly keeps for a server that is gone: its metric series and
// its connection pool.
func (r *Reconciler) forget(name string) {
	series.Forget(client.ObjectKey{Name: name})
	r.Connector.Forget(name)
}

// users lists the DevDatabases (namespace/name, sorted) that refer to server.
func (r *Reconciler) users(ctx context.Context, server string) ([]string, error) {
	var list datav1alpha1.DevDatabaseList
	if err := r.List(ctx, &list, client.MatchingFields{usersIndex: server}); err != nil {
		return nil, fmt.Errorf("listing DevDatabases on DatabaseServer %s: %w", server, err)
	}
	out := make([]string, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, list.Items[i].Namespace+"/"+list.Items[i].Name)
	}
	slices.Sort(out)
	return out, nil
}

// observation is what one connection attempt found.
type observation struct {
	info database.Info
	err  error
	at   metav1.Time
	// deleting is true for a server being deleted; users are the DevDatabases
	// that still refer to it.
	deleting bool
	users    []string
	// sslMode is the effective sslmode of the connections; empty when the Secrets
	// could not be read.
	sslMode string
}

func (r *Reconciler) observe(ctx context.Context, s *datav1alpha1.DatabaseServer) observation {
	obs := observation{at: metav1.NewTime(r.Clock.Now())}
	srv, err := database.ServerFor(ctx, r.APIReader, s, r.Namespace)
	if err != nil {
		obs.err = err
		return obs
	}
	obs.sslMode = srv.EffectiveSSLMode()
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e, err := r.Connector.Connect(ctx, string(s.Spec.Engine), srv)
	if err != nil {
		obs.err = err
		return obs
	}
	obs.info, obs.err = e.Info(ctx)
	if obs.err != nil && !errors.Is(obs.err, database.ErrUnreachable) {
		obs.err = errors.Join(database.ErrUnreachable, obs.err)
	}
	return obs
}
