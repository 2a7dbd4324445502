package localproc

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
)

// A directory is an orphan only when its owner file names a process that is gone.
func TestOrphans(t *testing.T) {
	t.Setenv("TMPDIR", t.TempDir())
	mine, err := MkdirOwned("orderly-localproc-")
	if err != nil {
		t.Fatal(err)
	}
	dead := exec.Command("true")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	orphan, err := os.MkdirTemp("", "orderly-localproc-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(orphan, ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	unowned, err := os.MkdirTemp("", "orderly-localproc-")
	if err != nil {
		t.Fatal(err)
	}
	other, err := os.MkdirTemp("", "someone-else-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, ownerFile), []byte(strconv.Itoa(dead.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}

	got := Orphans("orderly-localproc-")
	if !slices.Equal(got, []string{orphan}) {
		t.Errorf("Orphans = %v, want only %s (not this process's %s, nor the unowned %s)", got, orphan, mine, unowned)
	}
	if !Alive(os.Getpid()) || Alive(dead.Process.Pid) {
		t.Errorf("Alive(self) = %v, Alive(reaped child) = %v", Alive(os.Getpid()), Alive(dead.Process.Pid))
	}
}
