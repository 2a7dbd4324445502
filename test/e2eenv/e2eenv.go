// Package e2eenv is the harness shared by the suites that run the orderly binary as a
// process against the full local cluster (test/e2e, test/attack): a local cluster of
// the run's own (kube-apiserver, controller-manager with garbage collection,
// scheduler, kwok nodes), config/rbac applied to it, and `orderly manager` started as
// its own ServiceAccount with that RBAC, never as cluster-admin.
//
// A suite's TestMain is
//
//	func TestMain(m *testing.M) {
//		e2eenv.Main(m, e2eenv.Options{Prefix: "orderly-e2e", ClusterEnv: "ORDERLY_E2E_CLUSTER", KeepEnv: "ORDERLY_E2E_KEEP"},
//			func(e *e2eenv.Env) (func(), error) { ... start the manager, return what stops it ... })
//	}
package e2eenv

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/test/launch"
)

const (
	// ManagerNamespace is the manager's namespace, as config/rbac has it.
	ManagerNamespace = "orderly-system"
	// ManagerServiceAccount is the manager's ServiceAccount, as config/rbac has it.
	ManagerServiceAccount = "orderly-manager"
	// BinEnv names the orderly binary under test (`make e2e` sets it).
	BinEnv = "ORDERLY_BIN"
)

// Options say how one suite's run is named and kept.
type Options struct {
	// Prefix names the run's cluster (devcluster.RunName(Prefix)), its directory
	// and the manager's log (Prefix + "-manager.log").
	Prefix string
	// ClusterEnv names the environment variable that names a cluster to run on
	// instead of a new one of the run's own, e.g. one kept by an earlier run, which
	// printed its name. The run leaves that cluster running.
	ClusterEnv string
	// KeepEnv names the environment variable that, set, keeps the run's cluster and
	// files after the run, to look at them or to run again on the same cluster.
	KeepEnv string
	// Nodes is the number of kwok nodes; 2 when zero.
	Nodes int
}

// Env is one run's cluster, its clients and what starting a manager needs.
type Env struct {
	// ClusterName is this run's cluster: unless ClusterEnv names one, a new one with
	// a name of its own, so two runs on one machine never share (or delete) a cluster.
	ClusterName string
	// RunDir holds this run's files (the manager's kubeconfig and log). While the
	// tests run it is also os.TempDir(), so whatever they put there goes with the run.
	RunDir string
	// ManagerLog is the managers' output, every start of the run appended.
	ManagerLog string
	// AdminKubeconfig is the cluster administrator's kubeconfig.
	AdminKubeconfig string
	// AdminConfig, Client and Clientset act as the cluster's administrator.
	AdminConfig *rest.Config
	Client      client.Client
	Clientset   *kubernetes.Clientset
	// ManagerBin is the orderly binary (BinEnv); ManagerKubeconfig carries a token
	// of the manager's ServiceAccount, so a manager runs with exactly its RBAC.
	ManagerBin, ManagerKubeconfig string
}

// Main runs the suite: it starts the run's cluster, installs the manager's identity,
// calls setup (which starts what the suite's tests expect to be running, usually the
// manager, and returns what stops it), runs the tests, tears everything down and exits
// with the tests' code. A setup failure exits 1 with the error.
func Main(m *testing.M, o Options, setup func(*Env) (teardown func(), err error)) {
	code, err := run(m, o, setup)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s setup: %v\n", o.Prefix, err)
		os.Exit(1)
	}
	os.Exit(code)
}

func run(m *testing.M, o Options, setup func(*Env) (func(), error)) (code int, err error) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	e := &Env{ManagerBin: os.Getenv(BinEnv)}
	if e.ManagerBin == "" {
		return 0, fmt.Errorf("%s is not set: run `make e2e` (or `make attack`)", BinEnv)
	}
	if o.Nodes == 0 {
		o.Nodes = 2
	}
	keep := os.Getenv(o.KeepEnv) != ""
	// A cluster named by the caller was not created by this run: it is left running.
	e.ClusterName = os.Getenv(o.ClusterEnv)
	ownCluster := e.ClusterName == ""
	if ownCluster {
		e.ClusterName = devcluster.RunName(o.Prefix)
	}
	if e.RunDir, err = os.MkdirTemp("", e.ClusterName+"-"); err != nil {
		return 0, err
	}
	e.ManagerLog = filepath.Join(e.RunDir, o.Prefix+"-manager.log")
	fmt.Fprintf(os.Stderr, "%s run on cluster %q, files in %s\n", o.Prefix, e.ClusterName, e.RunDir)
	defer func() {
		if keep || !ownCluster {
			fmt.Fprintf(os.Stderr, "left cluster %q running: run again on it with %s=%s, remove it with `bin/orderly dev down --name %s`\n",
				e.ClusterName, o.ClusterEnv, e.ClusterName, e.ClusterName)
		}
		switch {
		case keep:
			fmt.Fprintf(os.Stderr, "kept the run's files (%s is set): %s\n", o.KeepEnv, e.RunDir)
		case code != 0 || err != nil:
			fmt.Fprintf(os.Stderr, "kept the manager's log of the failed run: %s\n", e.ManagerLog)
		default:
			_ = os.RemoveAll(e.RunDir)
		}
	}()

	manifests, err := config.DevManifests()
	if err != nil {
		return 0, err
	}
	e.AdminKubeconfig, err = devcluster.Up(ctx, devcluster.Options{Name: e.ClusterName, Nodes: o.Nodes, Manifests: manifests}, os.Stderr)
	if ownCluster && !keep {
		// Even when Up failed half-way: a cluster of this run's own name is this run's.
		defer func() { _ = devcluster.Down(context.Background(), e.ClusterName, os.Stderr) }()
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
	if err := os.Chmod(e.RunDir, 0o755); err != nil { //nolint:gosec // see above
		return 0, err
	}
	if err := os.Setenv("TMPDIR", e.RunDir); err != nil {
		return 0, err
	}
	e.AdminConfig, err = clientcmd.BuildConfigFromFlags("", e.AdminKubeconfig)
	if err != nil {
		return 0, err
	}
	if e.Client, err = client.New(e.AdminConfig, client.Options{Scheme: scheme.New()}); err != nil {
		return 0, err
	}
	if e.Clientset, err = kubernetes.NewForConfig(e.AdminConfig); err != nil {
		return 0, err
	}
	if e.ManagerKubeconfig, err = e.installManagerIdentity(ctx); err != nil {
		return 0, fmt.Errorf("installing the manager's ServiceAccount and RBAC: %w", err)
	}
	teardown, err := setup(e)
	if err != nil {
		return 0, err
	}
	if teardown != nil {
		defer teardown()
	}
	return m.Run(), nil
}

