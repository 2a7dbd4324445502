// Package standin runs the local stand-ins for what Orderly talks to (a DNS server,
// an S3 store, Prometheus, an OCI registry, cert-manager, ...): real programs on
// loopback, each in a directory of its own. The same code starts them for the tests
// (throwaway: a temporary directory, a free port, gone with the test process) and
// for `orderly dev up --with ...` and `make run` (persistent: a directory under the
// user's cache, a well-known port, detached from the command that started it and
// stopped by `orderly dev down`).
//
// This package holds what every stand-in shares: starting a program attached or
// detached with its log and pid file in its directory, finding it running again
// from another process, stopping it, free ports, and the error that says a
// stand-in's program is missing and how to install it. The stand-ins themselves are
// the packages below it (standin/dns, standin/s3, ...).
package standin

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"orderly.dev/orderly/internal/localproc"
)

// MissingError says that the program a stand-in runs is not installed, and what
// installs it.
type MissingError struct {
	// What is missing, e.g. "the DNS server named (Debian's bind9)".
	What string
	// Install is the command a person runs to install it.
	Install string
	// Env names the environment variable that points at another binary, if any.
	Env string
}

func (e *MissingError) Error() string {
	msg := fmt.Sprintf("%s is not installed: install it with `%s`", e.What, e.Install)
	if e.Env != "" {
		msg += fmt.Sprintf(" (or set %s to the binary)", e.Env)
	}
	return msg
}

// FindOrInstall finds a program with find; when it is missing and the caller is
// root on a system with apt-get, it installs Debian's package pkg first (as the
// tests on a fresh machine need). Otherwise the error is a *MissingError.
func FindOrInstall(find func() (string, error), pkg string, missing *MissingError) (string, error) {
	if p, err := find(); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", missing
	}
	if err := localproc.AptInstall(pkg); err != nil {
		return "", fmt.Errorf("installing %s: %w", pkg, err)
	}
	p, err := find()
	if err != nil {
		return "", fmt.Errorf("apt-get installed %s, but: %w", pkg, err)
	}
	return p, nil
}

// LookPath finds name on PATH or at one of the absolute paths given.
func LookPath(name string, also ...string) func() (string, error) {
	return func() (string, error) {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
		for _, p := range also {
			if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
				return p, nil
			}
		}
		return "", fmt.Errorf("%s not found", name)
	}
}

// FreePort returns a port free on 127.0.0.1 for TCP (and UDP too when udp is set).
func FreePort(udp bool) (int, error) {
	for range 20 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		if !udp {
			_ = l.Close()
			return port, nil
		}
		u, err := net.ListenPacket("udp", fmt.Sprintf("127.0.0.1:%d", port))
		_ = l.Close()
		if err == nil {
			_ = u.Close()
			return port, nil
		}
	}
	return 0, errors.New("no port free for both TCP and UDP on 127.0.0.1")
}

// PortFree says whether nothing listens on 127.0.0.1:port (TCP).
func PortFree(port int) bool {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		return false
	}
	_ = l.Close()
	return true
}

// ListenPort is the port a stand-in listens on: want, when nothing listens there
// already, or a free one when want is 0 (udp: free for UDP too). what names the
// program in the error about a taken port.
func ListenPort(want int, udp bool, what string) (int, error) {
	if want == 0 {
		return FreePort(udp)
	}
	if !PortFree(want) {
		return 0, fmt.Errorf("port 127.0.0.1:%d, which %s is to listen on, is taken by another program", want, what)
	}
	return want, nil
}

// Process is one stand-in's program, with its log (NAME.log) and pid file
// (NAME.pid) in Dir.
type Process struct {
	// Name names the files and the program in messages, e.g. "named".
	Name string
	// Dir holds the log and the pid file.
	Dir string
	// Detached runs the program in a session of its own that outlives the process
	// that started it (`orderly dev up`); otherwise it is killed when the starting
	// process ends, however it ends (tests).
	Detached bool

	pid  int
	done chan struct{}
}

// LogFile is the program's standard output and error, every start appended.
func (p *Process) LogFile() string { return filepath.Join(p.Dir, p.Name+".log") }

// PidFile records the running program: its pid and its start time (so that a pid
// reused by another program is never taken for it).
func (p *Process) PidFile() string { return filepath.Join(p.Dir, p.Name+".pid") }

// Pid is the program's process id once started (or found running).
func (p *Process) Pid() int { return p.pid }

