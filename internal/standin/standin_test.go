package standin

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A detached program is found running by another Process on the same directory (as
// `orderly dev down` finds what `orderly dev up` started), and stopped by it.
func TestDetachedFoundAndStopped(t *testing.T) {
	dir := t.TempDir()
	p := &Process{Name: "sleeper", Dir: dir, Detached: true}
	if err := p.Start(exec.Command("sleep", "60")); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Stop(time.Second) })
	other := &Process{Name: "sleeper", Dir: dir}
	if !other.Running() || other.Pid() != p.Pid() {
		t.Fatalf("not found running: pid %d, want %d", other.Pid(), p.Pid())
	}
	if err := other.Stop(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(5 * time.Second):
		t.Fatal("the program still runs after Stop")
	}
	if _, err := os.Stat(p.PidFile()); !os.IsNotExist(err) {
		t.Errorf("the pid file is left: %v", err)
	}
	if other.Running() {
		t.Error("running after Stop")
	}
}

// A pid file whose pid now belongs to another program (another start time) is not
// taken for the stand-in, and Stop leaves that program alone.
func TestReusedPidIsNotOurs(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	p := &Process{Name: "other", Dir: dir}
	if err := os.WriteFile(p.PidFile(), fmt.Appendf(nil, "%d 1\n", cmd.Process.Pid), 0o644); err != nil {
		t.Fatal(err)
	}
	if p.Running() {
		t.Fatal("a pid with another start time was taken for the stand-in")
	}
	if err := StopAll(dir, time.Second); err != nil {
		t.Fatal(err)
	}
	if !alive(cmd.Process.Pid) {
		t.Fatal("StopAll killed a program that is not the stand-in")
	}
}

// An attached program that exits while starting is reported with its log.
func TestWaitReadyReportsExit(t *testing.T) {
	p := &Process{Name: "failing", Dir: t.TempDir()}
	if err := p.Start(exec.Command("sh", "-c", "echo broken config >&2; exit 3")); err != nil {
		t.Fatal(err)
	}
	err := p.WaitReady(10*time.Second, func() error { return fmt.Errorf("not yet") })
	if err == nil || !strings.Contains(err.Error(), "exited while starting") || !strings.Contains(err.Error(), "broken config") {
		t.Fatalf("err = %v", err)
	}
}

// BuildOnce builds into a temporary directory and renames the result; a second call
// finds it built, and a failed build leaves nothing under the binary's name.
func TestBuildOnce(t *testing.T) {
	bin := filepath.Join(t.TempDir(), "tool")
	builds := 0
	build := func(tmp string) (string, error) {
		builds++
		p := filepath.Join(tmp, "tool")
		return p, os.WriteFile(p, []byte("#!/bin/sh\n"), 0o755)
	}
	for range 2 {
		got, err := BuildOnce(bin, io.Discard, "building tool", build)
		if err != nil || got != bin || !Executable(bin) {
			t.Fatalf("BuildOnce = %q, %v; executable %v", got, err, Executable(bin))
		}
	}
	if builds != 1 {
		t.Errorf("built %d times, want once", builds)
	}
	failed := filepath.Join(filepath.Dir(bin), "broken")
	_, err := BuildOnce(failed, io.Discard, "building broken", func(tmp string) (string, error) {
		p := filepath.Join(tmp, "broken")
		_ = os.WriteFile(p, []byte("half"), 0o755)
		return p, errors.New("compiler said no")
	})
	if err == nil || Executable(failed) {
		t.Errorf("a failed build: err %v, executable left %v", err, Executable(failed))
	}
	if left, _ := filepath.Glob(filepath.Join(filepath.Dir(bin), ".build-*")); len(left) > 0 {
		t.Errorf("temporary directories left: %v", left)
	}
}
