package devcluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// Binaries are the absolute paths of the local control plane's executables.
type Binaries struct {
	// Dir is the cache directory under which each component has a versioned directory
	// (kubernetes-v1.37.2, etcd-v3.6.5, kwok-v0.8.0).
	Dir string

	Etcd                  string
	KubeAPIServer         string
	KubeControllerManager string
	KubeScheduler         string
	Kubectl               string
	Kwok                  string
	Kwokctl               string
}

// heartbeatInterval is how often a long build says it is still alive.
const heartbeatInterval = 30 * time.Second

// EnsureBinaries returns the local control plane's binaries, building from source
// (through the Go module proxy, with the go command on PATH) those that are not in the
// cache yet. Progress goes to out.
func EnsureBinaries(ctx context.Context, out io.Writer) (*Binaries, error) {
	b := newBuilder(out)
	defer b.close()
	if err := b.ensureKubernetes(ctx, kubeCommands); err != nil {
		return nil, err
	}
	if err := b.ensureEtcd(ctx); err != nil {
		return nil, err
	}
	if err := b.ensureKwok(ctx); err != nil {
		return nil, err
	}
	return binariesIn(b.root), nil
}

func binariesIn(root string) *Binaries {
	kube, etcd, kwok := kubernetesBinDir(root), etcdBinDir(root), kwokBinDir(root)
	return &Binaries{
		Dir:                   binRoot(root),
		Etcd:                  filepath.Join(etcd, "etcd"),
		KubeAPIServer:         filepath.Join(kube, kubeAPIServer),
		KubeControllerManager: filepath.Join(kube, kubeControllerManager),
		KubeScheduler:         filepath.Join(kube, kubeScheduler),
		Kubectl:               filepath.Join(kube, kubectl),
		Kwok:                  filepath.Join(kwok, "kwok"),
		Kwokctl:               filepath.Join(kwok, "kwokctl"),
	}
}

type builder struct {
	root string
	out  io.Writer

	goBin  string
	unlock func()
}

func newBuilder(out io.Writer) *builder {
	if out == nil {
		out = io.Discard
	}
	return &builder{root: CacheDir(), out: out}
}

func (b *builder) close() {
	if b.unlock != nil {
		b.unlock()
		b.unlock = nil
	}
}

// prepare finds the go command and takes the build lock; it runs only when something
// has to be built, so a warm cache needs neither.
func (b *builder) prepare() error {
	if b.unlock != nil {
		return nil
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		return fmt.Errorf("the go command is needed to build the local control plane from source, "+
			"but it is not on PATH (install Go 1.26 or newer): %w", err)
	}
	b.goBin = goBin
	unlock, err := lockFile(filepath.Join(b.root, ".build.lock"), "building binaries", b.out)
	if err != nil {
		return err
	}
	b.unlock = unlock
	return nil
}

// missing returns the names, among names, that are not an executable file in dir.
func missing(dir string, names []string) []string {
	var out []string
	for _, n := range names {
		fi, err := os.Stat(filepath.Join(dir, n))
		if err != nil || !fi.Mode().IsRegular() || fi.Mode().Perm()&0o111 == 0 {
			out = append(out, n)
		}
	}
	return out
}

