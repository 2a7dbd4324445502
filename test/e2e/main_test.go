//go:build e2e

// Package e2e runs the orderly binary as a process against the full local cluster
// (kube-apiserver, controller-manager with garbage collection, scheduler, kwok nodes),
// with the ServiceAccount and RBAC from config/rbac, never as cluster-admin.
package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/testenv"
	"orderly.dev/orderly/test/launch"
)

const (
	managerNamespace = "orderly-system"
	managerSA        = "orderly-manager"

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

func TestMain(m *testing.M) {
	code, err := run(m)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M) (code int, err error) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	bin := os.Getenv("ORDERLY_BIN")
	if bin == "" {
		return 0, fmt.Errorf("ORDERLY_BIN is not set: run `make e2e`")
	}
	keep := os.Getenv(keepEnv) != ""
	// A cluster named by the caller was not created by this run: it is left running.
	clusterName = os.Getenv(clusterEnv)
	ownCluster := clusterName == ""
	if ownCluster {
		clusterName = devcluster.RunName("orderly-e2e")
	}
	if runDir, err = os.MkdirTemp("", clusterName+"-"); err != nil {
		return 0, err
	}
	managerLog = filepath.Join(runDir, "orderly-e2e-manager.log")
	fmt.Fprintf(os.Stderr, "e2e run on cluster %q, files in %s\n", clusterName, runDir)
	defer func() {
		if keep || !ownCluster {
			fmt.Fprintf(os.Stderr, "left cluster %q running: run again on it with %s=%s, remove it with `bin/orderly dev down --name %s`\n",
				clusterName, clusterEnv, clusterName, clusterName)
		}
		switch {
		case keep:
			fmt.Fprintf(os.Stderr, "kept the run's files (%s is set): %s\n", keepEnv, runDir)
		case code != 0 || err != nil:
			fmt.Fprintf(os.Stderr, "kept the manager's log of the failed run: %s\n", managerLog)
		default:
			_ = os.RemoveAll(runDir)
		}
	}()

	manifests, err := config.DevManifests()
	if err != nil {
		return 0, err
	}
	kubeconfig, err := devcluster.Up(ctx, devcluster.Options{Name: clusterName, Nodes: 2, Manifests: manifests}, os.Stderr)
	if ownCluster && !keep {
		// Even when Up failed half-way: a cluster of this run's own name is this run's.
		defer func() { _ = devcluster.Down(context.Background(), clusterName, os.Stderr) }()
	}
	if err != nil {
		return 0, fmt.Errorf("starting the local cluster: %w", err)
	}
	// From here on os.TempDir() is the run's directory, so what tests and the manager
	// put in the temporary directory goes with the run and never meets another run's.
	// Set once the cluster runs, so that its processes do not inherit it. Tests run as
	// root start PostgreSQL as the postgres user with its files in there, so the
	// directory must be traversable; the files that matter (the manager's kubeconfig
	// and log) are 0600 themselves.
	if err := os.Chmod(runDir, 0o755); err != nil { //nolint:gosec // see above
		return 0, err
	}
	if err := os.Setenv("TMPDIR", runDir); err != nil {
		return 0, err
	}
	adminCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err
	}
	if k, err = client.New(adminCfg, client.Options{Scheme: scheme.New()}); err != nil {
		return 0, err
	}
	if clientset, err = kubernetes.NewForConfig(adminCfg); err != nil {
		return 0, err
	}

	saKubeconfig, err := installManagerIdentity(ctx, kubeconfig)
	if err != nil {
		return 0, fmt.Errorf("installing the manager's ServiceAccount and RBAC: %w", err)
	}
	managerBin, managerKubeconfig = bin, saKubeconfig
	if stopManager, err = startManager(bin, saKubeconfig); err != nil {
		return 0, err
	}
	defer func() {
		// Nil when a test failed to put the default manager back.
		if stopManager != nil {
			stopManager()
		}
	}()
	return m.Run(), nil
}

// installManagerIdentity applies config/rbac and returns a kubeconfig that carries a
// token of the manager's ServiceAccount, so the manager runs with exactly that RBAC.
func installManagerIdentity(ctx context.Context, adminKubeconfig string) (string, error) {
	bins, err := devcluster.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		return "", err
	}
	_, err = clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}, metav1.CreateOptions{})
	if err != nil && !isAlreadyExists(err) {
		return "", err
	}
	apply := exec.CommandContext(ctx, bins.Kubectl, "--kubeconfig", adminKubeconfig, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if out, err := apply.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubectl apply -f config/rbac: %w\n%s", err, out)
	}
	var tok *authenticationv1.TokenRequest
	tok, err = clientset.CoreV1().ServiceAccounts(managerNamespace).CreateToken(ctx, managerSA,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(4 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for the manager's ServiceAccount: %w", err)
	}
	raw, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		return "", err
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	sa := clientcmdapi.NewConfig()
	sa.Clusters["local"] = cluster
	sa.AuthInfos["orderly-manager"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	sa.Contexts["orderly-manager"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "orderly-manager"}
	sa.CurrentContext = "orderly-manager"
	path := filepath.Join(runDir, "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*sa, path); err != nil {
		return "", err
	}
	return path, nil
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

// startManager runs `orderly manager` as Orderly runs in a cluster (leader election
// in its namespace, the ServiceAccount's kubeconfig) and waits until it is ready. The
// returned func stops it.
//
// Its lease is longer than the default (60 s, renewed within 45 s; a test's own flags
// come after and win): `make test` runs the integration tests beside this suite, and
// on a small machine the API server can answer a renewal late enough that a leader
// with the default 10 s deadline gives up its lease and exits, leaving the tests
// after it without a manager. Failover tests start replicas with their own timings.
// A manager that exits on its own all the same is reported at once with its log.
func startManager(bin, kubeconfig string, extra ...string) (func(), error) {
	args := []string{"--leader-elect=true", "--leader-election-namespace", managerNamespace,
		"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s"}
	m, err := launch.Start(context.Background(), launch.Options{
		Bin:        bin,
		Kubeconfig: kubeconfig,
		Args:       append(args, extra...),
		LogPath:    managerLog,
	})
	if err != nil {
		return nil, err
	}
	metricsURL = m.MetricsURL
	fmt.Fprintf(os.Stderr, "manager ready (pid %d), logs in %s\n", m.Pid, m.LogPath)
	stopping := make(chan struct{})
	go func() {
		select {
		case <-stopping:
		case <-m.Exited():
			select {
			case <-stopping:
			default:
				err := m.Stop() // the exit status and the end of its log
				if err == nil {
					err = fmt.Errorf("exit status 0; the end of its log:\n%s", m.Tail())
				}
				fmt.Fprintf(os.Stderr, "THE MANAGER (pid %d) EXITED ON ITS OWN: the tests after this point run without one until a test restarts it. %v\n", m.Pid, err)
			}
		}
	}()
	// Tests may stop a manager that a cleanup stops again.
	var once sync.Once
	return func() {
		once.Do(func() { close(stopping) })
		if err := m.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
	}, nil
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
