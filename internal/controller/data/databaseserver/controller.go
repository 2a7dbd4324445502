// Package databaseserver implements the DatabaseServer controller: it checks that a
// registered server is reachable with its admin credentials and reports its version
// and how many of Orderly's databases it holds.
package databaseserver

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/engine"
)

// Name is the controller's name, as given to --controllers.
const Name = "databaseserver"

// Recheck intervals: servers are polled, since nothing in the cluster announces
// that a database server went down or came back.
const (
	recheckReachable   = time.Minute
	recheckUnreachable = 15 * time.Second
)

// Reconciler reconciles DatabaseServers.
type Reconciler struct {
	client.Client
	// APIReader reads the admin credentials Secret, which the cache does not hold.
	APIReader client.Reader
	Connector engine.Connector
	Clock     clock.PassiveClock
}

// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers,verbs=get;list;watch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// CacheByObject: this controller caches nothing beyond DatabaseServers.
func CacheByObject() map[client.Object]cache.ByObject { return nil }

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.Clock == nil {
		r.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&datav1alpha1.DatabaseServer{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile connects to one server and reports what it found.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s datav1alpha1.DatabaseServer
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		if apierrors.IsNotFound(err) {
			forgetMetrics(req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	obs := r.observe(ctx, &s)
	if err := r.updateStatus(ctx, &s, obs); err != nil {
		return ctrl.Result{}, err
	}
	if obs.err != nil {
		return ctrl.Result{RequeueAfter: recheckUnreachable}, nil
	}
	return ctrl.Result{RequeueAfter: recheckReachable}, nil
}

// observation is what one connection attempt found.
type observation struct {
	info engine.Info
	err  error
	at   metav1.Time
}

func (r *Reconciler) observe(ctx context.Context, s *datav1alpha1.DatabaseServer) observation {
	obs := observation{at: metav1.NewTime(r.Clock.Now())}
	srv, err := engine.ServerFor(ctx, r.APIReader, s)
	if err != nil {
		obs.err = err
		return obs
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	e, err := r.Connector.Connect(ctx, string(s.Spec.Engine), srv)
	if err != nil {
		obs.err = err
		return obs
	}
	obs.info, obs.err = e.Info(ctx)
	if obs.err != nil && !errors.Is(obs.err, engine.ErrUnreachable) {
		obs.err = errors.Join(engine.ErrUnreachable, obs.err)
	}
	return obs
}
