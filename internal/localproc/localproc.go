// Package localproc is what Orderly's tooling and tests need to run real programs
// on the local machine (PostgreSQL, MariaDB, Prometheus, a registry, an S3 gateway):
// installing the Debian package that provides one, keeping the caller's inherited
// descriptors out of it, and finding the throwaway directories that a test process
// which died without cleaning up left behind.
package localproc

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

var (
	aptMu   sync.Mutex
	aptDone = map[string]error{}
)

// AptInstall installs the Debian package pkg with apt-get (update, then install
// without recommends), once per process: a later call returns the first result.
// Calls are serialised, as apt-get itself would be by its lock.
func AptInstall(pkg string) error {
	aptMu.Lock()
	defer aptMu.Unlock()
	if err, ok := aptDone[pkg]; ok {
		return err
	}
	var err error
	for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", pkg}} {
		cmd := exec.Command("apt-get", args...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, cerr := cmd.CombinedOutput(); cerr != nil {
			err = fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), cerr, out)
			break
		}
	}
	aptDone[pkg] = err
	return err
}

// CloseInheritedOnExec marks every descriptor above stderr close-on-exec. Go opens
// its own that way, but one this process inherited (the lock `flock CMD` holds for
// the command, say) would otherwise pass to a child, and through a child that
// detaches (pg_ctl's server) outlive this process and hold the lock long after.
func CloseInheritedOnExec() {
	entries, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return // not Linux: nothing to do that is portable
	}
	for _, e := range entries {
		if fd, err := strconv.Atoi(e.Name()); err == nil && fd > 2 {
			syscall.CloseOnExec(fd)
		}
	}
}

// ownerFile, in a throwaway directory, holds the pid of the process that made it.
const ownerFile = "owner.pid"

// MkdirOwned makes a new directory under the temporary directory, named prefix and
// a random suffix, and records this process as its owner, so that Orphans finds it
// should this process die without removing it.
func MkdirOwned(prefix string) (string, error) {
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	return dir, nil
}

// Orphans lists the directories MkdirOwned made with prefix whose owner process no
// longer exists. A directory without an owner file (another program's, or one being
// made) is never listed, nor one whose owner may still run.
func Orphans(prefix string) []string {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), prefix+"*"))
	var out []string
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || Alive(pid) {
			continue
		}
		out = append(out, dir)
	}
	return out
}

// Alive is true unless the process pid is known not to exist (a zombie counts as
// alive until reaped).
func Alive(pid int) bool {
	return !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
}
