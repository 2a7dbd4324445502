package tenant

import (
	"context"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"orderly.dev/orderly/internal/labels"
)

// ownCreates holds the objects a reconcile is creating (namespaces, children, the
// owners' cluster objects) until their create event arrives. That event tells the
// Tenant nothing its own reconcile does not already know, yet without this it would
// reconcile every new Tenant a second time, which during a burst of Tenants takes
// workers and CPU from the ones still waiting. A later change of such an object (an
// update or a delete) is not filtered.
//
// Entries are keyed by kind and name and recorded before the create is sent: the
// watch often delivers the event before the create's response is read. A create that
// fails takes its entry back. If the name turns out to be taken by someone else whose
// create event came in between, the reconcile that expected it reads and judges that
// object itself, so the event is not needed either.
type ownCreates struct {
	mu        sync.Mutex
	pending   map[childKey]time.Time
	lastPrune time.Time
	now       func() time.Time
}

// ownCreateTTL is how long an entry waits for its create event. An object deleted
// before the watch saw it never brings one; such entries go after this long.
const ownCreateTTL = 10 * time.Minute

func newOwnCreates() *ownCreates {
	return &ownCreates{pending: map[childKey]time.Time{}, now: time.Now}
}

// expect records that obj, of kind, is about to be created by this controller.
func (o *ownCreates) expect(kind string, obj client.Object) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := o.now()
	o.pending[keyOf(kind, obj)] = now
	if now.Sub(o.lastPrune) < ownCreateTTL {
		return
	}
	o.lastPrune = now
	for k, at := range o.pending {
		if now.Sub(at) > ownCreateTTL {
			delete(o.pending, k)
		}
	}
}

// take reports whether obj was expected, forgetting it: only one create event is
// dropped (a relist delivers objects as created again). A failed create is taken back
// with take too.
func (o *ownCreates) take(kind string, obj client.Object) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	k := keyOf(kind, obj)
	if _, ok := o.pending[k]; !ok {
		return false
	}
	delete(o.pending, k)
	return true
}

// len is the number of objects waiting for their create event.
func (o *ownCreates) len() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return len(o.pending)
}

// notOwnCreate drops the create events of the objects of kind this controller
// expects; every other event passes.
func (o *ownCreates) notOwnCreate(kind string) predicate.Predicate {
	return predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !o.take(kind, e.Object) }}
}

// createOwn creates obj, of kind, as Orderly, with its create event expected: the
// watch of kind drops it, unless the create fails.
func (r *Reconciler) createOwn(ctx context.Context, kind string, obj client.Object) error {
	r.created.expect(kind, obj)
	err := r.Create(ctx, obj, client.FieldOwner(labels.FieldManager))
	if err != nil {
		r.created.take(kind, obj)
	}
	return err
}