// installManagerIdentity applies config/rbac and returns a kubeconfig that carries a
// token of the manager's ServiceAccount, so the manager runs with exactly that RBAC.
func (e *Env) installManagerIdentity(ctx context.Context) (string, error) {
	bins, err := devcluster.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		return "", err
	}
	_, err = e.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ManagerNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	apply := exec.CommandContext(ctx, bins.Kubectl, "--kubeconfig", e.AdminKubeconfig, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if out, err := apply.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kubectl apply -f config/rbac: %w\n%s", err, out)
	}
	var tok *authenticationv1.TokenRequest
	tok, err = e.Clientset.CoreV1().ServiceAccounts(ManagerNamespace).CreateToken(ctx, ManagerServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(4 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for the manager's ServiceAccount: %w", err)
	}
	raw, err := clientcmd.LoadFromFile(e.AdminKubeconfig)
	if err != nil {
		return "", err
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	sa := clientcmdapi.NewConfig()
	sa.Clusters["local"] = cluster
	sa.AuthInfos["orderly-manager"] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	sa.Contexts["orderly-manager"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "orderly-manager"}
	sa.CurrentContext = "orderly-manager"
	path := filepath.Join(e.RunDir, "manager.kubeconfig")
	if err := clientcmd.WriteToFile(*sa, path); err != nil {
		return "", err
	}
	return path, nil
}

// Manager is a running `orderly manager` started by StartManager.
type Manager struct {
	*launch.Manager
	stopping chan struct{}
	once     sync.Once
}

// Stop stops the manager; it may be called again (a test may stop a manager that a
// cleanup stops again). A failure to stop is printed.
func (m *Manager) Stop() {
	m.once.Do(func() { close(m.stopping) })
	if err := m.Manager.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
	}
}

// StartManager runs the env's binary with the manager's ServiceAccount: see the
// function StartManager.
func (e *Env) StartManager(extra ...string) (*Manager, error) {
	return StartManager(e.ManagerBin, e.ManagerKubeconfig, e.ManagerLog, extra...)
}

// StartManager runs `orderly manager` as Orderly runs in a cluster (leader election
// in its namespace, the kubeconfig given, its output appended to logPath) and waits
// until it is ready.
//
// Its lease is longer than the default (60 s, renewed within 45 s; the caller's extra
// flags come after and win): `make test` runs the integration tests beside the e2e
// suites, and on a small machine the API server can answer a renewal late enough that
// a leader with the default 10 s deadline gives up its lease and exits, leaving the
// tests after it without a manager. A manager that exits on its own all the same is
// reported at once with its log.
func StartManager(bin, kubeconfig, logPath string, extra ...string) (*Manager, error) {
	args := []string{"--leader-elect=true", "--leader-election-namespace", ManagerNamespace,
		"--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s"}
	lm, err := launch.Start(context.Background(), launch.Options{
		Bin:        bin,
		Kubeconfig: kubeconfig,
		Args:       append(args, extra...),
		LogPath:    logPath,
	})
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "manager ready (pid %d), logs in %s\n", lm.Pid, lm.LogPath)
	m := &Manager{Manager: lm, stopping: make(chan struct{})}
	go func() {
		select {
		case <-m.stopping:
		case <-lm.Exited():
			select {
			case <-m.stopping:
			default:
				err := lm.Stop() // the exit status and the end of its log
				if err == nil {
					err = fmt.Errorf("exit status 0; the end of its log:\n%s", lm.Tail())
				}
				fmt.Fprintf(os.Stderr, "THE MANAGER (pid %d) EXITED ON ITS OWN: the tests after this point run without one until a test restarts it. %v\n", lm.Pid, err)
			}
		}
	}()
	return m, nil
}
