// Package launch runs `orderly manager` as a separate process, the way the end-to-end
// tests and the benchmarks need it: on free loopback ports, ready only once its
// /readyz says so, and stopped the way a kubelet stops it (SIGINT, then a kill after a
// grace period). A manager that dies while starting (a bad flag, a port taken, a
// missing permission) is reported at once with its exit status and the end of its
// log, rather than after the readiness deadline.
package launch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"orderly.dev/orderly/internal/localproc"
)

// Defaults of Options.
const (
	DefaultReadyTimeout = 60 * time.Second
	// DefaultStopGrace is a little more than the manager's own graceful shutdown
	// timeout (15 s), so a manager that shuts down properly is never killed.
	DefaultStopGrace = 20 * time.Second
)

// Flags the launcher sets itself: the ports must be free ones it chose, so that two
// managers (or two runs) on one machine never collide.
var ownFlags = []string{"--metrics-bind-address", "--health-probe-bind-address"}

// portAttempts bounds the retries when another process took a chosen port between
// the moment it was found free and the moment the manager bound it.
const portAttempts = 3

// tailLines is how much of the log an error shows.
const tailLines = 40

// Options say which manager to run and how.
type Options struct {
	// Bin is the orderly binary.
	Bin string
	// Kubeconfig is passed as --kubeconfig.
	Kubeconfig string
	// Args are the caller's other `orderly manager` flags (leader election,
	// --controllers, ...). The metrics and probe addresses are not among them.
	Args []string
	// LogPath is the file the manager's standard output and error are appended to;
	// appending keeps the log of every start of one run in one file.
	LogPath string
	// ReadyTimeout bounds the wait for /readyz; DefaultReadyTimeout if zero.
	ReadyTimeout time.Duration
	// StopGrace is how long Stop waits after SIGINT before it kills the process;
	// DefaultStopGrace if zero.
	StopGrace time.Duration
}

// Manager is a running `orderly manager` process.
type Manager struct {
	// Pid is the process's id (for /proc figures in benchmarks).
	Pid int
	// MetricsURL is the manager's Prometheus endpoint, http://127.0.0.1:PORT/metrics.
	MetricsURL string
	// ReadyzURL is the manager's readiness endpoint.
	ReadyzURL string
	// LogPath is where its output goes.
	LogPath string

	cmd       *exec.Cmd
	logs      *os.File
	logOffset int64
	grace     time.Duration
	// exited is closed once the process has exited and waitErr is set.
	exited  chan struct{}
	waitErr error

	stopOnce sync.Once
	stopErr  error
}

// ErrExited is wrapped by Start's error when the manager exits before it is ready.
var ErrExited = errors.New("orderly manager exited before it was ready")

// Start runs the manager and returns once its /readyz answers "ok". It returns an
// error wrapping ErrExited as soon as the process exits while starting, and stops the
// process when it is not ready within ReadyTimeout or ctx ends first. ctx bounds only
// the start: the process runs until Stop.
func Start(ctx context.Context, o Options) (*Manager, error) {
	if o.Bin == "" {
		return nil, errors.New("launch: no orderly binary given (ORDERLY_BIN is set by `make e2e` and `make bench`)")
	}
	if o.LogPath == "" {
		return nil, errors.New("launch: no log path given")
	}
	for _, a := range o.Args {
		for _, f := range ownFlags {
			if a == f || strings.HasPrefix(a, f+"=") {
				return nil, fmt.Errorf("launch: %s is chosen by the launcher (a free loopback port); do not pass it", f)
			}
		}
	}
	if o.ReadyTimeout == 0 {
		o.ReadyTimeout = DefaultReadyTimeout
	}
	if o.StopGrace == 0 {
		o.StopGrace = DefaultStopGrace
	}
	for attempt := 1; ; attempt++ {
		m, err := start(ctx, o)
		if err == nil {
			return m, nil
		}
		if !errors.Is(err, ErrExited) || !strings.Contains(err.Error(), "address already in use") || attempt == portAttempts {
			return nil, err
		}
	}
}

