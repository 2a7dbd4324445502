// Package prom runs a Prometheus server on loopback: Debian's prometheus package,
// with a generated configuration and its data in a directory of its own. The tests
// start a throwaway one (Start: a free port, a temporary directory); `orderly dev up
// --with prometheus` a persistent one (Run with a directory and a port). When
// Prometheus is missing it is installed (as root, with apt-get) or the caller gets a
// *standin.MissingError that says how.
package prom

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"sigs.k8s.io/yaml"

	"orderly.dev/orderly/internal/standin"
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
	return standin.FindOrInstall(standin.LookPath("prometheus"), "prometheus",
		&standin.MissingError{What: "Prometheus (Debian's prometheus)", Install: InstallCommand, Env: BinEnv})
}

// Promtool finds promtool: beside the prometheus binary Binary finds (Debian's
// package ships both), else on PATH.
func Promtool() (string, error) {
	bin, err := Binary()
	if err != nil {
		return "", err
	}
	if p := filepath.Join(filepath.Dir(bin), "promtool"); standin.Executable(p) {
		return p, nil
	}
	if p, err := exec.LookPath("promtool"); err == nil {
		return p, nil
	}
	return "", fmt.Errorf("no promtool beside %s or on PATH (Debian's prometheus package ships it)", bin)
}

// Server is a running Prometheus.
type Server struct {
	// URL is its HTTP API's base, http://127.0.0.1:PORT.
	URL string
	// Dir holds its configuration, data and log.
	Dir string

	bin     string
	port    int
	tempDir bool
	// retention is how long samples are kept.
	retention time.Duration
	mu        sync.Mutex
	proc      *standin.Process
	running   bool
}

// Relabel is one of a scrape job's metric_relabel_configs (Prometheus' own fields).
type Relabel struct {
	SourceLabels []string `json:"source_labels,omitempty"`
	Separator    string   `json:"separator,omitempty"`
	Regex        string   `json:"regex,omitempty"`
	TargetLabel  string   `json:"target_label,omitempty"`
	Replacement  string   `json:"replacement,omitempty"`
	Action       string   `json:"action,omitempty"`
}

// Job is one scrape job.
type Job struct {
	// Name is the job's name, the job label of what it scrapes.
	Name string
	// Targets are the host:port addresses scraped at /metrics.
	Targets []string
	// Relabel rewrites the scraped series (names, labels) before they are stored.
	Relabel []Relabel
}

// Options configure a Server.
type Options struct {
	// Targets are the host:port addresses scraped at /metrics by the job Job
	// (default test); Jobs are further jobs.
	Targets []string
	Job     string
	Jobs    []Job
	// ScrapeInterval is how often they are scraped (default 1s).
	ScrapeInterval time.Duration
	// RuleFiles are rule files Prometheus loads and evaluates (paths).
	RuleFiles []string
	// Dir holds the configuration, data and log. Empty: a new temporary directory,
	// removed by Close.
	Dir string
	// Port on 127.0.0.1; 0 picks a free one.
	Port int
	// Retention is how long samples are kept (default 1d).
	Retention time.Duration
	// Detached leaves Prometheus running after this process ends (orderly dev up);
	// the next Run finds it again in Dir.
	Detached bool
}

// Start writes a configuration that scrapes the targets, starts a throwaway
// Prometheus on a free port and returns once it is ready. Call Close to stop it and
// remove its files.
func Start(o Options) (*Server, error) {
	o.Dir, o.Port, o.Detached = "", 0, false
	return Run(o)
}

