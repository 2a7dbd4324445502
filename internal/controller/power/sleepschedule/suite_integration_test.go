//go:build integration

package sleepschedule

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
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
	// managerNamespace is the namespace the tests' managers run in, as far as the
	// controller knows (kit.Deps.Namespace): it never sleeps.
	managerNamespace = "orderly-test-system"
)

// startManager runs the controller in a manager of its own, with a fresh Reconciler
// (so nothing is remembered between managers), until the test ends or stop is called.
func startManager(t *testing.T, clk clock.PassiveClock) (stop func()) {
	t.Helper()
	return env.StartManagerForTest(t, kit.Deps{Clock: clk, Namespace: managerNamespace}, []kit.Controller{Controller})
}

// failingLists is a client whose List fails for one list type (e.g.
// *v1.NamespaceList) while fail holds its name, as an API server refusing or
// unavailable would; other calls go through.
type failingLists struct {
	client.Client
	fail *atomic.Pointer[string]
}

func (f failingLists) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if kind := f.fail.Load(); kind != nil && *kind == fmt.Sprintf("%T", list) {
		return apierrors.NewServiceUnavailable("injected by the test: cannot list " + *kind)
	}
	return f.Client.List(ctx, list, opts...)
}

// withFailingLists is the SleepSchedule controller reading and writing through
// failingLists.
func withFailingLists(fail *atomic.Pointer[string]) kit.Controller {
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := newReconciler(mgr, deps)
		r.Client = failingLists{Client: r.Client, fail: fail}
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	return c
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