// Start runs cmd (its Dir, Env and arguments set by the caller) with its output
// appended to the log, and records its pid.
func (p *Process) Start(cmd *exec.Cmd) error {
	if err := os.MkdirAll(p.Dir, 0o755); err != nil {
		return err
	}
	logFile, err := os.OpenFile(p.LogFile(), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	fmt.Fprintf(logFile, "--- %s: starting %s\n", time.Now().Format(time.RFC3339), strings.Join(cmd.Args, " "))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if p.Detached {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	} else {
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
	}
	localproc.CloseInheritedOnExec()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	p.pid = cmd.Process.Pid
	p.done = make(chan struct{})
	// Waited for even when detached: this reaps it should it exit while this process
	// runs, and tells Exited. Once this process is gone, init adopts a detached one.
	go func() { _ = cmd.Wait(); close(p.done) }()
	start, _ := startTime(p.pid)
	if err := os.WriteFile(p.PidFile(), fmt.Appendf(nil, "%d %d\n", p.pid, start), 0o644); err != nil {
		_ = cmd.Process.Kill()
		return err
	}
	return nil
}

// Exited is closed when the program this Process started has exited; nil for one
// found running (Running).
func (p *Process) Exited() <-chan struct{} { return p.done }

// Running says whether the program recorded in the pid file runs, and remembers its
// pid. A pid file left by a program that is gone (or whose pid another program now
// has) is not running.
func (p *Process) Running() bool {
	pid, start, err := readPidFile(p.PidFile())
	if err != nil || !alive(pid) {
		return false
	}
	if now, err := startTime(pid); err == nil && start != 0 && now != start {
		return false
	}
	p.pid = pid
	return true
}

// Stop stops the program (SIGTERM, then SIGKILL after grace) and removes the pid
// file. Stopping one that does not run is not an error.
func (p *Process) Stop(grace time.Duration) error {
	if p.done == nil && !p.Running() {
		_ = os.Remove(p.PidFile())
		return nil
	}
	if p.pid == 0 {
		return nil
	}
	gone := func() bool {
		if p.done != nil {
			select {
			case <-p.done:
				return true
			default:
				return false
			}
		}
		return !alive(p.pid)
	}
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for !gone() && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if !gone() {
		_ = syscall.Kill(p.pid, syscall.SIGKILL)
		for i := 0; !gone() && i < 100; i++ {
			time.Sleep(50 * time.Millisecond)
		}
	}
	_ = os.Remove(p.PidFile())
	if !gone() {
		return fmt.Errorf("%s (pid %d) did not stop", p.Name, p.pid)
	}
	return nil
}

// LogTail is the end of the program's log, to explain a failure.
func (p *Process) LogTail() string {
	b, err := os.ReadFile(p.LogFile())
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// WaitReady polls ready until it returns nil, the program exits, or timeout passes.
func (p *Process) WaitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.done:
			return fmt.Errorf("%s exited while starting; the end of its log (%s):\n%s", p.Name, p.LogFile(), p.LogTail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s did not become ready within %s (%w); the end of its log (%s):\n%s", p.Name, timeout, err, p.LogFile(), p.LogTail())
		}
	}
}

// StopAll stops every program whose pid file is in dir or in a directory below it.
func StopAll(dir string, grace time.Duration) error {
	var errs []error
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".pid") {
			return nil
		}
		p := &Process{Name: strings.TrimSuffix(filepath.Base(path), ".pid"), Dir: filepath.Dir(path)}
		errs = append(errs, p.Stop(grace))
		return nil
	})
	return errors.Join(errs...)
}

func readPidFile(path string) (pid int, start uint64, err error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, 0, err
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0, 0, fmt.Errorf("%s is empty", path)
	}
	if pid, err = strconv.Atoi(f[0]); err != nil || pid <= 0 {
		return 0, 0, fmt.Errorf("%s: no pid", path)
	}
	if len(f) > 1 {
		start, _ = strconv.ParseUint(f[1], 10, 64)
	}
	return pid, start, nil
}

// alive is true while pid runs (a zombie does not).
func alive(pid int) bool {
	if !localproc.Alive(pid) {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}

// startTime is when pid started, in clock ticks since boot (/proc/PID/stat, field
// 22); 0 where /proc does not tell.
func startTime(pid int) (uint64, error) {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	// After "(comm)": state is field 3; starttime is field 22, so the 20th after comm.
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 20 {
		return 0, errors.New("malformed stat")
	}
	return strconv.ParseUint(f[19], 10, 64)
}

// heartbeat is how often a long build says it is still alive.
const heartbeat = 30 * time.Second

// Announce prints title, then a line every 30 s while the step runs; the returned
// func ends the step, printing how long it took or that it failed.
func Announce(out io.Writer, title string) func(err error) {
	start := time.Now()
	fmt.Fprintf(out, "%s...\n", title)
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(heartbeat)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(out, "  still at it (%s), %s elapsed\n", title, time.Since(start).Round(time.Second))
			case <-stop:
				return
			}
		}
	}()
	return func(err error) {
		close(stop)
		<-done
		if err != nil {
			fmt.Fprintf(out, "  FAILED after %s: %v\n", time.Since(start).Round(time.Second), err)
			return
		}
		fmt.Fprintf(out, "  done in %s\n", time.Since(start).Round(time.Second))
	}
}

// GoBuild runs the go command in dir with extra environment variables, its output
// appended to logPath (kept, to explain a failure), outside any go.work.
func GoBuild(ctx context.Context, dir, logPath string, env []string, args ...string) error {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("building needs the go command on PATH: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(log, "\n$ cd %s && %s go %s\n", dir, strings.Join(env, " "), strings.Join(args, " "))
	cmd := exec.CommandContext(ctx, goBin, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod"), env...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		b, _ := os.ReadFile(logPath)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		return fmt.Errorf("go %s: %w (log: %s)\n%s", strings.Join(args, " "), err, logPath, b)
	}
	return nil
}

// Executable says whether p is an executable file.
func Executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// Lock takes an exclusive flock on path, waiting for it, so that concurrent
// processes build a binary once.
func Lock(path string) (func(), error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR|syscall.O_CLOEXEC, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// BuildOnce returns bin, building it the first time: under a lock beside it, so
// that concurrent processes build it once, with build writing the binary into a
// temporary directory of the same folder and returning its path there, which is then
// renamed to bin (atomic: no half-written binary under its name). title is announced
// on out while it builds.
func BuildOnce(bin string, out io.Writer, title string, build func(tmp string) (string, error)) (string, error) {
	if Executable(bin) {
		return bin, nil
	}
	dir := filepath.Dir(bin)
	unlock, err := Lock(filepath.Join(dir, ".build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if Executable(bin) { // built by another process while this one waited
		return bin, nil
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	done := Announce(out, title)
	built, err := build(tmp)
	if err == nil {
		err = os.Rename(built, bin)
	}
	done(err)
	if err != nil {
		return "", err
	}
	return bin, nil
}
