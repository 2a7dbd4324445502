package sleepschedule

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestInterleaveTakesNamespacesInTurn(t *testing.T) {
	var ws []*workload
	for _, id := range []string{"a/1", "a/2", "a/3", "b/1", "c/1", "c/2"} {
		ns, name := id[:1], id[2:]
		ws = append(ws, &workload{kind: "Deployment", obj: &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}})
	}
	var got []string
	for _, w := range interleave(ws) {
		got = append(got, w.obj.GetNamespace()+"/"+w.obj.GetName())
	}
	want := []string{"a/1", "b/1", "c/1", "a/2", "c/2", "a/3"}
	if !slices.Equal(got, want) {
		t.Errorf("interleave = %v, want %v", got, want)
	}
	if len(interleave(nil)) != 0 {
		t.Error("interleave(nil) is not empty")
	}
}

// The pool bounds the writes of all reconciles together, and every one is done.
func TestWritePoolBoundsAllReconcilesTogether(t *testing.T) {
	const size, reconciles, writes = 4, 6, 25
	p := newWritePool(size)
	var inFlight, peak atomic.Int32
	var wg sync.WaitGroup
	done := make([][]bool, reconciles)
	for r := range reconciles {
		done[r] = make([]bool, writes)
		wg.Go(func() {
			p.each(context.Background(), writes, func(int) error {
				n := inFlight.Add(1)
				for {
					old := peak.Load()
					if n <= old || peak.CompareAndSwap(old, n) {
						break
					}
				}
				time.Sleep(time.Millisecond) // a write's round trip
				inFlight.Add(-1)
				return nil
			}, func(i int, err error) {
				if err != nil {
					t.Error(err)
				}
				done[r][i] = true
			})
		})
	}
	wg.Wait()
	if got := peak.Load(); got > size {
		t.Errorf("%d writes in flight at once, want at most %d", got, size)
	}
	for r := range done {
		for i, ok := range done[r] {
			if !ok {
				t.Errorf("reconcile %d: write %d not done", r, i)
			}
		}
	}
}

// A reconcile whose context ends while waiting for the pool gives up with the
// context's error rather than waiting on.
func TestWritePoolGivesUpWithTheContext(t *testing.T) {
	p := newWritePool(1)
	hold := make(chan struct{})
	go func() { _ = p.do(context.Background(), func() error { <-hold; return nil }) }()
	for len(p.slots) == 0 {
		time.Sleep(time.Millisecond) // until the slot is taken
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var errs []error
	p.each(ctx, 3, func(int) error { return fmt.Errorf("ran") }, func(_ int, err error) { errs = append(errs, err) })
	close(hold)
	if len(errs) != 3 {
		t.Fatalf("%d results, want 3", len(errs))
	}
	for _, err := range errs {
		if !errors.Is(err, context.Canceled) {
			t.Errorf("err = %v, want context.Canceled", err)
		}
	}
}

// A reconcile's bookkeeping waits until no workload write of any reconcile is
// pending, and then runs.
func TestAfterWritesWaitsForThePendingWrites(t *testing.T) {
	p := newWritePool(2)
	release := make(chan struct{})
	var writesDone atomic.Int32
	go p.each(context.Background(), 5, func(int) error {
		<-release
		writesDone.Add(1)
		return nil
	}, func(int, error) {})
	for p.pendingNow() == 0 {
		time.Sleep(time.Millisecond) // until the writes are queued
	}
	ran := make(chan int32, 1)
	go func() {
		_ = p.afterWrites(context.Background(), time.Hour, func() error { ran <- writesDone.Load(); return nil })
	}()
	select {
	case n := <-ran:
		t.Fatalf("the bookkeeping ran with %d of 5 writes done", n)
	case <-time.After(50 * time.Millisecond): // long enough for a bookkeeping that does not wait to run
	}
	close(release)
	if n := <-ran; n != 5 {
		t.Errorf("the bookkeeping ran with %d of 5 writes done, want all", n)
	}
	if p.pendingNow() != 0 {
		t.Errorf("%d writes still pending after all were done", p.pendingNow())
	}
}

// A stream of writes holds the bookkeeping back for maxWait at most; a context that
// ends stops the wait with its error.
func TestAfterWritesWaitsBoundedly(t *testing.T) {
	p := newWritePool(1)
	p.add(1) // a write that never ends
	ran := false
	if err := p.afterWrites(context.Background(), 10*time.Millisecond, func() error { ran = true; return nil }); err != nil || !ran {
		t.Errorf("after maxWait: ran %v, err %v; want it run", ran, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ran = false
	if err := p.afterWrites(ctx, time.Hour, func() error { ran = true; return nil }); !errors.Is(err, context.Canceled) || ran {
		t.Errorf("with the context ended: ran %v, err %v; want context.Canceled and not run", ran, err)
	}
}

// pendingNow is how many workload writes are queued or in flight.
func (p *writePool) pendingNow() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pending
}
