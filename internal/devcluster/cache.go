// Package devcluster builds and runs a real local Kubernetes control plane without a
// container runtime: every binary is compiled from source fetched through the Go
// module proxy, cached by version, and started by kwokctl's binary runtime with
// simulated (kwok) nodes.
package devcluster

import (
	"os"
	"path/filepath"
)

// Versions of the components of the local control plane. Each one keys a directory of
// the binary cache, so changing a version builds it once and keeps the old one apart.
const (
	KubernetesVersion = "v1.37.2"
	EtcdVersion       = "v3.6.5"
	KwokVersion       = "v0.8.0"
)

// CacheDirEnv overrides the cache root.
const CacheDirEnv = "ORDERLY_CACHE_DIR"

// CacheDir returns the root of Orderly's cache: $ORDERLY_CACHE_DIR if set, else the
// user's cache directory followed by "orderly". The path is absolute, because it ends
// up in symlinks and in the configuration of processes that run elsewhere.
func CacheDir() string {
	return cacheDirFrom(os.Getenv, os.UserCacheDir)
}

func cacheDirFrom(getenv func(string) string, userCacheDir func() (string, error)) string {
	dir := getenv(CacheDirEnv)
	if dir == "" {
		base, err := userCacheDir()
		if err != nil || base == "" {
			// No HOME (e.g. a bare CI container): a cache that does not survive a reboot
			// still beats failing.
			base = os.TempDir()
		}
		dir = filepath.Join(base, "orderly")
	}
	if abs, err := filepath.Abs(dir); err == nil {
		dir = abs
	}
	return filepath.Clean(dir)
}

// Layout of the cache root.
func binRoot(root string) string { return filepath.Join(root, "bin") }

func kubernetesBinDir(root string) string {
	return filepath.Join(binRoot(root), "kubernetes-"+KubernetesVersion)
}

func etcdBinDir(root string) string {
	return filepath.Join(binRoot(root), "etcd-"+EtcdVersion)
}

func kwokBinDir(root string) string {
	return filepath.Join(binRoot(root), "kwok-"+KwokVersion)
}

func srcDir(root, name string) string { return filepath.Join(root, "src", name) }

func logPath(root, name string) string { return filepath.Join(root, "logs", name+".log") }

// kwokWorkDir keeps kwokctl's clusters (pki, etcd data, logs, kubeconfig) next to the
// binaries rather than in ~/.kwok, so removing the cache removes everything.
func kwokWorkDir(root string) string { return filepath.Join(root, "kwok") }

func envtestDir(root string) string {
	return filepath.Join(root, "envtest", "kubernetes-"+KubernetesVersion+"-etcd-"+EtcdVersion)
}
