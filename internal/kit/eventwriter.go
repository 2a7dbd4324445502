package kit

import (
	"context"
	"fmt"
	"os"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/reference"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Why Orderly writes its own Events rather than through client-go's events.k8s.io
// recorder: that recorder folds every Event with the same object, type, reason and
// action within six minutes into the first one and keeps the FIRST note, so
// "created namespace team-a-dev" followed by "created namespace team-a-prod" reads as
// the first one twice. Here only Events whose note is also the same are folded (into
// the first Event's series count), so every distinct note reaches the user.

const (
	// eventSeriesWindow is how long a repeated Event is folded into the first one;
	// after it, the repeat is a new Event (as client-go does).
	eventSeriesWindow = 6 * time.Minute
	// eventSeriesFlush is how often at most a folded count is written: a repeat after
	// a quiet spell is written at once, and a hot loop repeating one Event costs one
	// write per Event per flush, not one per repeat.
	eventSeriesFlush = 5 * time.Second
	// eventQueue bounds the Events waiting to be written; past it, Events are dropped
	// (and logged) rather than block a reconcile.
	eventQueue = 1024
	// eventWriteTimeout bounds each write, so one slow API server call cannot hold
	// the queue.
	eventWriteTimeout = 10 * time.Second
)

// EventsFor returns the Recorder of the controller named controller (the Events'
// reportingController), writing through mgr's client once mgr has started.
func EventsFor(mgr manager.Manager, controller string) Recorder {
	w := NewEventWriter(mgr.GetClient(), mgr.GetScheme(), controller)
	if err := mgr.Add(w); err != nil {
		// Only a manager that has already stopped refuses a runnable; nothing would
		// reconcile to record Events then.
		log.Log.Error(err, "not recording Events", "controller", controller)
		return Recorder{}
	}
	return NewRecorder(w)
}

// eventKey is what makes two Events the same one: everything but the time.
type eventKey struct {
	regarding, related  types.UID
	namespace, name     string // of the regarding object, for objects without a UID
	typ, reason, action string
	note                string
}

// eventSeries is an Event written (or queued) and how often it has repeated since.
type eventSeries struct {
	event       *eventsv1.Event // as created; its name and namespace address the series
	count       int32
	last        time.Time
	writtenUpTo int32     // the count last written to the API server
	writtenAt   time.Time // when it was written
	created     bool      // the Event exists, so its count can be written
	queued      bool      // waiting in the queue
}

// EventWriter writes events.k8s.io/v1 Events. It implements the Eventf of
// client-go's events.EventRecorder, never blocks its caller, and is a manager
// Runnable that writes until the manager stops.
type EventWriter struct {
	client     client.Client
	scheme     *runtime.Scheme
	controller string
	instance   string
	now        func() time.Time

	queue chan *eventSeries
	mu    sync.Mutex
	seen  map[eventKey]*eventSeries
}

// NewEventWriter returns an EventWriter that reports as controller from this host.
func NewEventWriter(c client.Client, scheme *runtime.Scheme, controller string) *EventWriter {
	instance, err := os.Hostname()
	if err != nil || instance == "" {
		instance = controller
	}
	return &EventWriter{
		client: c, scheme: scheme, controller: controller, instance: instance, now: time.Now,
		queue: make(chan *eventSeries, eventQueue), seen: map[eventKey]*eventSeries{},
	}
}

// NeedLeaderElection is false: Events come only from reconciles, which run on the
// leader, and a standby that became leader must be able to write them at once.
func (w *EventWriter) NeedLeaderElection() bool { return false }

// Eventf queues an Event about regarding (and related, which may be nil).
func (w *EventWriter) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	ref, err := reference.GetReference(w.scheme, regarding)
	if err != nil {
		log.Log.Error(err, "not recording an Event about an object without a reference", "reason", reason)
		return
	}
	var relatedRef *corev1.ObjectReference
	if related != nil {
		if relatedRef, err = reference.GetReference(w.scheme, related); err != nil {
			relatedRef = nil
		}
	}
	note = fmt.Sprintf(note, args...)
	key := eventKey{regarding: ref.UID, namespace: ref.Namespace, name: ref.Name, typ: eventtype, reason: reason, action: action, note: note}
	if relatedRef != nil {
		key.related = relatedRef.UID
	}
	now := w.now()

	w.mu.Lock()
	defer w.mu.Unlock()
	if s, ok := w.seen[key]; ok && now.Sub(s.last) < eventSeriesWindow {
		s.count++
		s.last = now
		if s.created && !s.queued && now.Sub(s.writtenAt) >= eventSeriesFlush {
			w.enqueue(s) // after a quiet spell: now; else the next flush writes it
		}
		return
	}
	w.forgetOld(now)
	namespace := ref.Namespace
	if namespace == "" {
		namespace = metav1.NamespaceDefault // where Events about cluster-scoped objects live
	}
	ev := &eventsv1.Event{
		ObjectMeta: metav1.ObjectMeta{
			// Unique per Event, readable next to its object (as client-go names them).
			Name:      fmt.Sprintf("%s.%x", ref.Name, now.UnixNano()),
			Namespace: namespace,
		},
		EventTime:           metav1.NewMicroTime(now),
		ReportingController: w.controller,
		ReportingInstance:   w.instance,
		Action:              action,
		Reason:              reason,
		Regarding:           *ref,
		Related:             relatedRef,
		Note:                note,
		Type:                eventtype,
	}
	s := &eventSeries{event: ev, count: 1, last: now, writtenUpTo: 1}
	if w.enqueue(s) {
		w.seen[key] = s
	}
}

