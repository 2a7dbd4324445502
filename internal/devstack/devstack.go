// Package devstack brings up, beside a local cluster, the local stand-ins for
// everything the samples in config/samples talk to, so that every capability can be
// seen working on a laptop: PostgreSQL with a sample database, an S3 store holding a
// real pg_dump of it, a DNS server serving the sample zone, the Gateway API CRDs and
// Gateways, cert-manager with a private CA, Prometheus fed with the Canary samples'
// series, an OCI registry with a clean and a vulnerable image and an offline
// vulnerability database, and a second local cluster registered as a member. Each is
// a real program (internal/standin) on loopback, with its files under the user's
// cache; the Secrets the samples refer to are written into the cluster.
//
// `make run` (orderly dev run), `orderly dev up --with ...` and the e2e test of the
// samples use this one code path: Up, then ApplySamples and WaitSamples, and Tour.
package devstack

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/localpg"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/standin"
)

// Part is one stand-in (with what it needs in the cluster).
type Part string

// The parts, in the order they are reported.
const (
	Postgres    Part = "postgres"
	S3          Part = "s3"
	DNS         Part = "dns"
	GatewayAPI  Part = "gateway-api"
	CertManager Part = "cert-manager"
	Prometheus  Part = "prometheus"
	Images      Part = "images"
	Member      Part = "member"
)

// AllParts are every part, in the order they are reported.
var AllParts = []Part{Postgres, S3, DNS, GatewayAPI, CertManager, Prometheus, Images, Member}

// affects says, for each part, which samples stay not Ready without it.
var affects = map[Part]string{
	Postgres:    "DatabaseServer shared-postgres, the DevDatabases, SecretRotation checkout-db and BackupVerification orders-nightly",
	S3:          "BackupVerification orders-nightly",
	DNS:         "DomainZone int-example and ServiceDomain shop",
	GatewayAPI:  "ServiceDomain shop (its HTTPRoute) and the Canaries (theirs)",
	CertManager: "ServiceDomain shop (its certificate) and SecretRotation payments-tls",
	Prometheus:  "the Canaries' analyses (they hold a rollout until Prometheus answers)",
	Images:      "ImagePolicy restricted's scans (nothing to scan, no vulnerability database)",
	Member:      "PlacementPolicy shop",
}

// ParseParts reads --with values: part names, or "all".
func ParseParts(names []string) ([]Part, error) {
	var out []Part
	for _, n := range names {
		n = strings.TrimSpace(n)
		if n == "all" {
			return slices.Clone(AllParts), nil
		}
		if !slices.Contains(AllParts, Part(n)) {
			return nil, fmt.Errorf("unknown stand-in %q: want all, or some of %s", n, partList(AllParts))
		}
		if !slices.Contains(out, Part(n)) {
			out = append(out, Part(n))
		}
	}
	return out, nil
}

func partList(parts []Part) string {
	s := make([]string, len(parts))
	for i, p := range parts {
		s[i] = string(p)
	}
	return strings.Join(s, ", ")
}

// Ports are the stand-ins' ports on 127.0.0.1.
type Ports struct {
	Postgres, DNS, S3, Prometheus, CanaryApp, Registry, CertManagerMetrics int
}

// DefaultPorts are the well-known ports the samples name: away from each program's
// usual port, so that none collides with one the machine runs already.
var DefaultPorts = Ports{
	Postgres:           localpg.DevPort,
	DNS:                55053,
	S3:                 55070,
	Prometheus:         55090,
	CanaryApp:          55091,
	Registry:           55000,
	CertManagerMetrics: 55402,
}

// FreePorts picks free ports for every stand-in (the tests' stacks, which must not
// meet `make run`'s).
func FreePorts() (Ports, error) {
	var p Ports
	for _, f := range []*int{&p.Postgres, &p.DNS, &p.S3, &p.Prometheus, &p.CanaryApp, &p.Registry, &p.CertManagerMetrics} {
		port, err := standin.FreePort(f == &p.DNS)
		if err != nil {
			return p, err
		}
		*f = port
	}
	return p, nil
}

// ManagerNamespace is the manager's namespace, where Secrets that cluster-scoped
// objects name are read from.
const ManagerNamespace = "orderly-system"

// Options say which stand-ins Up brings up, for which cluster, and where.
type Options struct {
	// Cluster is the local cluster's name (devcluster.DefaultName when empty).
	Cluster string
	// Kubeconfig is an administrator's kubeconfig of the cluster; the local
	// cluster's own when empty.
	Kubeconfig string
	// Dir holds the stand-ins' files; StateDir(Cluster) when empty.
	Dir string
	// PostgresDir holds the local PostgreSQL's files; DefaultPostgresDir() when
	// empty (the one `orderly dev postgres` uses).
	PostgresDir string
	// Ports are the stand-ins' ports; DefaultPorts when zero.
	Ports Ports
	// Parts are the stand-ins to bring up.
	Parts []Part
	// Detached leaves the stand-ins running after the calling process ends (orderly
	// dev up; orderly dev down stops them); otherwise they go with it (tests).
	Detached bool
	// OrderlyBin is the orderly binary, which also runs the Canary samples' stand-in
	// pods (orderly dev serve-canary-metrics); the running executable when empty.
	OrderlyBin string
	// MemberCluster names the local cluster registered as the member eu-west-1;
	// Cluster + "-eu-west-1" when empty.
	MemberCluster string
	// ManagerMetrics is the host:port of the manager's metrics, which Prometheus
	// scrapes as job orderly; none when empty.
	ManagerMetrics string
}

