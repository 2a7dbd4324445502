// Package testprom starts a throwaway Prometheus server for tests: Debian's
// prometheus package, on a free loopback port, with a generated configuration and its
// data in a temporary directory. When Prometheus is missing it is installed (as root,
// with apt-get) or the caller gets an error that says how to install it; tests never
// skip for lack of it.
package testprom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"orderly.dev/orderly/internal/localproc"
)

// BinEnv names a prometheus binary to use instead of the one on PATH.
const BinEnv = "ORDERLY_PROMETHEUS_BIN"

// InstallCommand is what a person runs to install Prometheus.
const InstallCommand = "sudo apt-get install -y prometheus"

// Binary finds the prometheus binary; as root on a system with apt-get it installs
// Debian's package when it is missing.
func Binary() (string, error) {
	if p := os.Getenv(BinEnv); p != "" {
		return p, nil
	}
	if p, err := exec.LookPath("prometheus"); err == nil {
		return p, nil
	}
	if _, err := exec.LookPath("apt-get"); err != nil || os.Geteuid() != 0 {
		return "", fmt.Errorf("the tests need Prometheus' server: install it with `%s` (or set %s to a prometheus binary)", InstallCommand, BinEnv)
	}
	if err := localproc.AptInstall("prometheus"); err != nil {
		return "", fmt.Errorf("installing Prometheus: %w", err)
	}
	return exec.LookPath("prometheus")
}

// Promtool finds promtool: beside the prometheus binary Binary finds (Debian's
// package ships both), else on PATH.
func Promtool() (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	if p := filepath.Join(filepath.Dir(bin), "promtool"); isExecutable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no promtool beside %s or on PATH (Debian's prometheus package ships it)", bin)
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// Server is a running throwaway Prometheus.
type Server struct {
	// URL is its HTTP API's base, http://127.0.0.1:PORT.
	URL string
	// Dir holds its configuration, data and log.
	Dir string

	bin  string
	port int
	mu   sync.Mutex
	cmd  *exec.Cmd
	done chan struct{}
}

// Options configure a Server.
type Options struct {
	// Targets are the host:port addresses scraped at /metrics.
	Targets []string
	// ScrapeInterval is how often they are scraped (default 1s).
	ScrapeInterval time.Duration
	// Job is the scrape job's name, the job label of what it scrapes (default test).
	Job string
	// RuleFiles are rule files Prometheus loads and evaluates (paths).
	RuleFiles []string
}

// Start writes a configuration that scrapes the targets, starts Prometheus and
// returns once it is ready. Call Close to stop it and remove its files.
func Start(o Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = time.Second
	}
	dir, err := os.MkdirTemp("", "orderly-testprom-")
	if err != nil {
		return nil, err
	}
	if o.Job == "" {
		o.Job = "test"
	}
	config := fmt.Sprintf(`global:
  scrape_interval: %s
  evaluation_interval: %s
rule_files: [%s]
scrape_configs:
  - job_name: %q
    static_configs:
      - targets: [%s]
`, o.ScrapeInterval, o.ScrapeInterval, quoteAll(o.RuleFiles), o.Job, quoteAll(o.Targets))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	port, err := freePort()
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Dir: dir, bin: bin, port: port}
	if err := s.StartAgain(); err != nil {
		s.Close()
		return nil, err
	}
	return s, nil
}

// StartAgain starts the server after Stop, on the same port with the same data.
func (s *Server) StartAgain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd != nil {
		return errors.New("prometheus is already running")
	}
	logFile, err := os.OpenFile(filepath.Join(s.Dir, "prometheus.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logFile.Close()
	cmd := exec.Command(s.bin,
		"--config.file="+filepath.Join(s.Dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(s.Dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", s.port),
		"--storage.tsdb.retention.time=1d",
		"--log.level=warn")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// Prometheus goes with the test process, however that ends.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", s.bin, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	s.cmd, s.done = cmd, done
	deadline := time.Now().Add(30 * time.Second)
	for {
		if ready(s.URL) {
			return nil
		}
		select {
		case <-done:
			s.cmd = nil
			return fmt.Errorf("prometheus exited while starting; its log:\n%s", s.tail())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("prometheus not ready after 30s; its log:\n%s", s.tail())
		}
	}
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s), keeping its data, so
// that it is unreachable until StartAgain.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cmd == nil {
		return nil
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
	s.cmd = nil
	return nil
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	_ = s.Stop()
	_ = os.RemoveAll(s.Dir)
}

// Address is the host:port the server listens on.
func (s *Server) Address() string { return fmt.Sprintf("127.0.0.1:%d", s.port) }

// WaitForData polls until query returns a non-empty result, or ctx ends.
func (s *Server) WaitForData(ctx context.Context, query string) error {
	for {
		resp, err := http.Get(s.URL + "/api/v1/query?query=" + url.QueryEscape(query)) //nolint:noctx // bounded by the loop's ctx
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
			_ = resp.Body.Close()
			var answer struct {
				Data struct {
					Result []json.RawMessage `json:"result"`
				} `json:"data"`
			}
			if resp.StatusCode == http.StatusOK && json.Unmarshal(body, &answer) == nil && len(answer.Data.Result) > 0 {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("no data for %s: %w", query, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (s *Server) tail() string {
	b, err := os.ReadFile(filepath.Join(s.Dir, "prometheus.log"))
	if err != nil {
		return err.Error()
	}
	if len(b) > 4096 {
		b = b[len(b)-4096:]
	}
	return string(b)
}

func ready(base string) bool {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(base + "/-/ready")
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

func quoteAll(ss []string) string {
	quoted := make([]string, 0, len(ss))
	for _, s := range ss {
		quoted = append(quoted, fmt.Sprintf("%q", s))
	}
	return strings.Join(quoted, ", ")
}

// Get fetches path (e.g. /api/v1/rules) from the server's HTTP API and decodes the
// data field of its JSON answer into data.
func (s *Server) Get(ctx context.Context, path string, data any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.URL+path, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 16<<20))
	if err != nil {
		return err
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s: %s", path, resp.Status, body)
	}
	var answer struct {
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(body, &answer); err != nil {
		return fmt.Errorf("GET %s: %w", path, err)
	}
	return json.Unmarshal(answer.Data, data)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
