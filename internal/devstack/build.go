package devstack

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/standin"
	"orderly.dev/orderly/internal/standin/certmanager"
	"orderly.dev/orderly/internal/standin/versitygw"
)

// Build builds (or finds in the cache) the local cluster's binaries and the
// stand-ins that are built from source (versitygw, cert-manager's controller), the
// stand-ins beside the cluster's build rather than after it: on a fresh machine the
// Kubernetes build is the longest step, and the others overlap its downloads and
// links. A stand-in that fails to build is reported and does not fail the cluster's
// build: `orderly dev up` says what stays not Ready without it.
func Build(ctx context.Context, out io.Writer) (*devcluster.Binaries, error) {
	if out == nil {
		out = io.Discard
	}
	w := &syncWriter{w: out}
	var (
		wg       sync.WaitGroup
		bins     *devcluster.Binaries
		binsErr  error
		mu       sync.Mutex
		standins []error
	)
	wg.Go(func() { bins, binsErr = devcluster.EnsureBinaries(ctx, w) })
	for _, build := range []func(context.Context, io.Writer) (string, error){versitygw.Build, certmanager.Build} {
		wg.Go(func() {
			if _, err := build(ctx, w); err != nil {
				mu.Lock()
				standins = append(standins, err)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if binsErr != nil {
		return nil, binsErr
	}
	if err := errors.Join(standins...); err != nil {
		fmt.Fprintf(out, "a stand-in did not build (orderly dev up reports what stays not Ready without it): %v\n", err)
	}
	return bins, ctx.Err()
}

// Status describes the stand-ins of the named cluster: one line per program, whether
// it runs.
func Status(cluster string) []string {
	dir := StateDir(cluster)
	var lines []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".pid") {
			return nil
		}
		p := &standin.Process{Name: strings.TrimSuffix(filepath.Base(path), ".pid"), Dir: filepath.Dir(path)}
		rel, _ := filepath.Rel(dir, filepath.Dir(path))
		if p.Running() {
			lines = append(lines, fmt.Sprintf("%s (%s) runs, pid %d, log %s", p.Name, rel, p.Pid(), p.LogFile()))
		} else {
			lines = append(lines, fmt.Sprintf("%s (%s) does not run; its log: %s (orderly dev up --with %s starts it again)", p.Name, rel, p.LogFile(), rel))
		}
		return nil
	})
	if st, err := readState(dir); err == nil && st.MemberCluster != "" {
		lines = append(lines, "member cluster "+st.MemberCluster+" (orderly dev status --name "+st.MemberCluster+")")
	}
	sort.Strings(lines)
	return lines
}
