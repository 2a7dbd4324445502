package launch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as a fake `orderly manager`: when fakeEnv is set, TestMain
// behaves as the mode it names instead of running the tests.
const (
	fakeEnv        = "LAUNCH_TEST_FAKE_MANAGER"
	fakeCounterEnv = "LAUNCH_TEST_FAKE_COUNTER"
)

func TestMain(m *testing.M) {
	if mode := os.Getenv(fakeEnv); mode != "" {
		os.Exit(fakeManager(mode))
	}
	os.Exit(m.Run())
}

// fakeManager serves /readyz and /metrics on the addresses it is given, like the real
// one, after a short delay (so a launcher that does not wait is caught out).
func fakeManager(mode string) int {
	fmt.Printf("fake manager pid %d args %s\n", os.Getpid(), strings.Join(os.Args[1:], " "))
	flag := func(name string) string {
		for _, a := range os.Args {
			if v, ok := strings.CutPrefix(a, name+"="); ok {
				return v
			}
		}
		return ""
	}
	switch mode {
	case "crash":
		fmt.Println("error: unknown flag: --bogus")
		return 3
	case "port-taken-once":
		path := os.Getenv(fakeCounterEnv)
		b, _ := os.ReadFile(path)
		n, _ := strconv.Atoi(string(b))
		_ = os.WriteFile(path, []byte(strconv.Itoa(n+1)), 0o600)
		if n == 0 {
			fmt.Printf("error: listen tcp %s: bind: address already in use\n", flag("--health-probe-bind-address"))
			return 1
		}
	}
	interrupted := make(chan os.Signal, 1)
	signal.Notify(interrupted, os.Interrupt)
	if mode == "stubborn" {
		// Takes SIGINT and goes on: only a kill ends it.
		interrupted = nil
	}
	readyz := "ok"
	status := http.StatusOK
	if mode == "never-ready" {
		readyz, status = "[-]informers not synced", http.StatusServiceUnavailable
	}
	time.Sleep(300 * time.Millisecond) // the fake's start-up time, not a wait in a test
	serve := func(addr, path, body string, status int) {
		mux := http.NewServeMux()
		mux.HandleFunc(path, func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status)
			_, _ = io.WriteString(w, body)
		})
		go func() { _ = http.ListenAndServe(addr, mux) }() //nolint:gosec // a test's loopback server
	}
	serve(flag("--health-probe-bind-address"), "/readyz", readyz, status)
	serve(flag("--metrics-bind-address"), "/metrics", "fake_metric 1\n", http.StatusOK)
	<-interrupted
	fmt.Println("fake manager stopping")
	return 0
}

func startFake(t *testing.T, mode string, o Options) (*Manager, error) {
	t.Helper()
	t.Setenv(fakeEnv, mode)
	o.Bin = os.Args[0]
	if o.LogPath == "" {
		o.LogPath = filepath.Join(t.TempDir(), "manager.log")
	}
	m, err := Start(context.Background(), o)
	if m != nil {
		t.Cleanup(func() { _ = m.Stop() })
	}
	return m, err
}

func get(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url) //nolint:gosec,noctx // loopback URL from the launcher
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return string(b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// processGone reports whether no process has the given id any more (the launcher
// reaps its children, so the id is free once they have exited).
func processGone(pid int) bool {
	return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}

func TestStartWaitsUntilReadyAndStopsOnSIGINT(t *testing.T) {
	m, err := startFake(t, "ready", Options{Kubeconfig: "/k/config", Args: []string{"--leader-elect=false"}})
	if err != nil {
		t.Fatal(err)
	}
	// Served already: Start returned only once the manager was ready.
	if got := get(t, m.ReadyzURL); got != "ok" {
		t.Errorf("/readyz = %q, want ok", got)
	}
	if got := get(t, m.MetricsURL); !strings.Contains(got, "fake_metric 1") {
		t.Errorf("/metrics = %q", got)
	}
	if err := m.Stop(); err != nil {
		t.Errorf("Stop: %v", err)
	}
	if !isClosed(m.Exited()) || !processGone(m.Pid) {
		t.Errorf("the process still runs after Stop")
	}
	log := readFile(t, m.LogPath)
	for _, want := range []string{"manager --kubeconfig /k/config --metrics-bind-address=127.0.0.1:", "--health-probe-bind-address=127.0.0.1:", "--leader-elect=false", "fake manager stopping"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %q:\n%s", want, log)
		}
	}
	if err := m.Stop(); err != nil {
		t.Errorf("second Stop: %v", err)
	}
}