// StateDir is where the stand-ins of the named cluster keep their files.
func StateDir(cluster string) string {
	if cluster == "" {
		cluster = devcluster.DefaultName
	}
	return filepath.Join(devcluster.CacheDir(), "dev", cluster)
}

// DefaultPostgresDir is the local PostgreSQL's directory: under Orderly's cache; as
// root (whose home the postgres user cannot enter) /var/tmp/orderly-postgres.
func DefaultPostgresDir() string {
	if os.Geteuid() == 0 {
		return "/var/tmp/orderly-postgres"
	}
	return filepath.Join(devcluster.CacheDir(), "postgres")
}

func (o Options) withDefaults() (Options, error) {
	if o.Cluster == "" {
		o.Cluster = devcluster.DefaultName
	}
	if o.Kubeconfig == "" {
		o.Kubeconfig = devcluster.KubeconfigPath(o.Cluster)
	}
	if o.Dir == "" {
		o.Dir = StateDir(o.Cluster)
	}
	if o.PostgresDir == "" {
		o.PostgresDir = DefaultPostgresDir()
	}
	if o.Ports == (Ports{}) {
		o.Ports = DefaultPorts
	}
	if o.OrderlyBin == "" {
		exe, err := os.Executable()
		if err != nil {
			return o, err
		}
		o.OrderlyBin = exe
	}
	if o.MemberCluster == "" {
		o.MemberCluster = o.Cluster + "-eu-west-1"
	}
	return o, nil
}

// Result is how one part came up.
type Result struct {
	Part Part `json:"part"`
	// Ready is true when the part runs and what it needs in the cluster is there.
	Ready bool `json:"ready"`
	// Detail says what runs where, or what went wrong.
	Detail string `json:"detail"`
	// Fix is the command that makes a part that is not Ready work (a missing
	// package), if there is one.
	Fix string `json:"fix,omitempty"`
}

// Stack is the stand-ins Up brought up.
type Stack struct {
	Options
	// Results are the parts, in the order of AllParts.
	Results []Result

	// RegistryHost is the local registry's host:port (Images).
	RegistryHost string
	// OSVDir is the offline vulnerability database's directory (Images).
	OSVDir string
	// PrometheusURL is Prometheus' base URL.
	PrometheusURL string
	// Postgres is the local PostgreSQL's admin password, for the tests.
	PostgresPassword string

	mu    sync.Mutex
	ready map[Part]bool
	c     client.Client
}

// Ready says whether part came up.
func (s *Stack) Ready(part Part) bool {
	for _, r := range s.Results {
		if r.Part == part {
			return r.Ready
		}
	}
	return false
}

// stateFile records, in Dir, what Down has to stop beside the processes.
const stateFile = "stack.json"

type state struct {
	Parts         []Part `json:"parts"`
	MemberCluster string `json:"memberCluster,omitempty"`
	PostgresDir   string `json:"postgresDir,omitempty"`
	PostgresPort  int    `json:"postgresPort,omitempty"`
}

// Up brings up o.Parts beside the cluster (the cluster must run) and writes what
// the samples need into it. A part that cannot come up (its program missing, a
// build failing, a port taken) is reported in its Result with what it leaves not
// Ready and how to fix it, and the others come up all the same; the error is only
// for what stops every part (no cluster, no state directory). Running it again is
// harmless: what runs is found again.
func Up(ctx context.Context, o Options, out io.Writer) (*Stack, error) {
	if out == nil {
		out = io.Discard
	}
	o, err := o.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading the cluster's kubeconfig %s (is it up? orderly dev up): %w", o.Kubeconfig, err)
	}
	cfg.Timeout = 30 * time.Second
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	s := &Stack{Options: o, c: c, ready: map[Part]bool{}}
	if err := s.saveState(); err != nil {
		return nil, err
	}
	if err := ensureNamespace(ctx, c, ManagerNamespace); err != nil {
		return nil, err
	}

	// Every part starts at once; the few that need another wait for it.
	start := time.Now()
	done := map[Part]chan struct{}{}
	for _, p := range AllParts {
		done[p] = make(chan struct{})
	}
	results := map[Part]Result{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	w := &syncWriter{w: out}
	for _, p := range AllParts {
		if !slices.Contains(o.Parts, p) {
			close(done[p])
			continue
		}
		wg.Go(func() {
			defer close(done[p])
			r := s.up(ctx, p, done, w)
			mu.Lock()
			results[p] = r
			mu.Unlock()
			state := "ready"
			if !r.Ready {
				state = "NOT READY"
			}
			fmt.Fprintf(w, "  %-13s %s after %s: %s\n", p, state, time.Since(start).Round(100*time.Millisecond), r.Detail)
		})
	}
	wg.Wait()
	for _, p := range AllParts {
		if r, ok := results[p]; ok {
			s.Results = append(s.Results, r)
		}
	}
	return s, ctx.Err()
}

