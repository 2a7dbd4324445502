//go:build integration

package tenant

import (
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testenv"
)

// k is a client straight to the API server (no cache), used by the tests to act as a
// person would and to observe the world.
var k client.Client

// env is the test API server, for tests that watch.
var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k, env = e.Client, e
		return e.StartManager(kit.Deps{}, []kit.Controller{Controller})
	})
}

const (
	timeout = 20 * time.Second
	poll    = 100 * time.Millisecond
)
