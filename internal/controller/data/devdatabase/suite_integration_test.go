//go:build integration

package devdatabase

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/databaseserver"
	"orderly.dev/orderly/internal/controller/data/engine/postgres"
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
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	var err error
	pg, err = testpg.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL for the tests:", err)
		os.Exit(1)
	}
	env, cfg, err := testenv.Start()
	if err != nil {
		pg.Close()
		fmt.Fprintln(os.Stderr, "starting the test API server:", err)
		os.Exit(1)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(datav1alpha1.AddToScheme(scheme))
	k, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: CacheByObject()},
	})
	if err != nil {
		panic(err)
	}
	connector := postgres.NewConnector()
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-devdatabase"), Connector: connector, Clock: clk}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 4}); err != nil {
		panic(err)
	}
	sr := &databaseserver.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connector: connector, Clock: clk}
	if err := sr.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		panic(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()

	code := m.Run()
	cancel()
	connector.Close()
	_ = env.Stop()
	pg.Close()
	os.Exit(code)
}

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)