func start(ctx context.Context, o Options) (*Manager, error) {
	metricsPort, err := FreePort()
	if err != nil {
		return nil, err
	}
	probePort, err := FreePort()
	if err != nil {
		return nil, err
	}
	logs, err := os.OpenFile(o.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	offset, err := logs.Seek(0, io.SeekEnd)
	if err != nil {
		_ = logs.Close()
		return nil, err
	}
	args := []string{"manager"}
	if o.Kubeconfig != "" {
		args = append(args, "--kubeconfig", o.Kubeconfig)
	}
	args = append(args,
		fmt.Sprintf("--metrics-bind-address=127.0.0.1:%d", metricsPort),
		fmt.Sprintf("--health-probe-bind-address=127.0.0.1:%d", probePort))
	args = append(args, o.Args...)
	cmd := exec.Command(o.Bin, args...)
	cmd.Stdout, cmd.Stderr = logs, logs
	setParentDeathSignal(cmd)
	// The manager must not hold what the test inherited (the heavy-run lock of
	// `flock CMD`): it would keep the lock if it outlived the test.
	localproc.CloseInheritedOnExec()
	exited := make(chan struct{})
	started := make(chan error, 1)
	var waitErr error
	go func() {
		// See setParentDeathSignal: this goroutine holds the thread that starts the
		// process until the process has exited, and then gives it back.
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		started <- nil
		// The process's output goes straight to a file, so Wait returns as soon as
		// the process exits: that is how an early exit is noticed while polling
		// /readyz.
		waitErr = cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		_ = logs.Close()
		return nil, fmt.Errorf("starting %s: %w", o.Bin, err)
	}
	m := &Manager{
		Pid:        cmd.Process.Pid,
		MetricsURL: fmt.Sprintf("http://127.0.0.1:%d/metrics", metricsPort),
		ReadyzURL:  fmt.Sprintf("http://127.0.0.1:%d/readyz", probePort),
		LogPath:    o.LogPath,
		cmd:        cmd,
		logs:       logs,
		logOffset:  offset,
		grace:      o.StopGrace,
		exited:     make(chan struct{}),
	}
	go func() {
		<-exited
		m.waitErr = waitErr
		close(m.exited)
	}()
	if err := m.waitReady(ctx, o.ReadyTimeout); err != nil {
		_ = m.Stop()
		return nil, err
	}
	return m, nil
}

func (m *Manager) waitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	httpClient := &http.Client{Timeout: 2 * time.Second}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if ready(ctx, httpClient, m.ReadyzURL) {
			return nil
		}
		select {
		case <-m.exited:
			return fmt.Errorf("%w (%s); the end of its log %s:\n%s", ErrExited, exitStatus(m.waitErr), m.LogPath, m.Tail())
		case <-ctx.Done():
			return fmt.Errorf("orderly manager (pid %d) not ready after %s (%w); the end of its log %s:\n%s",
				m.Pid, timeout, context.Cause(ctx), m.LogPath, m.Tail())
		case <-tick.C:
		}
	}
}

func ready(ctx context.Context, c *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, http.NoBody)
	if err != nil {
		return false
	}
	resp, err := c.Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1024))
	return err == nil && resp.StatusCode == http.StatusOK && bytes.Equal(bytes.TrimSpace(body), []byte("ok"))
}

// Stop sends SIGINT, waits up to the grace period for the process to exit and kills
// it after that. It returns nil when the manager exited cleanly, and an error saying
// how it ended otherwise (killed, or a non-zero exit status). Calling it again
// returns the same result.
func (m *Manager) Stop() error {
	m.stopOnce.Do(func() {
		defer func() { _ = m.logs.Close() }()
		select {
		case <-m.exited:
			m.stopErr = exitError(m)
			return
		default:
		}
		_ = m.cmd.Process.Signal(os.Interrupt)
		timer := time.NewTimer(m.grace)
		defer timer.Stop()
		select {
		case <-m.exited:
			m.stopErr = exitError(m)
		case <-timer.C:
			_ = m.cmd.Process.Kill()
			<-m.exited
			m.stopErr = fmt.Errorf("orderly manager (pid %d) was still running %s after SIGINT and was killed; the end of its log %s:\n%s",
				m.Pid, m.grace, m.LogPath, m.Tail())
		}
	})
	return m.stopErr
}

// Kill ends the process at once with SIGKILL, as a crash or the kernel's OOM killer
// would: it cannot release its leader election lease or finish what it was doing,
// which is what failover tests need. It returns once the process has exited: nil
// when Kill ended it, the exit status when it had ended before. Stop afterwards
// returns the same.
func (m *Manager) Kill() error {
	m.stopOnce.Do(func() {
		defer func() { _ = m.logs.Close() }()
		select {
		case <-m.exited:
			m.stopErr = exitError(m)
			return
		default:
		}
		_ = m.cmd.Process.Kill()
		<-m.exited
	})
	return m.stopErr
}

// Exited is closed when the process has exited, whoever ended it.
func (m *Manager) Exited() <-chan struct{} { return m.exited }

func exitError(m *Manager) error {
	if m.waitErr == nil {
		return nil
	}
	return fmt.Errorf("orderly manager (pid %d) ended with %s; the end of its log %s:\n%s", m.Pid, exitStatus(m.waitErr), m.LogPath, m.Tail())
}

func exitStatus(err error) string {
	if err == nil {
		return "exit status 0"
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.String()
	}
	return err.Error()
}

// Tail returns the last lines this process wrote to the log (not those of earlier
// processes appending to the same file).
func (m *Manager) Tail() string {
	f, err := os.Open(m.LogPath)
	if err != nil {
		return fmt.Sprintf("(reading the log: %v)", err)
	}
	defer f.Close()
	const maxBytes = 16 << 10
	info, err := f.Stat()
	if err != nil {
		return fmt.Sprintf("(reading the log: %v)", err)
	}
	from := max(m.logOffset, info.Size()-maxBytes)
	b := make([]byte, info.Size()-from)
	if _, err := f.ReadAt(b, from); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(reading the log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > tailLines {
		lines = lines[len(lines)-tailLines:]
	}
	if len(lines) == 1 && lines[0] == "" {
		return "(empty)"
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a loopback TCP port that was free a moment ago. It comes from the
// kernel's ephemeral range (32768-60999 by default on Linux), which kwokctl's port
// choice for local clusters (counting down from 32767) never enters.
func FreePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("finding a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
