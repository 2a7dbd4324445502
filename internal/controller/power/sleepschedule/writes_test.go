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
