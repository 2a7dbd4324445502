//go:build e2e

// Package e2e runs the orderly binary as a process against the full local cluster
// (kube-apiserver, controller-manager with garbage collection, scheduler, kwok nodes),
// with the ServiceAccount and RBAC from config/rbac, never as cluster-admin.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/test/e2eenv"
	"orderly.dev/orderly/test/launch"
)

const (
	managerNamespace = e2eenv.ManagerNamespace
	managerSA        = e2eenv.ManagerServiceAccount

	// clusterEnv names a cluster to run on instead of a new one of the run's own, e.g.
	// one kept by an earlier run, which printed its name. The run leaves it running.
	clusterEnv = "ORDERLY_E2E_CLUSTER"
	// keepEnv keeps the run's cluster and files after the run, to look at them or to
	// run again on the same cluster.
	keepEnv = "ORDERLY_E2E_KEEP"
)

var (
	// clusterName is this run's cluster: unless clusterEnv names one, a new one with a
	// name of its own, so two runs on one machine never share (or delete) a cluster.
	clusterName string
	// runDir holds this run's files (the manager's kubeconfig and log). While the
	// tests run it is also os.TempDir(), so whatever they put there goes with the run.
	runDir string
	// managerLog is the manager's output, every start of the run appended.
	managerLog string

	// k acts as the cluster's administrator: it creates Tenants and observes the world.
	k          client.Client
	clientset  *kubernetes.Clientset
	adminCfg   *rest.Config
	metricsURL string

	// The running manager, and how to start it again.
	managerBin, managerKubeconfig string
	stopManager                   func()
)

// TestMain runs the suite on a cluster of its own (test/e2eenv) with one manager,
// which tests may replace (restartManager, withoutDefaultManager).
func TestMain(m *testing.M) {
	e2eenv.Main(m, e2eenv.Options{Prefix: "orderly-e2e", ClusterEnv: clusterEnv, KeepEnv: keepEnv}, func(e *e2eenv.Env) (func(), error) {
		clusterName, runDir, managerLog = e.ClusterName, e.RunDir, e.ManagerLog
		k, clientset, adminCfg = e.Client, e.Clientset, e.AdminConfig
		managerBin, managerKubeconfig = e.ManagerBin, e.ManagerKubeconfig
		var err error
		if stopManager, err = startManager(managerBin, managerKubeconfig); err != nil {
			return nil, err
		}
		return func() {
			// Nil when a test failed to put the default manager back.
			if stopManager != nil {
				stopManager()
			}
		}, nil
	})
}

// restartManager replaces the running manager with one started with extra flags, and
// puts the default one back when the test ends. Tests run one after another, so no
// other test sees the replacement.
func restartManager(t *testing.T, extra ...string) {
	t.Helper()
	stopManager()
	stop, err := startManager(managerBin, managerKubeconfig, extra...)
	if err != nil {
		t.Fatal(err)
	}
	stopManager = stop
	t.Cleanup(func() {
		stopManager()
		if stopManager, err = startManager(managerBin, managerKubeconfig); err != nil {
			t.Fatalf("restarting the default manager: %v", err)
		}
	})
}

// startManager runs `orderly manager` as Orderly runs in a cluster (e2eenv.StartManager:
// leader election in its namespace, the ServiceAccount's kubeconfig, a lease longer
// than the default) and waits until it is ready. The returned func stops it, and may
// be called again.
func startManager(bin, kubeconfig string, extra ...string) (func(), error) {
	m, err := e2eenv.StartManager(bin, kubeconfig, managerLog, extra...)
	if err != nil {
		return nil, err
	}
	metricsURL = m.MetricsURL
	return m.Stop, nil
}

// leaseName is the manager's leader election Lease (in managerNamespace).
const leaseName = "orderly-manager"

// leaderWait bounds the wait for a manager to lead: at once when the last leader
// released the lease (a graceful stop does), else once the lease has expired, which
// takes up to the longest lease duration a test gives a manager (60 s).
const leaderWait = 2 * time.Minute

// withoutDefaultManager stops the suite's manager for the rest of the test, for a
// test that runs managers of its own (several replicas, other lease timings), and
// starts it again when the test ends (call it before starting the test's replicas,
// so that this cleanup runs after theirs have stopped them), waiting until it leads
// so that the next test finds it reconciling.
func withoutDefaultManager(t *testing.T) {
	t.Helper()
	stopManager()
	stopManager = nil
	t.Cleanup(func() {
		stop, err := startManager(managerBin, managerKubeconfig)
		if err != nil {
			t.Fatalf("restarting the default manager: %v", err)
		}
		stopManager = stop
		if err := waitLeading(metricsURL, leaderWait); err != nil {
			t.Fatalf("the default manager is back but does not lead: %v", err)
		}
	})
}

// leading reports whether the manager whose metrics are at url holds the leader
// election lease: controller-runtime sets leader_election_master_status to 1 on the
// leader and exports nothing (or 0) on a standby.
func leading(url string) (bool, error) {
	body, err := httpGet(url)
	if err != nil {
		return false, err
	}
	return strings.Contains(string(body), `leader_election_master_status{name="`+leaseName+`"} 1`), nil
}

func waitLeading(url string, within time.Duration) error {
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), poll, within, true, func(context.Context) (bool, error) {
		ok, err := leading(url)
		last = err
		return ok, nil
	})
	if err != nil {
		if last != nil {
			return fmt.Errorf("not the leader after %s; reading its metrics: %w", within, last)
		}
		return fmt.Errorf("not the leader after %s", within)
	}
	return nil
}

func freePort() int {
	p, err := launch.FreePort()
	if err != nil {
		panic(err)
	}
	return p
}
