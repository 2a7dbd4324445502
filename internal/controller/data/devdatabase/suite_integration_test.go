//go:build integration

package devdatabase

import (
	"context"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/databaseserver"
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
	// pg is the real PostgreSQL server the tests' DatabaseServer points at.
	pg *testpg.Server
	// maria is the MariaDB server of the table's mariadb backend.
	maria *testmysql.Server
	// clk is the controllers' clock: real time until a test sets it.
	clk = &testClock{}
	// env is the test API server.
	env *testenv.Env
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
	pgBackend, mariaBackend = newPGBackend(pg), newMariaBackend(maria)
	backends = []*backend{pgBackend, mariaBackend}
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k, env = e.Client, e
		if err := k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}); err != nil {
			return nil, err
		}
		pgConnector, myConnector := postgres.NewConnector(), mysql.NewConnector()
		// Short enough that the tests of hung servers see reconciles end soon, long
		// enough for every statement of the other tests on a busy machine.
		pgConnector.Timeouts = database.Timeouts{Statement: 5 * time.Second, Lock: 2 * time.Second, Grace: time.Second}
		myConnector.Timeouts = database.Timeouts{Statement: 5 * time.Second, Lock: 2 * time.Second, Grace: time.Second}
		connector := database.Engines{string(datav1alpha1.EnginePostgres): pgConnector, string(datav1alpha1.EngineMySQL): myConnector}
		stop, err := e.StartManager(kit.Deps{Clock: clk, Databases: connector, Namespace: managerNamespace, Options: controller.Options{MaxConcurrentReconciles: 4}},
			[]kit.Controller{Controller, databaseserver.Controller})
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
