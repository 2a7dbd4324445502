package devcluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// DefaultName is the cluster name used when none is given.
const DefaultName = "orderly"

// DefaultNodes is the number of simulated nodes used when none is given.
const DefaultNodes = 3

// podsPerNode is the pod capacity of each simulated node. kwok's default of 110 would
// make benchmarks with thousands of pods wait on scheduling instead of on Orderly.
const podsPerNode = 1000

// defaultExtraArgs are given to every cluster before the caller's own.
//
// They lift kube-controller-manager's client rate limit (20 QPS by default), at which
// creating and collecting thousands of ReplicaSets and Pods takes minutes and
// benchmarks end up measuring it instead of Orderly.
//
// They turn leader election off for the single kube-controller-manager and
// kube-scheduler: with it, each exits for good once it cannot renew its lease for 10
// s (an API server restart, a laptop waking from sleep), and nothing restarts it, so
// garbage collection and scheduling would silently stop.
var defaultExtraArgs = []string{
	"kube-controller-manager=kube-api-qps=500",
	"kube-controller-manager=kube-api-burst=1000",
	"kube-controller-manager=leader-elect=false",
	"kube-scheduler=leader-elect=false",
}

// Options configure Up.
type Options struct {
	// Name of the cluster; DefaultName if empty.
	Name string
	// Nodes is the number of simulated nodes; DefaultNodes if zero.
	Nodes int
	// ExtraArgs are passed to kwokctl as --extra-args, in the form
	// component=flag=value, e.g. "kube-controller-manager=kube-api-qps=500". They only
	// take effect when the cluster is created.
	ExtraArgs []string
	// Manifests are YAML streams applied (server-side) once the cluster runs; their
	// CustomResourceDefinitions are applied first and waited for until Established.
	Manifests [][]byte
}

var clusterNameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

func (o Options) withDefaults() (Options, error) {
	if o.Name == "" {
		o.Name = DefaultName
	}
	if o.Nodes == 0 {
		o.Nodes = DefaultNodes
	}
	if err := validateName(o.Name); err != nil {
		return o, err
	}
	if o.Nodes < 0 {
		return o, fmt.Errorf("nodes must be positive, got %d", o.Nodes)
	}
	for _, a := range o.ExtraArgs {
		if strings.Count(a, "=") < 2 {
			return o, fmt.Errorf("extra arg %q is not of the form component=flag=value", a)
		}
	}
	return o, nil
}

// maxNameLen keeps a cluster name a DNS label: kwokctl uses it in directory names and
// as part of its kubeconfig context ("kwok-NAME").
const maxNameLen = 63

func validateName(name string) error {
	if len(name) > maxNameLen || !clusterNameRE.MatchString(name) {
		return fmt.Errorf("cluster name %q must be lower-case letters, digits and '-', starting and ending with a letter or digit", name)
	}
	return nil
}

// RunName returns a cluster name of its own for one run of a test suite or benchmark:
// prefix, a dash and six random hex digits, e.g. "orderly-e2e-3fa91c". Two runs on
// one machine then never share (and tear down) each other's cluster. The prefix is
// shortened if needed to keep the name valid.
func RunName(prefix string) string {
	var b [3]byte
	_, _ = rand.Read(b[:]) // crypto/rand.Read does not fail
	suffix := "-" + hex.EncodeToString(b[:])
	if len(prefix) > maxNameLen-len(suffix) {
		prefix = strings.TrimRight(prefix[:maxNameLen-len(suffix)], "-")
	}
	return prefix + suffix
}

func nameOrDefault(name string) string {
	if name == "" {
		return DefaultName
	}
	return name
}

// KubeconfigPath returns where the kubeconfig of the named cluster is (or will be).
func KubeconfigPath(name string) string {
	return filepath.Join(clusterDir(CacheDir(), nameOrDefault(name)), "kubeconfig.yaml")
}

func clusterDir(root, name string) string {
	return filepath.Join(kwokWorkDir(root), "clusters", name)
}

