// Package testenv is the harness of the integration tests: a real kube-apiserver and
// etcd (controller-runtime's envtest, from the binaries `orderly dev assets` builds
// and caches) with Orderly's CRDs, a client that acts as a person would, and managers
// that run chosen controllers as `orderly manager` does.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
)

// RepoRoot is the repository's root directory, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..")
}

// Env is a running API server with Orderly's CRDs installed.
type Env struct {
	Config *rest.Config
	// Scheme knows Kubernetes' kinds and every Orderly kind.
	Scheme *k8sruntime.Scheme
	// Client goes straight to the API server (no cache): tests act as a person would
	// and observe the world through it.
	Client client.Client

	env *envtest.Environment
}

// Option changes how the API server is started.
type Option func(*envtest.Environment)

// WithoutMutatingAdmissionPolicy runs the API server as one that predates
// MutatingAdmissionPolicy: the resources are not served and the admission plugin
// (whose informers would wait for them) is off.
func WithoutMutatingAdmissionPolicy() Option {
	return func(env *envtest.Environment) {
		env.ControlPlane.GetAPIServer().Configure().
			Append("runtime-config", "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false").
			Append("disable-admission-plugins", "MutatingAdmissionPolicy")
	}
}

// Start runs an API server with Orderly's CRDs installed. KUBEBUILDER_ASSETS must name
// the directory with etcd and kube-apiserver: `make integration` sets it.
func Start(opts ...Option) (*Env, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make integration`, or export KUBEBUILDER_ASSETS=$(go run ./cmd/orderly dev assets)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	for _, o := range opts {
		o(env)
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	e := &Env{Config: cfg, Scheme: scheme.New(), env: env}
	if e.Client, err = client.New(cfg, client.Options{Scheme: e.Scheme}); err != nil {
		_ = env.Stop()
		return nil, err
	}
	return e, nil
}

// StartForTest is Start for one test: the API server stops when the test ends.
func StartForTest(t testing.TB, opts ...Option) *Env {
	t.Helper()
	e, err := Start(opts...)
	if err != nil {
		t.Fatalf("starting the test API server: %v", err)
	}
	t.Cleanup(e.stopOrReport)
	return e
}

// Stop stops the API server and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

// Main is a suite's TestMain: it starts an Env, calls setup (which typically starts a
// manager, and may return a teardown, called even when setup fails), runs the tests,
// tears everything down and exits with the tests' code.
func Main(m *testing.M, setup func(*Env) (teardown func(), err error), opts ...Option) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.UseDevMode(true)))
	e, err := Start(opts...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting the test API server:", err)
		os.Exit(1)
	}
	teardown, err := setup(e)
	if err != nil {
		if teardown != nil {
			teardown()
		}
		e.stopOrReport()
		fmt.Fprintln(os.Stderr, "setting up the suite:", err)
		os.Exit(1)
	}
	code := m.Run()
	if teardown != nil {
		teardown()
	}
	e.stopOrReport()
	os.Exit(code)
}

// stopOrReport stops e and says on stderr when that failed: envtest kills a process
// that outlives its stop timeout, so the message is what is left to see.
func (e *Env) stopOrReport() {
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping the test API server:", err)
	}
}

// StartManager runs controllers in a manager of their own on e, as `orderly manager`
// does (their cache rules merged by kind), with metrics off and, unless deps says
// otherwise, two workers per controller. Several managers may run in one process.
// modify, when given, changes the manager's options (a webhook server, say). stop
// ends the manager and waits for it.
func (e *Env) StartManager(deps kit.Deps, controllers []kit.Controller, modify ...func(*ctrl.Options)) (stop func(), err error) {
	byObject, err := kit.MergeCache(e.Scheme, controllers)
	if err != nil {
		return nil, err
	}
	opts := ctrl.Options{
		Scheme:     e.Scheme,
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Cache:      cache.Options{ByObject: byObject},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	}
	for _, m := range modify {
		m(&opts)
	}
	mgr, err := ctrl.NewManager(e.Config, opts)
	if err != nil {
		return nil, err
	}
	if deps.Options.MaxConcurrentReconciles == 0 {
		deps.Options.MaxConcurrentReconciles = 2
	}
	ctx, cancel := context.WithCancel(context.Background())
	for _, c := range controllers {
		if err := c.Setup(ctx, mgr, deps); err != nil {
			cancel()
			return nil, fmt.Errorf("setting up controller %s: %w", c.Name, err)
		}
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				fmt.Fprintln(os.Stderr, "manager stopped with an error:", err)
			}
		})
	}, nil
}

// StartManagerForTest is StartManager for one test: the manager stops when the test ends.
func (e *Env) StartManagerForTest(t testing.TB, deps kit.Deps, controllers []kit.Controller, modify ...func(*ctrl.Options)) (stop func()) {
	t.Helper()
	stop, err := e.StartManager(deps, controllers, modify...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(stop)
	return stop
}
