//go:build !integration

// Counting goroutines needs a quiet process: in the integration binary the envtest
// suite's managers and members start and end goroutines of their own meanwhile.

package placement

import (
	"context"
	"runtime"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/scheme"
)

// TestStopEndsTheWatches: a member's watches (retrying against an address where
// nothing listens) and workers end when the member is removed.
func TestStopEndsTheWatches(t *testing.T) {
	before := runtime.NumGoroutine()
	cfg := &rest.Config{Host: "https://127.0.0.1:1", Timeout: time.Second}
	gone := types.NamespacedName{Namespace: "fleet", Name: "gone"}
	g := newRegistry(context.Background(), clocktesting.NewFakePassiveClock(time.Now()), defaultTimings(), nil)
	if _, err := g.ensure(gone, "h", []string{"*"}, cfg, func(cfg *rest.Config) (client.Client, error) {
		return client.New(cfg, client.Options{Scheme: scheme.New()})
	}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() <= before+len(placedKinds) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if runtime.NumGoroutine() <= before+len(placedKinds) {
		t.Fatalf("the watches did not start: %d goroutines, %d before", runtime.NumGoroutine(), before)
	}
	g.remove(gone)
	deadline = time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before+1 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := runtime.NumGoroutine(); n > before+1 {
		buf := make([]byte, 1<<16)
		t.Fatalf("%d goroutines left after removing the member (%d before):\n%s", n, before, buf[:runtime.Stack(buf, true)])
	}
}
