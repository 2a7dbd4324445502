//go:build bench

package bench

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// newBenchClient is the benchmarks' own client: every Orderly kind, and one rate
// limiter for the whole client, as the manager has (see cmd/orderly/manager.go).
func newBenchClient(cfg *rest.Config, qps float32, burst int) (client.WithWatch, error) {
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(tenancyv1alpha1.AddToScheme(scheme))
	utilruntime.Must(powerv1alpha1.AddToScheme(scheme))
	utilruntime.Must(policyv1alpha1.AddToScheme(scheme))
	utilruntime.Must(datav1alpha1.AddToScheme(scheme))
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, burst
	c.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(qps, burst)
	return client.NewWithWatch(c, client.Options{Scheme: scheme})
}

// benchManager is `orderly manager` running as a process for a benchmark.
type benchManager struct {
	pid        int
	metricsURL string
	logPath    string
	// stop ends the manager before the benchmark does.
	stop func()
}

// startManager runs ORDERLY_BIN's manager against kubeconfig with metrics on a free
// loopback port, and stops it when the benchmark ends.
func startManager(b *testing.B, kubeconfig string, args ...string) *benchManager {
	b.Helper()
	bin := os.Getenv("ORDERLY_BIN")
	if bin == "" {
		b.Fatal("ORDERLY_BIN is not set: run `make bench`")
	}
	logPath := filepath.Join(b.TempDir(), "manager.log")
	logs, err := os.Create(logPath)
	if err != nil {
		b.Fatal(err)
	}
	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort())
	cmd := exec.Command(bin, append([]string{"manager", "--kubeconfig", kubeconfig, "--leader-elect=false",
		"--metrics-bind-address=" + metricsAddr, "--health-probe-bind-address=0"}, args...)...)
	cmd.Stdout, cmd.Stderr = logs, logs
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	var once sync.Once
	stop := func() { once.Do(func() { _ = cmd.Process.Kill(); _, _ = cmd.Process.Wait(); _ = logs.Close() }) }
	b.Cleanup(stop)
	return &benchManager{pid: cmd.Process.Pid, metricsURL: "http://" + metricsAddr + "/metrics", logPath: logPath, stop: stop}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
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
