//go:build unix

package devcluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"syscall"
)

// lockFile takes an exclusive lock on path, so that two processes (two terminals, or
// parallel test packages) do not do the same thing at once: build the same binaries
// on a machine that has only a few cores, or create clusters that pick the same
// ports. holder says what the other process is doing while this one waits. The lock
// dies with the process.
func lockFile(path, holder string, out io.Writer) (unlock func(), err error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		fmt.Fprintf(out, "waiting for another orderly process that is %s (lock %s)...\n", holder, path)
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX)
	}
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		_ = f.Close()
	}, nil
}
