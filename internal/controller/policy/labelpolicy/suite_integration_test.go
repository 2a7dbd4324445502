//go:build integration

package labelpolicy

import (
	"context"
	"fmt"
	"os"
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

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/testenv"
)

// k is a client straight to the API server (no cache), used by the tests to act as a
// person would and to observe the world.
var k client.Client

// mapServed is what discovery said about MutatingAdmissionPolicy on the test server.
var mapServed bool

func TestMain(m *testing.M) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	env, cfg, err := testenv.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test API server:", err)
		os.Exit(1)
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))
	k, err = client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		panic(err)
	}
	if mapServed, err = ServesMutatingAdmissionPolicy(cfg); err != nil {
		panic(err)
	}
	fmt.Fprintln(os.Stderr, "MutatingAdmissionPolicy served:", mapServed)

	ctx, cancel := context.WithCancel(context.Background())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  scheme,
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: CacheByObject()},
	})
	if err != nil {
		panic(err)
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-labelpolicy"),
		AuditInterval: 2 * time.Second}
	if err := r.SetupWithManager(ctx, mgr, controller.Options{MaxConcurrentReconciles: 2}); err != nil {
		panic(err)
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			panic(err)
		}
	}()

	code := m.Run()
	cancel()
	_ = env.Stop()
	os.Exit(code)
}

const (
	timeout = 30 * time.Second
	poll    = 200 * time.Millisecond
)
