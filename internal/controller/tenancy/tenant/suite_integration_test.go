//go:build integration

package tenant

import (
	"context"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// k is a client straight to the API server (no cache), used by the tests to act as a
// person would and to observe the world.
var k client.Client

// env is the test API server, for tests that watch.
var env *testenv.Env

// managerCache is the suite manager's cache: what the Tenant controller holds in memory.
var managerCache cache.Cache

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k, env = e.Client, e
		c := Controller
		c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
			managerCache = mgr.GetCache()
			return Setup(ctx, mgr, deps)
		}
		// A read through the cache of a kind (or a view of a kind) the controller does
		// not watch fails, rather than quietly starting a cluster-wide informer: the
		// tests find such reads.
		return e.StartManager(kit.Deps{}, []kit.Controller{c}, func(o *ctrl.Options) { o.Cache.ReaderFailOnMissingInformer = true })
	})
}

const (
	timeout = 20 * time.Second
	poll    = 100 * time.Millisecond
)
