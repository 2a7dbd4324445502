//go:build e2e

// Package e2e runs the orderly binary as a process against the full local cluster
// (kube-apiserver, controller-manager with garbage collection, scheduler, kwok nodes),
// with the ServiceAccount and RBAC from config/rbac, never as cluster-admin.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/testenv"
)

const (
	clusterName      = "orderly-e2e"
	managerNamespace = "orderly-system"
	managerSA        = "orderly-manager"
)

var (
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

func run(m *testing.M) (int, error) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	bin := os.Getenv("ORDERLY_BIN")
	if bin == "" {
		return 0, fmt.Errorf("ORDERLY_BIN is not set: run `make e2e`")
	}
	manifests, err := config.DevManifests()
	if err != nil {
		return 0, err
	}
	kubeconfig, err := devcluster.Up(ctx, devcluster.Options{Name: clusterName, Nodes: 2, Manifests: manifests}, os.Stderr)
	if err != nil {
		return 0, fmt.Errorf("starting the local cluster: %w", err)
	}
	if os.Getenv("ORDERLY_E2E_KEEP") == "" {
		defer func() { _ = devcluster.Down(context.Background(), clusterName, os.Stderr) }()
	}
	adminCfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return 0, err
	}
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(tenancyv1alpha1.AddToScheme(scheme))
	if k, err = client.New(adminCfg, client.Options{Scheme: scheme}); err != nil {
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
	_ = os.Remove(filepath.Join(os.TempDir(), "orderly-e2e-manager.log")) // each start appends to it
	if stopManager, err = startManager(bin, saKubeconfig); err != nil {
		return 0, err
	}
	defer func() { stopManager() }()
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
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(4 * 3600))}}, metav1.CreateOptions{})
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
	path := filepath.Join(os.TempDir(), "orderly-e2e-manager.kubeconfig")
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

// startManager runs `orderly manager` as a process and waits until it is ready.
func startManager(bin, kubeconfig string, extra ...string) (func(), error) {
	metricsPort, probePort := freePort(), freePort()
	metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort)
	logs, err := os.OpenFile(filepath.Join(os.TempDir(), "orderly-e2e-manager.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "manager", "--kubeconfig", kubeconfig,
		"--leader-elect=true", "--leader-election-namespace", managerNamespace,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort))
	cmd.Args = append(cmd.Args, extra...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	fmt.Fprintf(os.Stderr, "manager started (pid %d), logs in %s\n", cmd.Process.Pid, logs.Name())
	stopped := false
	stop := func() {
		if stopped {
			return
		}
		stopped = true
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(20 * time.Second):
			_ = cmd.Process.Kill()
		}
		_ = logs.Close()
	}
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if body, err := httpGet(fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort)); err == nil && bytes.Equal(bytes.TrimSpace(body), []byte("ok")) {
			return stop, nil
		}
		if cmd.ProcessState != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	stop()
	tail, _ := os.ReadFile(logs.Name())
	return nil, fmt.Errorf("manager did not become ready; its log:\n%s", tail)
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func ptrTo[T any](v T) *T { return &v }
