package devcluster

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// EnsureEnvtestAssets returns a directory holding etcd, kube-apiserver and kubectl
// (symlinks), suitable as KUBEBUILDER_ASSETS for controller-runtime envtest. Only
// those three binaries are built if missing; progress goes to out.
func EnsureEnvtestAssets(ctx context.Context, out io.Writer) (string, error) {
	b := newBuilder(out)
	defer b.close()
	if err := b.ensureKubernetes(ctx, []string{kubeAPIServer, kubectl}); err != nil {
		return "", err
	}
	if err := b.ensureEtcd(ctx); err != nil {
		return "", err
	}
	bins := binariesIn(b.root)
	dir := envtestDir(b.root)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	links := map[string]string{
		"etcd":        bins.Etcd,
		kubeAPIServer: bins.KubeAPIServer,
		kubectl:       bins.Kubectl,
	}
	for name, target := range links {
		if err := ensureSymlink(target, filepath.Join(dir, name)); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// ensureSymlink makes link point at target, replacing it atomically if it points
// elsewhere, so a concurrent reader never sees it missing.
func ensureSymlink(target, link string) error {
	if cur, err := os.Readlink(link); err == nil && cur == target {
		return nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", link, os.Getpid())
	_ = os.Remove(tmp)
	if err := os.Symlink(target, tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, link); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}