// Up starts the named local cluster, building its binaries first if needed, or
// converges an existing one: it scales the simulated nodes to opts.Nodes, applies
// opts.Manifests and waits until the API server, the nodes and the manifests' CRDs
// are ready. It returns the path of the cluster's kubeconfig; the user's own
// kubeconfig is never modified.
func Up(ctx context.Context, opts Options, out io.Writer) (kubeconfigPath string, err error) {
	if out == nil {
		out = io.Discard
	}
	opts, err = opts.withDefaults()
	if err != nil {
		return "", err
	}
	// Parse the manifests before the long steps, so a broken file fails fast.
	crds, others, err := splitManifests(opts.Manifests)
	if err != nil {
		return "", err
	}
	bins, err := EnsureBinaries(ctx, out)
	if err != nil {
		return "", err
	}
	root := CacheDir()
	kubeconfig := KubeconfigPath(opts.Name)
	k := kwokctlRunner{root: root, bins: bins}

	start := time.Now()
	if _, err := os.Stat(filepath.Join(clusterDir(root, opts.Name), "kwok.yaml")); err == nil {
		// kwokctl keeps the configuration the cluster was created with; it restarts
		// stopped processes (e.g. after a reboot) and leaves running ones alone.
		fmt.Fprintf(out, "cluster %q exists; making sure it runs...\n", opts.Name)
	} else {
		fmt.Fprintf(out, "starting cluster %q (kubernetes %s, etcd %s, kwok %s)...\n", opts.Name, KubernetesVersion, EtcdVersion, KwokVersion)
	}
	if err := k.create(ctx, opts.Name, bins, opts.ExtraArgs, out); err != nil {
		return "", err
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return "", err
	}
	if err := waitAPIServerReady(ctx, cfg, 2*time.Minute); err != nil {
		return "", err
	}
	fmt.Fprintf(out, "  API server ready after %s\n", time.Since(start).Round(100*time.Millisecond))

	if _, err := k.run(ctx, scaleNodesArgs(opts.Name, opts.Nodes)...); err != nil {
		return "", err
	}

	if err := applySplit(ctx, bins.Kubectl, kubeconfig, "orderly", cfg, crds, others, out); err != nil {
		return "", err
	}

	// Generous: on 2 cores shared with other clusters starting, the controller-manager
	// has taken over 3 minutes to create the default ServiceAccount.
	summary, err := waitClusterSettled(ctx, cfg, opts.Nodes, 6*time.Minute)
	if err != nil {
		return "", fmt.Errorf("%w\n%s", err, logTail(filepath.Join(clusterDir(root, opts.Name), "logs", "kube-controller-manager.log"), 20))
	}
	fmt.Fprintf(out, "cluster %q is ready after %s: %s\n\n", opts.Name, time.Since(start).Round(100*time.Millisecond), summary)
	printUsage(out, opts.Name, kubeconfig, bins.Kubectl)
	return kubeconfig, nil
}

// applySplit applies the CRDs, waits until they are Established, then applies the
// other manifests.
func applySplit(ctx context.Context, kubectlPath, kubeconfig, fieldManager string, cfg *rest.Config, crds, others []manifest, out io.Writer) error {
	kubectlApply := func(what string, docs []manifest) error {
		if len(docs) == 0 {
			return nil
		}
		fmt.Fprintf(out, "applying %s...\n", what)
		applied, err := applyManifests(ctx, kubectlPath, kubeconfig, fieldManager, docs)
		if applied != "" {
			fmt.Fprintln(out, indent(applied, "  "))
		}
		return err
	}
	if err := kubectlApply(plural(len(crds), "CustomResourceDefinition"), crds); err != nil {
		return err
	}
	if err := waitCRDsEstablished(ctx, cfg, manifestNames(crds), 2*time.Minute); err != nil {
		return err
	}
	return kubectlApply(plural(len(others), "other manifest"), others)
}

