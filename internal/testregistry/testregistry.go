// Package testregistry starts a throwaway OCI registry for tests: Debian's
// docker-registry (the CNCF distribution registry) on a free loopback port, with
// its storage in a temporary directory. When it is missing it is installed (as root,
// with apt-get) or the caller gets an error that says how; tests never skip for
// lack of it.
package testregistry

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"golang.org/x/crypto/bcrypt"

	"orderly.dev/orderly/internal/localproc"
)

// BinEnv names a registry binary to use instead of docker-registry on PATH.
const BinEnv = "ORDERLY_REGISTRY_BIN"

// InstallCommand is what a person runs to install the registry.
const InstallCommand = "sudo apt-get install -y docker-registry"

// Binary finds the registry binary; as root on a system with apt-get it installs
// Debian's package when it is missing.
func Binary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("docker-registry"); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("the tests need an OCI registry: install it with `%s` (or set %s to a registry binary)", InstallCommand, BinEnv)
	}
	if err := localproc.AptInstall("docker-registry"); err != nil {
		return "", fmt.Errorf("installing the registry: %w", err)
	}
	return exec.LookPath("docker-registry")
}

// Registry is a running throwaway registry, plain HTTP on loopback, without auth
// unless started with StartWithAuth.
type Registry struct {
	// Host is its address, 127.0.0.1:PORT: image references start with it.
	Host string
	// Dir holds its configuration, storage and log.
	Dir string

	cmd  *exec.Cmd
	done chan struct{}
}

// Start starts a registry and returns once it answers. Call Close to stop it and
// remove its files.
func Start() (*Registry, error) {
	return start("", "")
}

// StartWithAuth starts a registry that serves only user with password (HTTP basic
// auth checked against an htpasswd file, as a registry behind a login is set up).
func StartWithAuth(user, password string) (*Registry, error) {
	if user == "" || strings.Contains(user, ":") {
		return nil, fmt.Errorf("registry user %q must be non-empty and without ':'", user)
	}
	hash, err := bcrypt.GenerateFromPassword([]byte(password), bcrypt.MinCost)
	if err != nil {
		return nil, err
	}
	return start(user, user+":"+string(hash)+"\n")
}

func start(user, htpasswd string) (*Registry, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orderly-testregistry-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	host := l.Addr().String()
	_ = l.Close()
	config := fmt.Sprintf(`version: 0.1
log:
  level: warn
storage:
  filesystem:
    rootdirectory: %s
  delete:
    enabled: true
http:
  addr: %s
`, filepath.Join(dir, "data"), host)
	if htpasswd != "" {
		path := filepath.Join(dir, "htpasswd")
		if err := os.WriteFile(path, []byte(htpasswd), 0o600); err != nil {
			_ = os.RemoveAll(dir)
			return nil, err
		}
		config += fmt.Sprintf("auth:\n  htpasswd:\n    realm: orderly-test\n    path: %s\n", path)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.yml"), []byte(config), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	logFile, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	defer logFile.Close()
	cmd := exec.Command(bin, "serve", filepath.Join(dir, "config.yml"))
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// The registry goes with the test process, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, fmt.Errorf("starting %s: %w", bin, err)
	}
	r := &Registry{Host: host, Dir: dir, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(r.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		// The distribution API's base endpoint answers 200 once the registry serves
		// (401 when it wants a password).
		if resp, err := http.Get("http://" + host + "/v2/"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK || (user != "" && resp.StatusCode == http.StatusUnauthorized) {
				return r, nil
			}
		}
		select {
		case <-r.done:
			log := r.log()
			_ = os.RemoveAll(dir)
			return nil, fmt.Errorf("the registry exited while starting; its log:\n%s", log)
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			log := r.log()
			r.Close()
			return nil, errors.New("the registry did not answer within 30s; its log:\n" + log)
		}
	}
}

func (r *Registry) log() string {
	b, _ := os.ReadFile(filepath.Join(r.Dir, "registry.log"))
	return string(b)
}

// Close stops the registry and removes its files.
func (r *Registry) Close() {
	_ = r.cmd.Process.Kill()
	<-r.done
	_ = os.RemoveAll(r.Dir)
}