// enqueue queues s for its next write without blocking. Called with mu held.
func (w *EventWriter) enqueue(s *eventSeries) bool {
	select {
	case w.queue <- s:
		s.queued = true
		return true
	default:
		log.Log.Info("Event queue full; dropping an Event", "controller", w.controller, "reason", s.event.Reason, "object", s.event.Regarding.Name)
		return false
	}
}

// forgetOld drops series past their window once the map grows, so memory stays
// bounded by the Events of the last few minutes. Called with mu held.
func (w *EventWriter) forgetOld(now time.Time) {
	if len(w.seen) < eventQueue {
		return
	}
	for k, s := range w.seen {
		if now.Sub(s.last) >= eventSeriesWindow && (s.count == s.writtenUpTo || !s.created) {
			delete(w.seen, k)
		}
	}
}

// Start writes queued Events and flushes series counts until ctx ends.
func (w *EventWriter) Start(ctx context.Context) error {
	tick := time.NewTicker(eventSeriesFlush)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case s := <-w.queue:
			w.write(ctx, s)
		case <-tick.C:
			w.Flush(ctx)
		}
	}
}

// write creates s's Event, or writes its count once it exists.
func (w *EventWriter) write(ctx context.Context, s *eventSeries) {
	w.mu.Lock()
	s.queued = false
	created := s.created
	w.mu.Unlock()
	if created {
		w.writeCount(ctx, s)
		return
	}
	ev := s.event // only the writing goroutine touches it once queued
	ctx, cancel := context.WithTimeout(ctx, eventWriteTimeout)
	defer cancel()
	if err := w.client.Create(ctx, ev); err != nil {
		log.FromContext(ctx).Error(err, "writing an Event", "controller", w.controller, "reason", ev.Reason, "object", ev.Regarding.Name)
		return
	}
	w.mu.Lock()
	s.created, s.writtenAt = true, w.now()
	w.mu.Unlock()
	w.writeCount(ctx, s) // repeats while the create was on its way
}

// writeCount writes the count of an Event repeated since its last write, as the
// Event's series (the events.k8s.io way of saying "this happened N times").
func (w *EventWriter) writeCount(ctx context.Context, s *eventSeries) {
	w.mu.Lock()
	count, last := s.count, s.last
	if !s.created || count <= s.writtenUpTo {
		w.mu.Unlock()
		return
	}
	s.writtenUpTo, s.writtenAt = count, w.now()
	w.mu.Unlock()
	patched := s.event.DeepCopy()
	patched.Series = &eventsv1.EventSeries{Count: count, LastObservedTime: metav1.NewMicroTime(last)}
	ctx, cancel := context.WithTimeout(ctx, eventWriteTimeout)
	defer cancel()
	if err := w.client.Patch(ctx, patched, client.MergeFrom(s.event)); err != nil {
		log.FromContext(ctx).Error(err, "writing an Event's count", "controller", w.controller, "reason", s.event.Reason, "object", s.event.Regarding.Name)
	}
}

// Flush writes the counts of all Events repeated since their last write.
func (w *EventWriter) Flush(ctx context.Context) {
	w.mu.Lock()
	var pending []*eventSeries
	for _, s := range w.seen {
		if s.created && s.count > s.writtenUpTo {
			pending = append(pending, s)
		}
	}
	w.mu.Unlock()
	for _, s := range pending {
		w.writeCount(ctx, s)
	}
}
