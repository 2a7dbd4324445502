// Package registry runs an OCI registry on loopback: Debian's docker-registry (the
// CNCF distribution registry), plain HTTP, with its storage in a directory of its
// own. The tests start a throwaway one (Start: a free port, a temporary directory);
// `orderly dev up --with images` a persistent one (Run with a directory and a port).
// When it is missing it is installed (as root, with apt-get) or the caller gets a
// *standin.MissingError that says how.
package registry

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"golang.org/x/crypto/bcrypt"

	"orderly.dev/orderly/internal/standin"
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
	return standin.FindOrInstall(standin.LookPath("docker-registry"), "docker-registry",
		&standin.MissingError{What: "an OCI registry (Debian's docker-registry)", Install: InstallCommand, Env: BinEnv})
}

// Registry is a running registry, plain HTTP on loopback, without auth unless
// started with StartWithAuth.
type Registry struct {
	// Host is its address, 127.0.0.1:PORT: image references start with it.
	Host string
	// Dir holds its configuration, storage and log.
	Dir string

	proc    *standin.Process
	tempDir bool
}

// Options say which registry Run runs.
type Options struct {
	// Dir holds the configuration, storage and log. Empty: a new temporary
	// directory, removed by Close.
	Dir string
	// Port on 127.0.0.1; 0 picks a free one.
	Port int
	// User and Password, when set, are the only login it serves (HTTP basic auth
	// checked against an htpasswd file, as a registry behind a login is set up).
	User, Password string
	// Detached leaves the registry running after this process ends (orderly dev
	// up); the next Run finds it again in Dir.
	Detached bool
}

// Start starts a throwaway registry and returns once it answers. Call Close to stop
// it and remove its files.
func Start() (*Registry, error) {
	return Run(Options{})
}

// StartWithAuth starts a throwaway registry that serves only user with password.
func StartWithAuth(user, password string) (*Registry, error) {
	if user == "" || strings.Contains(user, ":") {
		return nil, fmt.Errorf("registry user %q must be non-empty and without ':'", user)
	}
	return Run(Options{User: user, Password: password})
}

// Run starts a registry as o says, or finds the one a previous Run left running in
// o.Dir on the same port, and returns once it answers. A persistent registry keeps
// its images.
func Run(o Options) (*Registry, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	r := &Registry{Dir: o.Dir}
	if r.Dir == "" {
		if r.Dir, err = os.MkdirTemp("", "orderly-testregistry-"); err != nil {
			return nil, err
		}
		r.tempDir = true
	} else if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		return nil, err
	}
	r.proc = &standin.Process{Name: "registry", Dir: r.Dir, Detached: o.Detached}
	if err := r.start(bin, o); err != nil {
		if r.tempDir {
			_ = os.RemoveAll(r.Dir)
		}
		return nil, err
	}
	return r, nil
}

func (r *Registry) start(bin string, o Options) error {
	hostPath := filepath.Join(r.Dir, "host")
	if r.proc.Running() {
		b, _ := os.ReadFile(hostPath)
		host := strings.TrimSpace(string(b))
		if host != "" && (o.Port == 0 || host == fmt.Sprintf("127.0.0.1:%d", o.Port)) {
			r.Host = host
			if r.proc.WaitReady(5*time.Second, r.answers(o.User)) == nil {
				return nil
			}
		}
		if err := r.proc.Stop(10 * time.Second); err != nil {
			return err
		}
	}
	port, err := standin.ListenPort(o.Port, false, "the registry")
	if err != nil {
		return err
	}
	r.Host = fmt.Sprintf("127.0.0.1:%d", port)
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
`, filepath.Join(r.Dir, "data"), r.Host)
	if o.User != "" {
		hash, err := bcrypt.GenerateFromPassword([]byte(o.Password), bcrypt.MinCost)
		if err != nil {
			return err
		}
		path := filepath.Join(r.Dir, "htpasswd")
		if err := os.WriteFile(path, []byte(o.User+":"+string(hash)+"\n"), 0o600); err != nil {
			return err
		}
		config += fmt.Sprintf("auth:\n  htpasswd:\n    realm: orderly-test\n    path: %s\n", path)
	}
	if err := os.WriteFile(filepath.Join(r.Dir, "config.yml"), []byte(config), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(hostPath, []byte(r.Host+"\n"), 0o600); err != nil {
		return err
	}
	if err := r.proc.Start(exec.Command(bin, "serve", filepath.Join(r.Dir, "config.yml"))); err != nil {
		return err
	}
	if err := r.proc.WaitReady(30*time.Second, r.answers(o.User)); err != nil {
		_ = r.proc.Stop(5 * time.Second)
		return err
	}
	return nil
}

// answers checks the distribution API's base endpoint: 200 once the registry
// serves (401 when it wants a password).
func (r *Registry) answers(user string) func() error {
	return func() error {
		resp, err := http.Get("http://" + r.Host + "/v2/") //nolint:noctx // bounded by WaitReady
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode == http.StatusOK || (user != "" && resp.StatusCode == http.StatusUnauthorized) {
			return nil
		}
		return errors.New("/v2/: " + resp.Status)
	}
}

// Pid is the registry's process id.
func (r *Registry) Pid() int { return r.proc.Pid() }

// Stop stops the registry and keeps its files.
func (r *Registry) Stop() error { return r.proc.Stop(10 * time.Second) }

// Close stops the registry, and removes its files when they are in a temporary
// directory.
func (r *Registry) Close() {
	_ = r.proc.Stop(5 * time.Second)
	if r.tempDir {
		_ = os.RemoveAll(r.Dir)
	}
}