// up brings up one part; waitFor holds a channel per part, closed once it is done.
func (s *Stack) up(ctx context.Context, p Part, waitFor map[Part]chan struct{}, out io.Writer) Result {
	wait := func(dep Part) bool {
		select {
		case <-waitFor[dep]:
		case <-ctx.Done():
		}
		return s.partReady(dep)
	}
	var (
		r   Result
		err error
	)
	switch p {
	case Postgres:
		r, err = s.upPostgres(ctx)
	case S3:
		r, err = s.upS3(ctx, out, func() bool { return slices.Contains(s.Parts, Postgres) && wait(Postgres) })
	case DNS:
		r, err = s.upDNS(ctx)
	case GatewayAPI:
		r, err = s.upGatewayAPI(ctx)
	case CertManager:
		r, err = s.upCertManager(ctx, out)
	case Prometheus:
		r, err = s.upPrometheus()
	case Images:
		r, err = s.upImages(ctx)
	case Member:
		r, err = s.upMember(ctx)
	}
	r = resultOf(p, r, err)
	if r.Ready {
		s.mu.Lock()
		s.ready[p] = true
		s.mu.Unlock()
	}
	return r
}

// resultOf is how part p came up: err says why not, a missing program with the
// command that installs it, and what stays not Ready without the part.
func resultOf(p Part, r Result, err error) Result {
	r.Part = p
	if err == nil {
		r.Ready = true
		return r
	}
	r = Result{Part: p, Detail: err.Error()}
	if m := (*standin.MissingError)(nil); errors.As(err, &m) {
		r.Fix = m.Install
		r.Detail = m.What + " is not installed"
	}
	r.Detail += "; not Ready without it: " + affects[p]
	return r
}

// partReady says whether p came up, while Up runs.
func (s *Stack) partReady(p Part) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ready[p]
}

func (s *Stack) saveState() error {
	st := state{Parts: s.Parts}
	if slices.Contains(s.Parts, Member) {
		st.MemberCluster = s.MemberCluster
	}
	if slices.Contains(s.Parts, Postgres) {
		st.PostgresDir, st.PostgresPort = s.PostgresDir, s.Ports.Postgres
	}
	// What an earlier Up started is kept: Down stops it too.
	if prev, err := readState(s.Dir); err == nil {
		for _, p := range prev.Parts {
			if !slices.Contains(st.Parts, p) {
				st.Parts = append(st.Parts, p)
			}
		}
		if st.MemberCluster == "" {
			st.MemberCluster = prev.MemberCluster
		}
		if st.PostgresDir == "" {
			st.PostgresDir, st.PostgresPort = prev.PostgresDir, prev.PostgresPort
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, stateFile), b, 0o644)
}

func readState(dir string) (state, error) {
	var st state
	b, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil {
		return st, err
	}
	return st, json.Unmarshal(b, &st)
}

// Down stops the stand-ins of the named cluster that Up started (their processes,
// the local PostgreSQL and the member cluster) and removes their files, PostgreSQL's
// too: its databases and roles are the cluster's objects'. Nothing to stop is not an
// error.
func Down(ctx context.Context, cluster string, out io.Writer) error {
	return down(ctx, StateDir(cluster), out)
}

// Down is the package's Down for this stack (whose Dir may be elsewhere than the
// cluster's StateDir, as the tests' are).
func (s *Stack) Down(ctx context.Context, out io.Writer) error { return down(ctx, s.Dir, out) }

func down(ctx context.Context, dir string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	st, err := readState(dir)
	if errors.Is(err, os.ErrNotExist) {
		if _, serr := os.Stat(dir); errors.Is(serr, os.ErrNotExist) {
			return nil
		}
	}
	var errs []error
	if err := standin.StopAll(dir, 10*time.Second); err != nil {
		errs = append(errs, err)
	}
	if st.PostgresDir != "" {
		// Its databases and roles belong to the cluster's objects, which go with it: a
		// new cluster's SecretRotation would find the old one's role and leave it alone.
		if existed, err := (localpg.Dev{Dir: st.PostgresDir, Port: int32(st.PostgresPort)}).Down(); err != nil {
			errs = append(errs, err)
		} else if existed {
			fmt.Fprintf(out, "stopped the local PostgreSQL and removed %s\n", st.PostgresDir)
		}
	}
	if st.MemberCluster != "" {
		if err := devcluster.Down(ctx, st.MemberCluster, out); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return err
	}
	fmt.Fprintf(out, "stopped the local stand-ins and removed %s\n", dir)
	return os.RemoveAll(dir)
}

// syncWriter serialises the parts' lines.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (w *syncWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.w.Write(b)
}
