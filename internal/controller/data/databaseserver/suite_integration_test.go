//go:build integration

package databaseserver

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/mysql"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testmysql"
	"orderly.dev/orderly/internal/testing/testpg"
)

var (
	// k is a client straight to the API server (no cache), used by the tests to act
	// as a person would and to observe the world.
	k client.Client
	// pg is a real PostgreSQL server that stays up; tests that stop a server start
	// their own.
	pg *testpg.Server
	// maria is a real MariaDB server, for the mysql engine.
	maria *testmysql.Server
)

// recheck is how often the tests' controller checks a server again, so that a
// server going down or coming back is noticed within the tests' patience.
const recheck = 200 * time.Millisecond

// withRecheckEvery is the DatabaseServer controller checking servers every interval.
func withRecheckEvery(interval time.Duration) kit.Controller {
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		connector, err := database.ConnectorOf(deps)
		if err != nil {
			return err
		}
		r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-databaseserver"),
			Connector: connector, Clock: deps.ClockOrReal(), Namespace: deps.Namespace, RecheckReachable: interval, RecheckUnreachable: interval}
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	return c
}

func TestMain(m *testing.M) {
	var err error
	if pg, err = testpg.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL for the tests:", err)
		os.Exit(1)
	}
	if maria, err = testmysql.Start(); err != nil {
		pg.Close()
		fmt.Fprintln(os.Stderr, "starting MariaDB for the tests:", err)
		os.Exit(1)
	}
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		if err := k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
			return nil, err
		}
		connector := database.Engines{"postgres": postgres.NewConnector(), "mysql": mysql.NewConnector()}
		stop, err := e.StartManager(kit.Deps{Databases: connector, Namespace: managerNamespace}, []kit.Controller{withRecheckEvery(recheck)})
		return func() {
			if stop != nil {
				stop()
			}
			connector.Close()
			pg.Close()
			maria.Close()
		}, err
	})
}

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
	// managerNamespace is the manager's namespace, where servers' Secrets live.
	managerNamespace = "orderly-system"
)
