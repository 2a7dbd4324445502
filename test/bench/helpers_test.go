//go:build bench

package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/test/launch"
)

// newBenchClient is the benchmarks' own client: every Orderly kind, and one rate
// limiter for the whole client, as the manager has (see cmd/orderly/manager.go).
func newBenchClient(cfg *rest.Config, qps float32, burst int) (client.WithWatch, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, burst
	c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return client.NewWithWatch(c, client.Options{Scheme: scheme.New()})
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

// startManager runs ORDERLY_BIN's manager against kubeconfig, without leader
// election, and returns once it is ready; it stops when the benchmark ends.
func startManager(b *testing.B, kubeconfig string, args ...string) *benchManager {
	b.Helper()
	m, err := launch.Start(context.Background(), launch.Options{
		Bin:        os.Getenv("ORDERLY_BIN"),
		Kubeconfig: kubeconfig,
		Args:       append([]string{"--leader-elect=false"}, args...),
		LogPath:    filepath.Join(b.TempDir(), "manager.log"),
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
// with prefix.
func scrapeCounter(url, prefix string, contains ...string) float64 {
	resp, err := http.Get(url) //nolint:gosec,noctx // loopback URL built by the benchmark
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sum := 0.0
	s := bufio.NewScanner(resp.Body)
	for s.Scan() {
		line := s.Text()
		match := strings.HasPrefix(line, prefix)
		for _, c := range contains {
			match = match && strings.Contains(line, c)
		}
		if match {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[len(f)-1], 64)
			sum += v
		}
	}
	return sum
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
func peakRSS(pid int) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if strings.HasPrefix(s.Text(), "VmHWM:") {
			fields := strings.Fields(s.Text())
			kb, _ := strconv.ParseInt(fields[1], 10, 64)
			return kb * 1024
		}
	}
	return 0
}
