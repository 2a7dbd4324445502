package kit

import (
	"context"

	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"orderly.dev/orderly/internal/admission"
)

// Controller is one of Orderly's controllers as the manager runs it. Every controller
// package exports one: its Name (what --controllers takes), the cache rules for the
// kinds it reads, and Setup.
type Controller struct {
	Name string
	// Workers is how many reconciles the controller runs at once unless the manager is
	// told otherwise (--max-concurrent-reconciles); DefaultWorkers when zero. Each
	// controller sets what fits its work: how long a reconcile waits on the API server
	// or an external system, and how many objects arrive at once.
	Workers int
	// Cache narrows what the shared cache holds of the kinds the controller reads;
	// nil when it needs nothing narrowed.
	Cache func() CacheRules
	// Setup builds the controller's reconciler from deps and registers it with mgr.
	Setup func(ctx context.Context, mgr ctrl.Manager, deps Deps) error
}

// Deps is what the manager hands every controller.
type Deps struct {
	// Options configure each controller (workers, backoff).
	Options controller.Options
	// Clock is the time every controller reads; tests inject a fake one.
	Clock clock.PassiveClock
	// Databases connects the data controllers to database servers: a
	// database.Connector, which the manager makes, shares between the controllers and
	// closes when it stops; nil when the manager has none. The kit holds it without
	// its type so that the kit does not depend on the database layer, which depends on
	// the kit; the controllers read it with database.ConnectorOf, which says so at
	// set-up when it holds something else.
	Databases any
	// Admission is how admission-enforcing controllers mutate, and reach Orderly's
	// webhook server.
	Admission admission.Config
	// Namespace is the manager's own namespace. User-facing policies never act on it
	// (nor on kube-* namespaces), and the credentials that cluster-scoped objects refer
	// to live in it.
	Namespace string
	// BindableClusterRoles are the ClusterRoles a Tenant may bind in its namespaces
	// (--tenant-bindable-clusterroles); the manager's RBAC grants bind on these alone.
	BindableClusterRoles []string
}

// DefaultWorkers is how many reconciles a controller that does not say otherwise
// (Controller.Workers) runs at once.
const DefaultWorkers = 4

// For returns the Deps that controller c is set up with: d's worker count when d sets
// one (--max-concurrent-reconciles), else c's own.
func (d Deps) For(c Controller) Deps {
	if d.Options.MaxConcurrentReconciles <= 0 {
		d.Options.MaxConcurrentReconciles = c.Workers
		if c.Workers <= 0 {
			d.Options.MaxConcurrentReconciles = DefaultWorkers
		}
	}
	return d
}

// ClockOrReal is d's clock, or the wall clock when none is set.
func (d Deps) ClockOrReal() clock.PassiveClock {
	if d.Clock == nil {
		return clock.RealClock{}
	}
	return d.Clock
}