// Run starts Prometheus as o says, or finds the one a previous Run left running in
// o.Dir with the same configuration, and returns once it is ready.
func Run(o Options) (*Server, error) {
	bin, err := Binary()
	if err != nil {
		return nil, err
	}
	if o.ScrapeInterval == 0 {
		o.ScrapeInterval = time.Second
	}
	if o.Retention == 0 {
		o.Retention = 24 * time.Hour
	}
	if o.Job == "" {
		o.Job = "test"
	}
	s := &Server{Dir: o.Dir, bin: bin, port: o.Port}
	if s.Dir == "" {
		if s.Dir, err = os.MkdirTemp("", "orderly-testprom-"); err != nil {
			return nil, err
		}
		s.tempDir = true
	} else if err := os.MkdirAll(s.Dir, 0o755); err != nil {
		return nil, err
	}
	s.proc = &standin.Process{Name: "prometheus", Dir: s.Dir, Detached: o.Detached}
	fail := func(err error) (*Server, error) {
		if s.tempDir {
			_ = os.RemoveAll(s.Dir)
		}
		return nil, err
	}
	config, err := configYAML(o)
	if err != nil {
		return fail(err)
	}
	configPath := filepath.Join(s.Dir, "prometheus.yml")
	old, _ := os.ReadFile(configPath)
	portPath := filepath.Join(s.Dir, "port")
	if s.proc.Running() {
		var prevPort int
		if b, err := os.ReadFile(portPath); err == nil {
			_, _ = fmt.Sscan(string(b), &prevPort)
		}
		if string(old) == string(config) && (o.Port == 0 || o.Port == prevPort) && prevPort != 0 {
			s.port, s.URL, s.running = prevPort, fmt.Sprintf("http://127.0.0.1:%d", prevPort), true
			if err := s.proc.WaitReady(10*time.Second, s.ready); err == nil {
				return s, nil
			}
		}
		if err := s.proc.Stop(10 * time.Second); err != nil {
			return fail(err)
		}
		s.running = false
	}
	if err := os.WriteFile(configPath, config, 0o600); err != nil {
		return fail(err)
	}
	if s.port, err = standin.ListenPort(s.port, false, "Prometheus"); err != nil {
		return fail(err)
	}
	if err := os.WriteFile(portPath, fmt.Appendf(nil, "%d\n", s.port), 0o600); err != nil {
		return fail(err)
	}
	s.URL = fmt.Sprintf("http://127.0.0.1:%d", s.port)
	s.retention = o.Retention
	if err := s.StartAgain(); err != nil {
		return fail(err)
	}
	return s, nil
}

func configYAML(o Options) ([]byte, error) {
	type staticConfig struct {
		Targets []string `json:"targets"`
	}
	type scrapeConfig struct {
		JobName              string         `json:"job_name"`
		StaticConfigs        []staticConfig `json:"static_configs"`
		MetricRelabelConfigs []Relabel      `json:"metric_relabel_configs,omitempty"`
	}
	jobs := o.Jobs
	if len(o.Targets) > 0 || len(jobs) == 0 {
		jobs = append([]Job{{Name: o.Job, Targets: o.Targets}}, jobs...)
	}
	var scrapes []scrapeConfig
	for _, j := range jobs {
		targets := j.Targets
		if targets == nil {
			targets = []string{}
		}
		scrapes = append(scrapes, scrapeConfig{JobName: j.Name, StaticConfigs: []staticConfig{{Targets: targets}}, MetricRelabelConfigs: j.Relabel})
	}
	rules := o.RuleFiles
	if rules == nil {
		rules = []string{}
	}
	return yaml.Marshal(map[string]any{
		"global":         map[string]string{"scrape_interval": o.ScrapeInterval.String(), "evaluation_interval": o.ScrapeInterval.String()},
		"rule_files":     rules,
		"scrape_configs": scrapes,
	})
}

// StartAgain starts the server after Stop, on the same port with the same data.
func (s *Server) StartAgain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.running {
		return errors.New("prometheus is already running")
	}
	retention := s.retention
	if retention == 0 {
		retention = 24 * time.Hour
	}
	cmd := exec.Command(s.bin,
		"--config.file="+filepath.Join(s.Dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(s.Dir, "data"),
		fmt.Sprintf("--web.listen-address=127.0.0.1:%d", s.port),
		"--storage.tsdb.retention.time="+model(retention),
		"--log.level=warn")
	if err := s.proc.Start(cmd); err != nil {
		return err
	}
	if err := s.proc.WaitReady(30*time.Second, s.ready); err != nil {
		_ = s.proc.Stop(5 * time.Second)
		return err
	}
	s.running = true
	return nil
}

// model writes d as Prometheus durations are written (no fractions: whole hours or
// minutes).
func model(d time.Duration) string {
	if d%time.Hour == 0 {
		return fmt.Sprintf("%dh", d/time.Hour)
	}
	return fmt.Sprintf("%dm", d/time.Minute)
}

// Stop stops the server (SIGTERM, then SIGKILL after 10 s), keeping its data, so
// that it is unreachable until StartAgain.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.running {
		return nil
	}
	s.running = false
	return s.proc.Stop(10 * time.Second)
}

// Close stops the server, and removes its files when they are in a temporary
// directory.
func (s *Server) Close() {
	_ = s.Stop()
	if s.tempDir {
		_ = os.RemoveAll(s.Dir)
	}
}

// Pid is the server's process id.
func (s *Server) Pid() int { return s.proc.Pid() }

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

func (s *Server) ready() error {
	c := http.Client{Timeout: time.Second}
	resp, err := c.Get(s.URL + "/-/ready")
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("/-/ready: %s", resp.Status)
	}
	return nil
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
