// Package certmanager runs cert-manager's controller as a local process against a
// cluster (outside it, with a kubeconfig): the newest release whose controller main
// builds from the Go module proxy here, built once into Orderly's cache, and its
// CRDs from the same module. Without its webhook and cainjector, which a local
// cluster does without, it issues Certificates from SelfSigned and CA issuers as it
// does in a cluster. The e2e tests run one for their cluster; `orderly dev up --with
// cert-manager` a persistent one for the local cluster.
package certmanager

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/standin"
)

// Version is the cert-manager whose controller runs.
const Version = "v1.11.5"

// Module is cert-manager's Go module.
const Module = "github.com/cert-manager/cert-manager"

// Path is where the built controller is kept: beside the local cluster's binaries.
func Path() string {
	return filepath.Join(devcluster.CacheDir(), "bin", "cert-manager-"+Version, "controller")
}

// Build returns the controller binary, building it the first time into the cache
// (a few minutes on 2 cores; progress on out). v1.11.5's go.mod replaces
// miekg/dns, so it cannot be `go install`ed: it is built in a small module of its
// own that carries the same replace.
func Build(ctx context.Context, out io.Writer) (string, error) {
	title := fmt.Sprintf("building cert-manager's controller %s (first time only: ~4 min on 2 cores)", Version)
	return standin.BuildOnce(Path(), out, title, func(tmp string) (string, error) {
		src := filepath.Join(devcluster.CacheDir(), "src", "cert-manager-"+Version)
		if err := os.MkdirAll(src, 0o755); err != nil {
			return "", err
		}
		gomod := "module orderly.dev/certmanagerbuild\n\ngo 1.26\n\nreplace github.com/miekg/dns v1.1.41 => github.com/miekg/dns v1.1.34\n"
		if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod), 0o644); err != nil {
			return "", err
		}
		logPath := filepath.Join(devcluster.CacheDir(), "logs", "cert-manager-"+Version+".log")
		if err := standin.GoBuild(ctx, src, logPath, nil, "get", Module+"@"+Version); err != nil {
			return "", err
		}
		built := filepath.Join(tmp, "controller")
		return built, standin.GoBuild(ctx, src, logPath, nil, "build", "-ldflags", "-s -w", "-o", built, Module+"/cmd/controller")
	})
}

// CRDDir returns a directory with cert-manager's CRDs, from the module (downloaded
// through the module proxy the first time) with the Helm template lines that
// v1.11.5's files carry stripped.
func CRDDir(ctx context.Context) (string, error) {
	dir := filepath.Join(devcluster.CacheDir(), "src", "cert-manager-"+Version+"-crds")
	if files, _ := filepath.Glob(filepath.Join(dir, "crd-*.yaml")); len(files) > 0 {
		return dir, nil
	}
	mod, err := moduleDir(ctx, Module+"@"+Version)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(dir), ".crds-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	files, _ := filepath.Glob(filepath.Join(mod, "deploy", "crds", "crd-*.yaml"))
	if len(files) == 0 {
		return "", fmt.Errorf("no CRDs in %s/deploy/crds", mod)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		var kept []string
		for _, line := range strings.Split(string(b), "\n") {
			if !strings.Contains(line, "{{") {
				kept = append(kept, line)
			}
		}
		if err := os.WriteFile(filepath.Join(tmp, filepath.Base(f)), []byte(strings.Join(kept, "\n")), 0o644); err != nil {
			return "", err
		}
	}
	if err := os.Rename(tmp, dir); err != nil && !errors.Is(err, os.ErrExist) {
		if _, serr := os.Stat(dir); serr != nil {
			return "", err
		}
	}
	return dir, nil
}

// CRDs are cert-manager's CRDs, one YAML stream each (see CRDDir).
func CRDs(ctx context.Context) ([][]byte, error) {
	dir, err := CRDDir(ctx)
	if err != nil {
		return nil, err
	}
	files, _ := filepath.Glob(filepath.Join(dir, "crd-*.yaml"))
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// moduleDir downloads a module (outside any module) and returns its directory.
func moduleDir(ctx context.Context, module string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "orderly-module-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", module)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var dl struct{ Dir, Error string }
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return "", fmt.Errorf("downloading %s: %s", module, dl.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", module, err)
	}
	return dl.Dir, nil
}

// Options say which controller Run runs.
type Options struct {
	// Kubeconfig is the cluster's (an administrator's: the controller reads and
	// writes Certificates, CertificateRequests, Orders and Secrets everywhere).
	Kubeconfig string
	// Namespace is the controller's --cluster-resource-namespace: where a
	// ClusterIssuer's Secrets are.
	Namespace string
	// Dir holds the log and pid file.
	Dir string
	// MetricsPort is the port of its metrics on 127.0.0.1; 0 picks a free one.
	MetricsPort int
	// Detached leaves the controller running after this process ends (orderly dev
	// up); the next Run finds it again in Dir.
	Detached bool
}

// Controller is a running cert-manager controller.
type Controller struct {
	// MetricsURL is its Prometheus endpoint.
	MetricsURL string

	proc *standin.Process
}

// Run starts the controller (building it first if needed), or finds the one a
// previous Run left running in o.Dir, and returns once its metrics answer. The CRDs
// must be installed first.
func Run(ctx context.Context, o Options) (*Controller, error) {
	bin, err := Build(ctx, os.Stderr)
	if err != nil {
		return nil, err
	}
	c := &Controller{proc: &standin.Process{Name: "cert-manager", Dir: o.Dir, Detached: o.Detached}}
	portPath := filepath.Join(o.Dir, "metrics-port")
	if c.proc.Running() {
		b, _ := os.ReadFile(portPath)
		c.MetricsURL = "http://127.0.0.1:" + strings.TrimSpace(string(b)) + "/metrics"
		if c.proc.WaitReady(5*time.Second, c.answers) == nil {
			return c, nil
		}
		if err := c.proc.Stop(10 * time.Second); err != nil {
			return nil, err
		}
	}
	port := o.MetricsPort
	if port == 0 {
		if port, err = standin.FreePort(false); err != nil {
			return nil, err
		}
	} else if !standin.PortFree(port) {
		return nil, fmt.Errorf("port 127.0.0.1:%d, which cert-manager's metrics are to listen on, is taken by another program", port)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(portPath, fmt.Appendf(nil, "%d\n", port), 0o644); err != nil {
		return nil, err
	}
	c.MetricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", port)
	cmd := exec.Command(bin,
		"--kubeconfig", o.Kubeconfig,
		"--leader-elect=false",
		"--cluster-resource-namespace", o.Namespace,
		"--metrics-listen-address", fmt.Sprintf("127.0.0.1:%d", port),
		"--enable-certificate-owner-ref",
		"--v=2",
	)
	if err := c.proc.Start(cmd); err != nil {
		return nil, err
	}
	if err := c.proc.WaitReady(60*time.Second, c.answers); err != nil {
		_ = c.proc.Stop(5 * time.Second)
		return nil, err
	}
	return c, nil
}

func (c *Controller) answers() error {
	resp, err := http.Get(c.MetricsURL) //nolint:noctx // bounded by WaitReady
	if err != nil {
		return err
	}
	_ = resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

// Pid is the controller's process id.
func (c *Controller) Pid() int { return c.proc.Pid() }

// LogFile is the controller's log.
func (c *Controller) LogFile() string { return c.proc.LogFile() }

// Stop stops the controller.
func (c *Controller) Stop() error { return c.proc.Stop(10 * time.Second) }