// Apply server-side applies manifests (YAML streams) to the cluster of kubeconfig
// with the local cluster's kubectl, under fieldManager, conflicts forced: the
// CustomResourceDefinitions first, waited for until Established, then the rest.
// What kubectl prints goes to out.
func Apply(ctx context.Context, kubeconfig, fieldManager string, manifests [][]byte, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	crds, others, err := splitManifests(manifests)
	if err != nil {
		return err
	}
	bins, err := EnsureBinaries(ctx, out)
	if err != nil {
		return err
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return err
	}
	return applySplit(ctx, bins.Kubectl, kubeconfig, fieldManager, cfg, crds, others, out)
}

func printUsage(out io.Writer, name, kubeconfig, kubectlPath string) {
	down := "orderly dev down"
	if name != DefaultName {
		down += " --name " + name
	}
	fmt.Fprintf(out, `Use it with:

  export KUBECONFIG=%s
  %s get nodes

kubeconfig: %s
kubectl:    %s   (same version as the cluster)
stop it:    %s
`, kubeconfig, kubectlPath, kubeconfig, kubectlPath, down)
}

// Down stops the named cluster and deletes its state (etcd data, certificates, logs).
// Deleting a cluster that does not exist is not an error.
func Down(ctx context.Context, name string, out io.Writer) error {
	if out == nil {
		out = io.Discard
	}
	name = nameOrDefault(name)
	if err := validateName(name); err != nil {
		return err
	}
	root := CacheDir()
	if _, err := os.Stat(clusterDir(root, name)); errors.Is(err, os.ErrNotExist) {
		fmt.Fprintf(out, "cluster %q does not exist\n", name)
		return nil
	}
	b := newBuilder(out)
	err := b.ensureKwok(ctx)
	b.close()
	if err != nil {
		return err
	}
	start := time.Now()
	k := kwokctlRunner{root: root, bins: binariesIn(root)}
	// --kubeconfig must name a file to clean up; the cluster's own one is deleted with
	// it, which leaves the user's kubeconfig alone.
	if _, err := k.run(ctx, "delete", "cluster", "--name", name, "--kubeconfig", KubeconfigPath(name)); err != nil {
		return err
	}
	fmt.Fprintf(out, "deleted cluster %q in %s\n", name, time.Since(start).Round(100*time.Millisecond))
	return nil
}

// Status reports whether the named cluster runs (kwokctl knows it and its API server
// answers /readyz), with a one-line detail meant for a person.
func Status(ctx context.Context, name string) (running bool, detail string, err error) {
	name = nameOrDefault(name)
	if err := validateName(name); err != nil {
		return false, "", err
	}
	root := CacheDir()
	bins := binariesIn(root)
	start := upHint(name)
	if len(missing(filepath.Dir(bins.Kwokctl), []string{"kwokctl"})) > 0 {
		return false, fmt.Sprintf("cluster %q does not exist (binaries not built yet); start it with: %s", name, start), nil
	}
	k := kwokctlRunner{root: root, bins: bins}
	list, err := k.run(ctx, "get", "clusters")
	if err != nil {
		return false, "", err
	}
	if !containsLine(list, name) {
		return false, fmt.Sprintf("cluster %q does not exist; start it with: %s", name, start), nil
	}
	cfg, err := restConfig(KubeconfigPath(name))
	if err != nil {
		return false, fmt.Sprintf("cluster %q exists but its kubeconfig is unusable (%v); recreate it with: orderly dev down && %s", name, err, start), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := apiServerReady(ctx, cfg); err != nil {
		return false, fmt.Sprintf("cluster %q exists but its API server is not ready (%v); restart it with: %s", name, err, start), nil
	}
	summary, err := describe(ctx, cfg)
	if err != nil {
		summary = err.Error()
	}
	return true, fmt.Sprintf("cluster %q is running: %s, kubeconfig %s", name, summary, KubeconfigPath(name)), nil
}

func upHint(name string) string {
	if name == DefaultName {
		return "orderly dev up"
	}
	return "orderly dev up --name " + name
}

func containsLine(text, want string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.TrimSpace(l) == want {
			return true
		}
	}
	return false
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig %s: %w", kubeconfig, err)
	}
	cfg.Timeout = 10 * time.Second
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// createClusterArgs are the kwokctl arguments that start a cluster from the locally
// built binaries. Every binary is named, because kwokctl downloads the ones it is not
// given (kubectl has no flag: see kwokctlRunner's environment).
func createClusterArgs(name string, bins *Binaries, extraArgs []string) []string {
	args := []string{
		"create", "cluster",
		"--name", name,
		"--runtime", "binary",
		// Empty: do not add a context to (and switch) the user's ~/.kube/config.
		"--kubeconfig=",
		"--quiet-pull",
		"--timeout", "5m",
		"--etcd-binary", bins.Etcd,
		"--kube-apiserver-binary", bins.KubeAPIServer,
		"--kube-controller-manager-binary", bins.KubeControllerManager,
		"--kube-scheduler-binary", bins.KubeScheduler,
		"--kwok-controller-binary", bins.Kwok,
	}
	for _, a := range append(append([]string{}, defaultExtraArgs...), extraArgs...) {
		args = append(args, "--extra-args", a)
	}
	return args
}