func TestStartReportsAnEarlyExitAtOnce(t *testing.T) {
	start := time.Now()
	_, err := startFake(t, "crash", Options{ReadyTimeout: time.Minute})
	if !errors.Is(err, ErrExited) {
		t.Fatalf("err = %v, want ErrExited", err)
	}
	// Well before the minute of ReadyTimeout: the exit itself ends the wait.
	if elapsed := time.Since(start); elapsed > 20*time.Second {
		t.Errorf("Start returned after %s", elapsed)
	}
	for _, want := range []string{"exit status 3", "unknown flag: --bogus"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("err lacks %q: %v", want, err)
		}
	}
}

func TestStartStopsAManagerThatIsNeverReady(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "manager.log")
	_, err := startFake(t, "never-ready", Options{LogPath: logPath, ReadyTimeout: 2 * time.Second})
	if err == nil || !strings.Contains(err.Error(), "not ready after 2s") {
		t.Fatalf("err = %v, want not ready", err)
	}
	var pid int
	if _, err := fmt.Sscanf(readFile(t, logPath), "fake manager pid %d", &pid); err != nil {
		t.Fatal(err)
	}
	if !processGone(pid) {
		t.Errorf("manager pid %d still runs after a failed Start", pid)
	}
}

func TestStopKillsAfterTheGracePeriod(t *testing.T) {
	m, err := startFake(t, "stubborn", Options{StopGrace: 500 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	err = m.Stop()
	if err == nil || !strings.Contains(err.Error(), "was killed") {
		t.Errorf("Stop = %v, want killed", err)
	}
	if !processGone(m.Pid) {
		t.Errorf("pid %d still runs", m.Pid)
	}
}

func TestKillEndsTheProcessAtOnce(t *testing.T) {
	// A manager that ignores SIGINT: were Kill to ask politely first, it would wait for
	// the grace period and report a kill.
	m, err := startFake(t, "stubborn", Options{StopGrace: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := m.Kill(); err != nil {
		t.Errorf("Kill = %v, want nil", err)
	}
	if elapsed := time.Since(start); elapsed > 10*time.Second {
		t.Errorf("Kill returned after %s", elapsed)
	}
	if !isClosed(m.Exited()) || !processGone(m.Pid) {
		t.Errorf("pid %d still runs after Kill", m.Pid)
	}
	if strings.Contains(readFile(t, m.LogPath), "fake manager stopping") {
		t.Errorf("the manager shut down gracefully; Kill must not let it")
	}
	if err := m.Stop(); err != nil {
		t.Errorf("Stop after Kill = %v, want nil", err)
	}
}

func TestKillReportsAnEarlierExit(t *testing.T) {
	m, err := startFake(t, "ready", Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The process ends before Kill is called (here: a SIGTERM from someone else).
	if err := syscall.Kill(m.Pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	<-m.Exited()
	if err := m.Kill(); err == nil || !strings.Contains(err.Error(), "terminated") {
		t.Errorf("Kill = %v, want the earlier exit (terminated)", err)
	}
}

func TestStartRetriesWhenAPortWasTaken(t *testing.T) {
	counter := filepath.Join(t.TempDir(), "starts")
	t.Setenv(fakeCounterEnv, counter)
	m, err := startFake(t, "port-taken-once", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got := readFile(t, counter); got != "2" {
		t.Errorf("started %s times, want 2", got)
	}
	if got := get(t, m.ReadyzURL); got != "ok" {
		t.Errorf("/readyz = %q", got)
	}
}

func TestTailShowsOnlyThisStart(t *testing.T) {
	logPath := filepath.Join(t.TempDir(), "manager.log")
	if err := os.WriteFile(logPath, []byte("an earlier manager's line\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := startFake(t, "crash", Options{LogPath: logPath})
	if err == nil {
		t.Fatal("want an error")
	}
	if strings.Contains(err.Error(), "earlier manager") {
		t.Errorf("the error shows another start's log: %v", err)
	}
	if log := readFile(t, logPath); !strings.HasPrefix(log, "an earlier manager's line\n") || !strings.Contains(log, "bogus") {
		t.Errorf("the log was not appended to:\n%s", log)
	}
}

func TestStartRefusesTheLaunchersOwnFlags(t *testing.T) {
	for _, arg := range []string{"--metrics-bind-address=:8080", "--health-probe-bind-address"} {
		_, err := Start(context.Background(), Options{Bin: "/bin/false", LogPath: "/dev/null", Args: []string{arg}})
		if err == nil || !strings.Contains(err.Error(), "chosen by the launcher") {
			t.Errorf("%s: err = %v", arg, err)
		}
	}
}
