//go:build integration

package sleepschedule

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/testenv"
)

// k is a client straight to the API server (no cache), used by the tests to act as a
// person would and to observe the world.
var (
	k      client.Client
	cfg    *rest.Config
	scheme = runtime.NewScheme()
)

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	env, c, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test API server:", err)
		os.Exit(1)
	}
	cfg = c
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(powerv1alpha1.AddToScheme(scheme))
	k, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	code := m.Run()
	_ = env.Stop()
	os.Exit(code)
}

const (
	timeout = 20 * time.Second
	poll    = 100 * time.Millisecond
)

// fakeClock is the injected clock: the tests move it.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// startManager runs the controller in a manager of its own, with a fresh Reconciler
// (so nothing is remembered between managers), until the test ends or stop is called.
func startManager(t *testing.T, clk Clock) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: CacheByObject()},
		Controller: config.Controller{SkipNameValidation: ptr(true)},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-sleepschedule"), Clock: clk, Writers: 4}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			<-done
		})
	}
	t.Cleanup(stop)
	return stop
}

// eventually polls f with the suite's deadline.
func eventually(t *testing.T, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Eventually(f, timeout, poll).Should(Succeed())
}

// consistently checks f for a short while, for things that must not happen.
func consistently(t *testing.T, f func(g Gomega)) {
	t.Helper()
	NewWithT(t).Consistently(f, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}