// create runs `kwokctl create cluster` under a machine-wide lock. kwokctl picks the
// new cluster's ports by probing which are free and records them only once the
// cluster is installed; two clusters created at the same moment (two test runs) could
// otherwise both pick the same ports. Starting one takes seconds, so waiting is cheap.
func (k kwokctlRunner) create(ctx context.Context, name string, bins *Binaries, extraArgs []string, out io.Writer) error {
	unlock, err := lockFile(filepath.Join(kwokWorkDir(k.root), ".create.lock"), "creating another cluster", out)
	if err != nil {
		return err
	}
	defer unlock()
	_, err = k.run(ctx, createClusterArgs(name, bins, extraArgs)...)
	return err
}

// scaleNodesArgs sets the number of simulated nodes, each with room for podsPerNode
// pods. kwokctl only creates or deletes the difference.
func scaleNodesArgs(name string, nodes int) []string {
	return []string{
		"scale", "node",
		"--name", name,
		"--replicas", strconv.Itoa(nodes),
		"--param", ".allocatable.pods=" + strconv.Itoa(podsPerNode),
	}
}

type kwokctlRunner struct {
	root string
	bins *Binaries
}

// env keeps kwokctl's state under the cache and points it at the local kubectl: it
// takes kubectl from PATH (or KWOK_KUBECTL_BINARY) and would otherwise download one.
func (k kwokctlRunner) env() []string {
	return []string{
		"KWOK_WORKDIR=" + kwokWorkDir(k.root),
		"KWOK_KUBE_VERSION=" + KubernetesVersion,
		"KWOK_KUBECTL_BINARY=" + k.bins.Kubectl,
		"PATH=" + filepath.Dir(k.bins.Kubectl) + string(os.PathListSeparator) + os.Getenv("PATH"),
	}
}

// run runs kwokctl and returns its standard output; its log (standard error) is only
// shown when it fails.
func (k kwokctlRunner) run(ctx context.Context, args ...string) (string, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, k.bins.Kwokctl, args...)
	cmd.Env = append(os.Environ(), k.env()...)
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	// The control plane processes kwokctl starts outlive it on purpose; do not wait for
	// anything they might have inherited.
	cmd.WaitDelay = 5 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
		return "", fmt.Errorf("kwokctl %s: %w\n%s", strings.Join(args[:min(2, len(args))], " "), err,
			indent(strings.TrimSpace(stderr.String()+"\n"+stdout.String()), "  "))
	}
	return stdout.String(), nil
}

func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// logTail is the last n lines of a component's log, to explain a cluster that did not
// settle; or why it cannot be read.
func logTail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return fmt.Sprintf("last lines of %s:\n%s", path, strings.Join(lines[max(len(lines)-n, 0):], "\n"))
}
