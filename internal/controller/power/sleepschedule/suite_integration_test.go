//go:build integration

package sleepschedule

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testenv"
)

// k is a client straight to the API server (no cache), used by the tests to act as a
// person would and to observe the world.
var (
	k   client.Client
	env *testenv.Env
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		env, k = e, e.Client
		return nil, nil
	})
}

const (
	timeout = 20 * time.Second
	poll    = 100 * time.Millisecond
)

// startManager runs the controller in a manager of its own, with a fresh Reconciler
// (so nothing is remembered between managers), until the test ends or stop is called.
func startManager(t *testing.T, clk clock.PassiveClock) (stop func()) {
	t.Helper()
	return env.StartManagerForTest(t, kit.Deps{Clock: clk}, []kit.Controller{Controller})
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
