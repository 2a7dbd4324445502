//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/test/launch"
)

// newBenchClient is the benchmarks' own client: every Orderly kind, and no
// client-side rate limit, as Orderly has none by default (cmd/orderly/ratelimit.go).
func newBenchClient(cfg *rest.Config) (client.WithWatch, error) {
	return client.NewWithWatch(unlimited(cfg), client.Options{Scheme: scheme.New()})
}

// adminClient is the benchmark's client as the cluster's admin (kubeconfig), and its
// rest config.
func adminClient(b *testing.B, kubeconfig string) (*rest.Config, client.WithWatch) {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	c, err := newBenchClient(cfg)
	if err != nil {
		b.Fatal(err)
	}
	return cfg, c
}

// unlimited is a copy of cfg without a client-side rate limit.
func unlimited(cfg *rest.Config) *rest.Config {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst, c.RateLimiter = -1, 0, nil
	return c
}

// workersOf is how many reconciles controller c runs at once at the manager's default
// flags: a baseline meant to run at Orderly's concurrency runs at this.
func workersOf(c kit.Controller) int {
	return kit.Deps{}.For(c).Options.MaxConcurrentReconciles
}

// keepEnv keeps a benchmark's cluster after it ends, to look at it.
const keepEnv = "ORDERLY_BENCH_KEEP"

// benchCluster starts a local cluster for one benchmark with Orderly's CRDs and
// returns its kubeconfig. Its name is prefix plus a suffix of this run's own, so two
// runs on one machine never share (or delete) a cluster. It is removed when the
// benchmark ends unless keepEnv is set; then its name is printed.
func benchCluster(ctx context.Context, b *testing.B, prefix string, nodes int) string {
	b.Helper()
	manifests, err := config.DevManifests()
	if err != nil {
		b.Fatal(err)
	}
	name := devcluster.RunName(prefix)
	kubeconfig, err := devcluster.Up(ctx, devcluster.Options{Name: name, Nodes: nodes, Manifests: manifests}, os.Stderr)
	// Registered even when Up failed half-way: the name is this run's own.
	b.Cleanup(func() {
		if os.Getenv(keepEnv) != "" {
			fmt.Fprintf(os.Stderr, "%s is set: kept cluster %q (kubeconfig %s); remove it with `bin/orderly dev down --name %s`\n",
				keepEnv, name, devcluster.KubeconfigPath(name), name)
			return
		}
		_ = devcluster.Down(context.Background(), name, os.Stderr)
	})
	if err != nil {
		b.Fatal(err)
	}
	return kubeconfig
}

// benchManager is `orderly manager` running as a process for a benchmark.
type benchManager struct {
	pid        int
	metricsURL string
	logPath    string
	// stop ends the manager before the benchmark does.
	stop func()
}

// The manager's namespace and ServiceAccount, as config/rbac and config/manager have them.
const (
	managerNamespace = "orderly-system"
	managerSA        = "orderly-manager"
)

// managerKubeconfig installs what Orderly needs to run as it does in a cluster (its
// namespace, where the leader election Lease lives, and its ServiceAccount with the
// RBAC of config/rbac) and returns a kubeconfig that carries a token of that
// ServiceAccount. A manager running as an administrator would be exempt from the API
// server's Priority and Fairness, which is what paces Orderly by default.
func managerKubeconfig(ctx context.Context, b *testing.B, adminKubeconfig string) string {
	b.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", adminKubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(unlimited(cfg))
	if err != nil {
		b.Fatal(err)
	}
	_, err = cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		b.Fatal(err)
	}
	bins, err := devcluster.EnsureBinaries(ctx, os.Stderr)
	if err != nil {
		b.Fatal(err)
	}
	apply := exec.CommandContext(ctx, bins.Kubectl, "--kubeconfig", adminKubeconfig, "apply", "--server-side", "-f", filepath.Join(testenv.RepoRoot(), "config", "rbac"))
	if out, err := apply.CombinedOutput(); err != nil {
		b.Fatalf("kubectl apply -f config/rbac: %v\n%s", err, out)
	}
	return serviceAccountKubeconfig(ctx, b, cs, adminKubeconfig, managerNamespace, managerSA)
}