// needs reports the binaries of names missing from dir, taking the build lock first if
// any is; it rechecks under the lock because another process may just have built them.
func (b *builder) needs(dir string, names []string) ([]string, error) {
	if len(missing(dir, names)) == 0 {
		return nil, nil
	}
	if err := b.prepare(); err != nil {
		return nil, err
	}
	todo := missing(dir, names)
	if len(todo) == 0 {
		return nil, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	// Leftovers of interrupted builds; under the lock nobody else is using them.
	stale, _ := filepath.Glob(filepath.Join(dir, ".build-*"))
	for _, s := range stale {
		_ = os.RemoveAll(s)
	}
	return todo, nil
}

// ensureKubernetes builds the missing ones among the given Kubernetes commands.
func (b *builder) ensureKubernetes(ctx context.Context, names []string) error {
	dir := kubernetesBinDir(b.root)
	todo, err := b.needs(dir, names)
	if err != nil || len(todo) == 0 {
		return err
	}
	estimate := "~5 min"
	if slices.Contains(todo, kubeAPIServer) {
		estimate = "~11 min"
		if len(todo) > 1 {
			estimate = "~15 min"
		}
	}
	s := b.startStep(ctx, fmt.Sprintf("building %s %s (first time only: %s on 2 cores)",
		strings.Join(todo, ", "), KubernetesVersion, estimate), "kubernetes-"+KubernetesVersion)
	return s.finish(b.buildKubernetes(ctx, s, dir, todo))
}

func (b *builder) buildKubernetes(ctx context.Context, s *step, dir string, todo []string) error {
	ldflags, err := kubeLDFlags(KubernetesVersion, kubeBuildDate)
	if err != nil {
		return err
	}
	staging, err := stagingVersion(KubernetesVersion)
	if err != nil {
		return err
	}
	src := srcDir(b.root, "kubernetes-"+KubernetesVersion)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}

	// The staging modules are read from this release's own go.mod rather than listed
	// here, so that a version bump that adds or drops one keeps building.
	var dl struct {
		GoMod string
		Error string
	}
	stdout, err := s.run(ctx, b.root, nil, "mod", "download", "-json", "k8s.io/kubernetes@"+KubernetesVersion)
	if jerr := json.Unmarshal(stdout, &dl); jerr == nil && dl.Error != "" {
		return fmt.Errorf("downloading k8s.io/kubernetes@%s: %s", KubernetesVersion, dl.Error)
	}
	if err != nil {
		return err
	}
	if dl.GoMod == "" {
		return fmt.Errorf("go mod download -json k8s.io/kubernetes@%s returned no GoMod path", KubernetesVersion)
	}
	gomod, err := os.ReadFile(dl.GoMod)
	if err != nil {
		return err
	}
	stagingModules, err := parseStagingReplaces(gomod)
	if err != nil {
		return fmt.Errorf("k8s.io/kubernetes@%s: %w", KubernetesVersion, err)
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(kubeBuildGoMod(KubernetesVersion, staging, stagingModules)), 0o644); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "tools.go"), []byte(kubeBuildToolsGo(kubeCommands)), 0o644); err != nil {
		return err
	}
	if _, err := s.run(ctx, src, nil, "mod", "tidy"); err != nil {
		return err
	}

	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	args := []string{"build", "-ldflags", ldflags, "-o", tmp + string(filepath.Separator)}
	for _, n := range todo {
		args = append(args, kubeCommandPackage(n))
	}
	if _, err := s.run(ctx, src, nil, args...); err != nil {
		return err
	}
	if slices.Contains(todo, kubeAPIServer) {
		if err := checkVersion(ctx, filepath.Join(tmp, kubeAPIServer), "Kubernetes "+KubernetesVersion); err != nil {
			return err
		}
	}
	return renameAll(tmp, dir, todo)
}

func (b *builder) ensureEtcd(ctx context.Context) error {
	dir := etcdBinDir(b.root)
	todo, err := b.needs(dir, []string{"etcd"})
	if err != nil || len(todo) == 0 {
		return err
	}
	s := b.startStep(ctx, fmt.Sprintf("building etcd %s (first time only: ~1 min on 2 cores)", EtcdVersion), "etcd-"+EtcdVersion)
	return s.finish(b.buildEtcd(ctx, s, dir))
}

func (b *builder) buildEtcd(ctx context.Context, s *step, dir string) error {
	src := srcDir(b.root, "etcd-"+EtcdVersion)
	if err := os.MkdirAll(src, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module orderly.dev/etcdbuild\n\ngo 1.26\n"), 0o644); err != nil {
		return err
	}
	// The server module's root package is etcd's main.
	const pkg = "go.etcd.io/etcd/server/v3"
	if _, err := s.run(ctx, src, nil, "get", pkg+"@"+EtcdVersion); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	if _, err := s.run(ctx, src, nil, "build", "-ldflags", "-s -w", "-o", filepath.Join(tmp, "etcd"), pkg); err != nil {
		return err
	}
	if err := checkVersion(ctx, filepath.Join(tmp, "etcd"), "etcd Version: "+strings.TrimPrefix(EtcdVersion, "v")); err != nil {
		return err
	}
	return renameAll(tmp, dir, []string{"etcd"})
}

func (b *builder) ensureKwok(ctx context.Context) error {
	dir := kwokBinDir(b.root)
	todo, err := b.needs(dir, []string{"kwok", "kwokctl"})
	if err != nil || len(todo) == 0 {
		return err
	}
	s := b.startStep(ctx, fmt.Sprintf("building kwok, kwokctl %s (first time only: ~3 min on 2 cores)", KwokVersion), "kwok-"+KwokVersion)
	return s.finish(b.buildKwok(ctx, s, dir))
}

func (b *builder) buildKwok(ctx context.Context, s *step, dir string) error {
	tmp, err := os.MkdirTemp(dir, ".build-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	// kwok's go.mod has no replace directives, so go install pkg@version works as is.
	if _, err := s.run(ctx, b.root, []string{"GOBIN=" + tmp}, "install",
		"sigs.k8s.io/kwok/cmd/kwok@"+KwokVersion, "sigs.k8s.io/kwok/cmd/kwokctl@"+KwokVersion); err != nil {
		return err
	}
	return renameAll(tmp, dir, []string{"kwok", "kwokctl"})
}

// renameAll moves freshly built binaries into place; a rename within a directory is
// atomic, so an interrupted build never leaves a half-written binary under its name.
func renameAll(from, to string, names []string) error {
	for _, n := range names {
		if err := os.Rename(filepath.Join(from, n), filepath.Join(to, n)); err != nil {
			return err
		}
	}
	return nil
}

func checkVersion(ctx context.Context, bin, want string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s --version: %w: %s", filepath.Base(bin), err, bytes.TrimSpace(out))
	}
	if !strings.Contains(string(out), want) {
		return fmt.Errorf("%s --version printed %q, want it to contain %q", filepath.Base(bin), strings.TrimSpace(string(out)), want)
	}
	return nil
}

