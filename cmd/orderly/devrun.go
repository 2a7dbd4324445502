package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	mdns "github.com/miekg/dns"
	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/devstack"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/standin/bind"
	"orderly.dev/orderly/internal/standin/canaryapp"
)

// The manager's local addresses under `make run`, away from the in-cluster defaults.
const (
	devMetricsPort = 18080
	devProbePort   = 18081
	devWebhookPort = 18443
)

type devRunOptions struct {
	name    string
	nodes   int
	without []string
	wait    time.Duration
}

func newDevRunCommand() *cobra.Command {
	var o devRunOptions
	cmd := &cobra.Command{
		Use:   "run",
		Short: "What `make run` does: the local cluster, every stand-in, the samples and the manager, until Ctrl-C",
		Long: `Start the local cluster (building it the first time), bring up beside it the local
stand-ins for everything the samples talk to (as 'orderly dev up --with all'), apply
config/samples with server-side apply, run the manager against the cluster (its log
in the stand-ins' directory), wait until every sample is Ready, and print a tour: one
line per capability with the command that shows it working. The manager runs until
Ctrl-C; the cluster and the stand-ins stay until 'orderly dev down'.

A stand-in that cannot start (a Debian package missing and not root) is reported with
what stays not Ready and the command that fixes it; the rest goes on.

The manager serves its metrics on :` + fmt.Sprint(devMetricsPort) + `, its probes on :` + fmt.Sprint(devProbePort) + ` and the ImagePolicy
webhook on 127.0.0.1:` + fmt.Sprint(devWebhookPort) + `.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			return devRun(ctx, o, cmd.OutOrStdout())
		},
	}
	cmd.Flags().StringVar(&o.name, "name", devcluster.DefaultName, "name of the local cluster")
	cmd.Flags().IntVar(&o.nodes, "nodes", devcluster.DefaultNodes, "number of simulated (kwok) nodes")
	cmd.Flags().StringSliceVar(&o.without, "without", nil, "stand-ins not to bring up ("+strings.Join(partNames(), ", ")+")")
	cmd.Flags().DurationVar(&o.wait, "wait", 2*time.Minute, "how long to wait for every sample to be Ready before the tour")
	return cmd
}

func partNames() []string {
	out := make([]string, len(devstack.AllParts))
	for i, p := range devstack.AllParts {
		out[i] = string(p)
	}
	return out
}

func devRun(ctx context.Context, o devRunOptions, out io.Writer) error {
	start := time.Now()
	// The clients here log nothing worth showing beside the progress.
	ctrllog.SetLogger(logr.Discard())
	without, err := devstack.ParseParts(o.without)
	if err != nil {
		return err
	}
	var parts []devstack.Part
	for _, p := range devstack.AllParts {
		if !slices.Contains(without, p) {
			parts = append(parts, p)
		}
	}
	// The stand-ins that are built from source are built beside the cluster's
	// binaries, not after them.
	if _, err := devstack.Build(ctx, out); err != nil {
		return err
	}
	manifests, err := config.DevManifests()
	if err != nil {
		return err
	}
	kubeconfig, err := devcluster.Up(ctx, devcluster.Options{Name: o.name, Nodes: o.nodes, Manifests: manifests}, out)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "bringing up the local stand-ins (%s)...\n", strings.Join(partStrings(parts), ", "))
	stack, err := devstack.Up(ctx, devstack.Options{Cluster: o.name, Parts: parts, Detached: true,
		ManagerMetrics: fmt.Sprintf("127.0.0.1:%d", devMetricsPort)}, out)
	if err != nil {
		return err
	}
	printFixes(out, stack)
	samples, err := stack.Samples()
	if err != nil {
		return err
	}
	fmt.Fprintln(out, "applying config/samples (server-side)...")
	applied := time.Now()
	if err := devstack.ApplySamples(ctx, kubeconfig, samples, out); err != nil {
		return err
	}

	logPath := filepath.Join(devstack.StateDir(o.name), "manager.log")
	manager, err := startDevManager(kubeconfig, logPath, stack.ManagerArgs(devWebhookPort))
	if err != nil {
		return err
	}
	defer manager.stop()
	fmt.Fprintf(out, "manager running (pid %d), its log: %s\n", manager.cmd.Process.Pid, logPath)

	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	objects, err := devstack.SampleObjects(samples)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "waiting for the %d samples to be Ready (seconds after they were applied):\n", len(objects))
	objects = devstack.WaitSamples(ctx, c, objects, applied, o.wait, out)
	if ctx.Err() != nil {
		return nil
	}
	if notReady := devstack.NotReady(objects); len(notReady) > 0 {
		fmt.Fprintf(out, "\n%d of %d samples are not Ready %s after they were applied (%s after the command started):\n  %s\n",
			len(notReady), len(objects), o.wait, time.Since(start).Round(time.Second), strings.Join(notReady, "\n  "))
	} else {
		fmt.Fprintf(out, "\nevery sample is Ready, %s after the command started.\n", time.Since(start).Round(time.Second))
	}
	kubectl := filepath.Join(devcluster.CacheDir(), "bin", "kubernetes-"+devcluster.KubernetesVersion, "kubectl")
	fmt.Fprintf(out, "\n  export KUBECONFIG=%s\n  alias kubectl=%s\n\n", kubeconfig, kubectl)
	self, _ := os.Executable()
	stack.Tour(out, self)
	fmt.Fprintf(out, "\nThe manager runs until Ctrl-C (metrics: curl -s localhost:%d/metrics | grep ^orderly_); `orderly dev down` removes the cluster and the stand-ins.\n", devMetricsPort)

	select {
	case <-ctx.Done():
		fmt.Fprintln(out, "stopping the manager...")
	case <-manager.exited:
		return fmt.Errorf("the manager exited: %w; the end of its log (%s):\n%s", manager.exitErr(), logPath, tail(logPath, 30))
	}
	return nil
}

func partStrings(parts []devstack.Part) []string {
	out := make([]string, len(parts))
	for i, p := range parts {
		out[i] = string(p)
	}
	return out
}

// printFixes says, for each stand-in that did not come up, what to do about it.
func printFixes(out io.Writer, stack *devstack.Stack) {
	for _, r := range stack.Results {
		if r.Ready || r.Fix == "" {
			continue
		}
		fmt.Fprintf(out, "  to have %s: %s, then run this again\n", r.Part, r.Fix)
	}
}

// devManager is `orderly manager` run by `orderly dev run`.
type devManager struct {
	cmd    *exec.Cmd
	log    *os.File
	exited chan struct{}
	err    error
}

// startDevManager runs this binary's manager against the local cluster as its
// administrator (the local cluster is the developer's), and waits until it is ready.
func startDevManager(kubeconfig, logPath string, extra []string) (*devManager, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(filepath.Dir(logPath), 0o755); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	args := append([]string{"manager", "--kubeconfig", kubeconfig, "--leader-elect=false", "--log-format", "console",
		fmt.Sprintf("--metrics-bind-address=:%d", devMetricsPort), fmt.Sprintf("--health-probe-bind-address=:%d", devProbePort)}, extra...)
	m := &devManager{cmd: exec.Command(self, args...), log: log, exited: make(chan struct{})}
	m.cmd.Stdout, m.cmd.Stderr = log, log
	// Ctrl-C in the terminal reaches this process, which stops the manager itself.
	m.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := m.cmd.Start(); err != nil {
		log.Close()
		return nil, err
	}
	go func() { m.err = m.cmd.Wait(); close(m.exited) }()
	deadline := time.Now().Add(90 * time.Second)
	for {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/readyz", devProbePort)) //nolint:noctx // bounded by the loop
		if err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return m, nil
			}
		}
		select {
		case <-m.exited:
			return nil, fmt.Errorf("the manager exited while starting (%w); the end of its log (%s):\n%s", m.exitErr(), logPath, tail(logPath, 30))
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			m.stop()
			return nil, fmt.Errorf("the manager was not ready after 90s; the end of its log (%s):\n%s", logPath, tail(logPath, 30))
		}
	}
}

// exitErr is how the manager ended, once it has.
func (m *devManager) exitErr() error {
	if m.err == nil {
		return errors.New("exit status 0")
	}
	return m.err
}

// stop stops the manager as a kubelet would: SIGTERM, then a kill after 20 s.
func (m *devManager) stop() {
	select {
	case <-m.exited:
	default:
		_ = m.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-m.exited:
		case <-time.After(20 * time.Second):
			_ = m.cmd.Process.Kill()
			<-m.exited
		}
	}
	_ = m.log.Close()
}

func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func newDevDigCommand() *cobra.Command {
	var server string
	cmd := &cobra.Command{
		Use:   "dig NAME [TYPE]",
		Short: "Ask the local DNS server for a name's records (as dig @127.0.0.1 -p 55053 NAME TYPE would)",
		Long: `Ask the DNS server of 'orderly dev up --with dns' (BIND on 127.0.0.1:` + fmt.Sprint(devstack.DefaultPorts.DNS) + `) for
NAME's records of TYPE (A by default), for machines without dig, and print them one a
line: what a ServiceDomain published.`,
		Example: `  orderly dev dig shop.int.example.com
  orderly dev dig _orderly-owner.shop.int.example.com TXT`,
		Args: cobra.RangeArgs(1, 2),
		RunE: func(cmd *cobra.Command, args []string) error {
			typ := "A"
			if len(args) == 2 {
				typ = strings.ToUpper(args[1])
			}
			t, ok := mdns.StringToType[typ]
			if !ok {
				return fmt.Errorf("unknown record type %q", typ)
			}
			values, err := bind.Query(server, args[0], t)
			if err != nil {
				return fmt.Errorf("asking %s: %w (is it up? orderly dev up --with dns)", server, err)
			}
			for _, v := range values {
				fmt.Fprintln(cmd.OutOrStdout(), v)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&server, "server", fmt.Sprintf("127.0.0.1:%d", devstack.DefaultPorts.DNS), "the DNS server, host:port")
	return cmd
}

func newDevServeCanaryMetricsCommand() *cobra.Command {
	var (
		listen     string
		behaviours []string
	)
	cmd := &cobra.Command{
		Use:    "serve-canary-metrics",
		Short:  "Serve the Canary samples' stand-in pods' metrics (started by orderly dev up --with prometheus)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			app, err := canaryapp.Listen(listen)
			if err != nil {
				return err
			}
			defer app.Close()
			for _, s := range behaviours {
				ns, target, variant, b, err := canaryapp.ParseSetting(s)
				if err != nil {
					return err
				}
				app.Set(ns, target, variant, b)
			}
			ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
			defer cancel()
			<-ctx.Done()
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:0", "host:port to serve /metrics on")
	cmd.Flags().StringArrayVar(&behaviours, "behaviour", nil, "NAMESPACE/TARGET/VARIANT=RPS,ERROR_RATIO,LATENCY (repeatable)")
	return cmd
}