// serviceAccountKubeconfig writes a kubeconfig for the ServiceAccount ns/name, with a
// token that outlives any benchmark, into the benchmark's temporary directory.
func serviceAccountKubeconfig(ctx context.Context, b *testing.B, cs *kubernetes.Clientset, adminKubeconfig, ns, name string) string {
	b.Helper()
	tok, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptrTo(int64(4 * 3600))}}, metav1.CreateOptions{})
	if err != nil {
		b.Fatalf("requesting a token for the ServiceAccount %s/%s: %v", ns, name, err)
	}
	raw, err := clientcmd.LoadFromFile(adminKubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	cluster := raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	sa := clientcmdapi.NewConfig()
	sa.Clusters["local"] = cluster
	sa.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	sa.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	sa.CurrentContext = name
	path := filepath.Join(b.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*sa, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// startManager runs ORDERLY_BIN's manager with kubeconfig (managerKubeconfig's) at
// its default flags, plus args where a benchmark needs a mode the defaults do not
// give (none tunes speed), and returns once it is ready; it stops when the benchmark
// ends. Like a replica in a cluster, it elects itself leader in orderly-system first.
func startManager(b *testing.B, kubeconfig string, args ...string) *benchManager {
	b.Helper()
	m, err := launch.Start(context.Background(), launch.Options{
		Bin:        os.Getenv("ORDERLY_BIN"),
		Kubeconfig: kubeconfig,
		// BENCH_MANAGER_ARGS adds flags to every manager a benchmark starts, e.g.
		// --pprof-bind-address=127.0.0.1:6060 to profile it while it runs.
		Args:    append(args, strings.Fields(os.Getenv("BENCH_MANAGER_ARGS"))...),
		LogPath: filepath.Join(b.TempDir(), "manager.log"),
	})
	if err != nil {
		b.Fatal(err)
	}
	stop := func() {
		if err := m.Stop(); err != nil {
			b.Log(err)
		}
	}
	b.Cleanup(stop)
	return &benchManager{pid: m.Pid, metricsURL: m.MetricsURL, logPath: m.LogPath, stop: stop}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func freePort() int {
	p, err := launch.FreePort()
	if err != nil {
		panic(err)
	}
	return p
}

// scrapeCounter sums the samples of a Prometheus text exposition whose line starts
// with prefix and contains every one of contains; -1 when the scrape failed.
func scrapeCounter(url, prefix string, contains ...string) float64 {
	return scrapeMetrics(url).sum(prefix, contains...)
}

// scrapeMetrics reads a metrics endpoint once, for several readings; nil when the
// scrape failed.
func scrapeMetrics(url string) metricsText {
	resp, err := http.Get(url) //nolint:gosec,noctx // loopback URL built by the benchmark
	if err != nil {
		return nil
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil
	}
	return strings.Split(string(raw), "\n")
}

// cpuSeconds reads a process's user+system CPU time from /proc (clock ticks of 1/100 s).
func cpuSeconds(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// Fields after the command name, which is in parentheses and may hold spaces.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100
}

// peakRSS reads a process's peak resident set size from /proc.
func peakRSS(pid int) int64 { return procStatus(pid, "VmHWM:") }

// rss reads a process's resident set size now from /proc.
func rss(pid int) int64 { return procStatus(pid, "VmRSS:") }

// procStatus reads a size in kB from /proc/PID/status, in bytes.
func procStatus(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), field) {
			fields := strings.Fields(s.Text())
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}

// apiServerCounter sums the samples of the API server's own metrics whose line
// starts with prefix and contains every one of contains.
func apiServerCounter(ctx context.Context, cs *kubernetes.Clientset, prefix string, contains ...string) float64 {
	m, _ := apiServerMetrics(ctx, cs)
	return m.sum(prefix, contains...)
}

// metricsText is one scrape of a metrics endpoint; nil when the scrape failed.
type metricsText []string

// apiServerMetrics scrapes the API server's own metrics once, for several readings.
func apiServerMetrics(ctx context.Context, cs *kubernetes.Clientset) (metricsText, error) {
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	return strings.Split(string(raw), "\n"), nil
}

// samples calls f with each sample whose line starts with prefix and contains every
// one of contains, and the sample's value.
func (m metricsText) samples(prefix string, contains []string, f func(line string, v float64)) {
	for _, line := range m {
		match := strings.HasPrefix(line, prefix)
		for _, c := range contains {
			match = match && strings.Contains(line, c)
		}
		if match {
			fields := strings.Fields(line)
			v, _ := strconv.ParseFloat(fields[len(fields)-1], 64)
			f(line, v)
		}
	}
}

// sum adds the samples whose line starts with prefix and contains every one of
// contains; -1 when the scrape failed.
func (m metricsText) sum(prefix string, contains ...string) float64 {
	if m == nil {
		return -1
	}
	sum := 0.0
	m.samples(prefix, contains, func(_ string, v float64) { sum += v })
	return sum
}

// parallel runs fn(i) for i in [0,n) on `writers` goroutines and returns the first error.
func parallel(n, writers int, fn func(i int) error) error {
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	next := make(chan int)
	for range writers {
		wg.Go(func() {
			for i := range next {
				if err := fn(i); err != nil {
					once.Do(func() { first = err })
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	return first
}