// step is one long-running build: it announces itself, prints a heartbeat with the
// elapsed time, keeps the go command's output in a log file, and shows the end of that
// log only if the step fails.
type step struct {
	goBin   string
	out     io.Writer
	logPath string
	log     *os.File
	start   time.Time
	stop    chan struct{}
	wg      sync.WaitGroup
}

func (b *builder) startStep(ctx context.Context, title, logName string) *step {
	s := &step{goBin: b.goBin, out: b.out, logPath: logPath(b.root, logName), start: time.Now(), stop: make(chan struct{})}
	fmt.Fprintf(b.out, "%s...\n", title)
	if err := os.MkdirAll(filepath.Dir(s.logPath), 0o755); err == nil {
		s.log, _ = os.Create(s.logPath)
	}
	if s.log != nil {
		fmt.Fprintf(s.log, "# %s (started %s)\n", title, s.start.Format(time.RFC3339))
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(heartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-t.C:
				fmt.Fprintf(s.out, "  still building, %s elapsed\n", s.elapsed())
			case <-s.stop:
				return
			case <-ctx.Done():
				return
			}
		}
	}()
	return s
}

func (s *step) elapsed() time.Duration { return time.Since(s.start).Round(time.Second) }

// run runs the go command in dir, with extra environment variables, and returns its
// standard output; everything it prints also goes to the step's log.
func (s *step) run(ctx context.Context, dir string, env []string, args ...string) ([]byte, error) {
	var stdout bytes.Buffer
	logw := io.Discard
	if s.log != nil {
		logw = s.log
		envPrefix := ""
		if len(env) > 0 {
			envPrefix = shellJoin(env, " ") + " "
		}
		fmt.Fprintf(s.log, "\n$ cd %s && %sgo %s\n", dir, envPrefix, shellJoin(args, " "))
	}
	cmd := exec.CommandContext(ctx, s.goBin, args...)
	cmd.Dir = dir
	// The build modules are standalone: a go.work of the caller must not pull them in.
	cmd.Env = append(append(os.Environ(), "GOWORK=off"), env...)
	cmd.Stdout = io.MultiWriter(&stdout, logw)
	cmd.Stderr = logw
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		if ctx.Err() != nil {
			return stdout.Bytes(), ctx.Err()
		}
		return stdout.Bytes(), fmt.Errorf("go %s: %w", args[0]+" "+lastArg(args), err)
	}
	return stdout.Bytes(), nil
}

// shellJoin quotes the words that need it, so a logged command can be pasted into a
// shell to reproduce a failure.
func shellJoin(words []string, sep string) string {
	quoted := make([]string, 0, len(words))
	for _, w := range words {
		if w == "" || strings.ContainsAny(w, " \t\n'\"$\\") {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		quoted = append(quoted, w)
	}
	return strings.Join(quoted, sep)
}

func lastArg(args []string) string {
	if len(args) < 2 {
		return ""
	}
	return args[len(args)-1]
}

// finish ends the step and reports its outcome; on failure it prints the end of the
// log, where the go command's error is.
func (s *step) finish(err error) error {
	close(s.stop)
	s.wg.Wait()
	if s.log != nil {
		if err != nil {
			fmt.Fprintf(s.log, "\n# failed after %s: %v\n", s.elapsed(), err)
		} else {
			fmt.Fprintf(s.log, "\n# done in %s\n", s.elapsed())
		}
		_ = s.log.Close()
	}
	if err == nil {
		fmt.Fprintf(s.out, "  done in %s\n", s.elapsed())
		return nil
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintf(s.out, "  interrupted after %s\n", s.elapsed())
		return err
	}
	fmt.Fprintf(s.out, "  FAILED after %s; full log: %s\n", s.elapsed(), s.logPath)
	if tail := tailFile(s.logPath, 40); tail != "" {
		fmt.Fprintf(s.out, "  last lines of the log:\n%s\n", indent(tail, "    "))
	}
	return fmt.Errorf("%w (log: %s)", err, s.logPath)
}

func tailFile(path string, n int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

func indent(s, prefix string) string {
	return prefix + strings.ReplaceAll(s, "\n", "\n"+prefix)
}
