//go:build integration

package labelpolicy

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// k is a client straight to the API server (no cache), used by the tests to act as a
// person would and to observe the world.
var k client.Client

// mapServed is what discovery said about MutatingAdmissionPolicy on the test server.
var mapServed bool

// withAuditEvery is the LabelPolicy controller with audits every interval.
func withAuditEvery(interval time.Duration) kit.Controller {
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := NewReconciler(mgr, deps)
		r.AuditInterval = interval
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	return c
}

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		var err error
		// The manager asks once at start-up (internal/webhook.Prepare) and tells the
		// controller; so does the suite.
		if mapServed, err = admission.ServesMutatingAdmissionPolicy(e.Config); err != nil {
			return nil, err
		}
		fmt.Fprintln(os.Stderr, "MutatingAdmissionPolicy served:", mapServed)
		deps := kit.Deps{Admission: admission.Config{Mode: admission.Auto, MAPServed: mapServed}}
		return e.StartManager(deps, []kit.Controller{withAuditEvery(2 * time.Second)})
	})
}

const (
	timeout = 30 * time.Second
	poll    = 200 * time.Millisecond
)
