//go:build integration

package devdatabase

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	"orderly.dev/orderly/internal/controller/data/databaseserver"
	"orderly.dev/orderly/internal/controller/data/engine/postgres"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testenv"
	"orderly.dev/orderly/internal/testpg"
)

var (
	// k is a client straight to the API server (no cache), used by the tests to act
	// as a person would and to observe the world.
	k client.Client
	// pg is the real PostgreSQL server the tests' DatabaseServer points at.
	pg *testpg.Server
	// clk is the controllers' clock: real time until a test sets it.
	clk = &testClock{}
)

// testClock is the injected clock. Tests about time set it to fixed instants
// (relative to their objects' creationTimestamp, which the API server sets) and
// reset it when they end, so other tests see real time.
type testClock struct {
	mu  sync.Mutex
	now *time.Time
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now == nil {
		return time.Now()
	}
	return *c.now
}

func (c *testClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }

// Set stops the clock at now until the test ends.
func (c *testClock) Set(t *testing.T, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.now == nil {
		t.Cleanup(func() {
			c.mu.Lock()
			defer c.mu.Unlock()
			c.now = nil
		})
	}
	c.now = &now
}

func TestMain(m *testing.M) {
	var err error
	if pg, err = testpg.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL for the tests:", err)
		os.Exit(1)
	}
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		connector := postgres.NewConnector()
		stop, err := e.StartManager(kit.Deps{Clock: clk, Databases: connector, Options: controller.Options{MaxConcurrentReconciles: 4}},
			[]kit.Controller{Controller, databaseserver.Controller})
		return func() {
			if stop != nil {
				stop()
			}
			connector.Close()
			pg.Close()
		}, err
	})
}

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)
