package tests3

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"orderly.dev/orderly/internal/devcluster"
)

// Version is the versitygw release the tests run. It keys the binary's cache
// directory, so changing it builds the new one once and keeps the old one apart.
const Version = "v1.8.0"

// Package is versitygw's main package.
const Package = "github.com/versity/versitygw/cmd/versitygw"

// BinaryEnv names a versitygw binary to use instead of building one.
const BinaryEnv = "ORDERLY_VERSITYGW"

// Binary returns the path of versitygw Version, building it from the Go module
// proxy into Orderly's cache (beside the Kubernetes binaries, see
// devcluster.CacheDir) the first time: about 3 minutes on 2 cores. A lock makes
// concurrent test processes build it once.
func Binary(ctx context.Context) (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	dir := filepath.Join(devcluster.CacheDir(), "bin", "versitygw-"+Version)
	bin := filepath.Join(dir, "versitygw")
	if executable(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(dir, ".build.lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if executable(bin) { // built by another process while this one waited
		return bin, nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("building versitygw needs the go command on PATH: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	start := time.Now()
	fmt.Fprintf(os.Stderr, "tests3: building versitygw %s (first time only: ~3 min on 2 cores)\n", Version)
	// versitygw's go.mod has no replace directives, so go install pkg@version works.
	cmd := exec.CommandContext(ctx, goBin, "install", "-ldflags", "-s -w", Package+"@"+Version)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOFLAGS=-mod=mod", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", Package, Version, err, tail(out, 4000))
	}
	// A rename within a directory is atomic: no half-written binary under its name.
	if err := os.Rename(filepath.Join(tmp, "versitygw"), bin); err != nil {
		return "", err
	}
	fmt.Fprintf(os.Stderr, "tests3: built versitygw %s in %s\n", Version, time.Since(start).Round(time.Second))
	return bin, nil
}

func executable(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0
}

// lock takes an exclusive flock on path, waiting for it.
func lock(path string) (func(), error) {
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

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
