//go:build linux

package devcluster

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestZombie(t *testing.T) {
	tests := []struct {
		stat string
		want bool
	}{
		{"4242 (kube-apiserver) S 1 4242 4242 0 -1", false},
		{"4242 (kube-apiserver) Z 1 4242 4242 0 -1", true},
		{"4242 (odd) name (Z) R 1 4242", false},
		{"4242 (odd) name) Z 1 4242", true},
		{"garbage", false},
	}
	for _, tt := range tests {
		if got := zombie([]byte(tt.stat)); got != tt.want {
			t.Errorf("zombie(%q) = %v, want %v", tt.stat, got, tt.want)
		}
	}
}

// fakeCluster makes a cluster directory as kwokctl lays it out, under a cache of the
// test's own, with bin/kube-apiserver a link to sleep.
func fakeCluster(t *testing.T, name string) (dir, apiserver string) {
	t.Helper()
	t.Setenv(CacheDirEnv, t.TempDir())
	dir = clusterDir(CacheDir(), name)
	for _, sub := range []string{"bin", "pids"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "kwok.yaml"), []byte("kind: KwokctlConfiguration\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary")
	}
	apiserver = filepath.Join(dir, "bin", "kube-apiserver")
	if err := os.Symlink(sleep, apiserver); err != nil {
		t.Fatal(err)
	}
	return dir, apiserver
}

// startProcess starts bin as a child that is not waited for until the test ends, so
// that once killed it stays a zombie, like a component whose parent does not reap it.
func startProcess(t *testing.T, bin string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(bin, "300")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	// Until the child has exec'd, /proc shows the test binary's command line, and
	// StopComponent rightly takes the pid for another program's (this raced on a
	// loaded machine): wait for the exec, as kwokctl's pid file is only written then.
	cmdline := filepath.Join("/proc", strconv.Itoa(cmd.Process.Pid), "cmdline")
	for deadline := time.Now().Add(10 * time.Second); ; {
		raw, err := os.ReadFile(cmdline)
		if err == nil && strings.HasPrefix(string(raw), bin+"\x00") {
			return cmd
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s did not exec within 10s (cmdline %q, %v)", bin, raw, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func writePid(t *testing.T, dir string, pid int) string {
	t.Helper()
	path := filepath.Join(dir, "pids", "kube-apiserver.pid")
	if err := os.WriteFile(path, []byte(strconv.Itoa(pid)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestStopComponentKillsItAndForgetsItsPid(t *testing.T) {
	dir, apiserver := fakeCluster(t, "stop-me")
	cmd := startProcess(t, apiserver)
	pidFile := writePid(t, dir, cmd.Process.Pid)

	if err := StopComponent(context.Background(), "stop-me", "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	// Not reaped yet (a zombie), yet StopComponent saw that it had exited.
	if gone, err := processGone(cmd.Process.Pid); !gone || err != nil {
		t.Errorf("processGone = %v, %v after StopComponent", gone, err)
	}
	err := cmd.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("the process ended with %v, want killed by SIGKILL", err)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("pid file still there (%v): kwokctl would take a zombie for a running component", err)
	}
	// Stopping a stopped component is not an error.
	if err := StopComponent(context.Background(), "stop-me", "kube-apiserver"); err != nil {
		t.Errorf("second StopComponent: %v", err)
	}
}

func TestStopComponentLeavesAnotherProcessWithItsPidAlone(t *testing.T) {
	dir, _ := fakeCluster(t, "reused-pid")
	sleep, _ := exec.LookPath("sleep")
	other := startProcess(t, sleep) // not the cluster's binary
	pidFile := writePid(t, dir, other.Process.Pid)

	if err := StopComponent(context.Background(), "reused-pid", "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	if gone, _ := processGone(other.Process.Pid); gone {
		t.Errorf("StopComponent killed pid %d, which runs something else than the cluster's kube-apiserver", other.Process.Pid)
	}
	if _, err := os.Stat(pidFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a pid file naming another process was kept: %v", err)
	}
}

func TestStopComponentRefuses(t *testing.T) {
	fakeCluster(t, "there")
	tests := []struct {
		name, cluster, component, wantErr string
	}{
		{"unknown component", "there", "kubelet", `unknown component "kubelet"`},
		{"missing cluster", "not-there", "kube-apiserver", `cluster "not-there" does not exist`},
		{"bad name", "Not_A_Name", "kube-apiserver", "must be lower-case"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := StopComponent(context.Background(), tt.cluster, tt.component)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}
