package devcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// components are the processes of a local cluster, by the names StopComponent takes:
// those of kwokctl's binary runtime, which are also the names of their binaries, pid
// files and logs in the cluster's directory.
var components = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok-controller"}

// componentStopTimeout bounds the wait for a killed process to be gone.
const componentStopTimeout = 30 * time.Second

// StopComponent kills one process of the named local cluster (one of components)
// with SIGKILL, as a crash would, and returns once it has exited; StartStopped starts
// it again. Tests use it to see Orderly through an API server restart. A component
// that does not run is not an error.
func StopComponent(ctx context.Context, name, component string) error {
	name = nameOrDefault(name)
	if err := validateName(name); err != nil {
		return err
	}
	if !slices.Contains(components, component) {
		return fmt.Errorf("unknown component %q of a local cluster; known: %s", component, strings.Join(components, ", "))
	}
	dir := clusterDir(CacheDir(), name)
	if _, err := os.Stat(filepath.Join(dir, "kwok.yaml")); err != nil {
		return fmt.Errorf("cluster %q does not exist: %w", name, err)
	}
	// kwokctl records the pid of each process it starts here, and takes a process
	// whose pid file is gone as stopped (its own `stop cluster` removes the file).
	pidFile := filepath.Join(dir, "pids", component+".pid")
	raw, err := os.ReadFile(pidFile)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(raw)))
	if err != nil || pid <= 0 {
		return fmt.Errorf("pid file %s holds %q, not a process id", pidFile, raw)
	}
	// A pid file outlives its process (a reboot, a crash), and the id may have been
	// given to another process since: kill only the cluster's own binary.
	binary := filepath.Join(dir, "bin", component)
	running, err := processRuns(pid, binary)
	if err != nil {
		return err
	}
	if running {
		if err := killProcess(pid); err != nil {
			return fmt.Errorf("killing %s of cluster %q (pid %d): %w", component, name, pid, err)
		}
		err := poll(ctx, componentStopTimeout, fmt.Sprintf("%s (pid %d) to exit", component, pid), func(context.Context) (bool, string, error) {
			gone, err := processGone(pid)
			return gone, "still running", err
		})
		if err != nil {
			return err
		}
	}
	// A killed process whose parent does not reap it (kwokctl's processes are
	// reparented to init, which in a container may be anything) stays a zombie under
	// its pid, and kwokctl would take it as running and never start it again.
	if err := os.Remove(pidFile); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// StartStopped starts the processes of the named cluster that do not run (one that
// StopComponent stopped, one that exited, or all of them after a reboot), leaves the
// running ones alone, and waits until the API server is ready again.
func StartStopped(ctx context.Context, name string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	name = nameOrDefault(name)
	if err := validateName(name); err != nil {
		return err
	}
	root := CacheDir()
	bins := binariesIn(root)
	if _, err := os.Stat(filepath.Join(clusterDir(root, name), "kwok.yaml")); err != nil {
		return fmt.Errorf("cluster %q does not exist: %w", name, err)
	}
	start := time.Now()
	k := kwokctlRunner{root: root, bins: bins}
	if _, err := k.run(ctx, "start", "cluster", "--name", name, "--timeout", "2m"); err != nil {
		return err
	}
	cfg, err := restConfig(KubeconfigPath(name))
	if err != nil {
		return err
	}
	if err := waitAPIServerReady(ctx, cfg, 2*time.Minute); err != nil {
		return err
	}
	fmt.Fprintf(out, "cluster %q: stopped components started, API server ready after %s\n", name, time.Since(start).Round(100*time.Millisecond))
	return nil
}
