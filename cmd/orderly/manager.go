package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/utils/clock"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	controllers "orderly.dev/orderly/internal/controller"
	"orderly.dev/orderly/internal/controller/secrets/secretrotation"
	"orderly.dev/orderly/internal/controller/tenancy/tenant"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/mysql"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/version"
	orderlywebhook "orderly.dev/orderly/internal/webhook"
)

// controllerNames lists every controller by the name --controllers takes.
func controllerNames() []string {
	names := make([]string, 0, len(controllers.All))
	for _, c := range controllers.All {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

// workerDefaults says how many reconciles each controller runs at once by default,
// e.g. "canary 16, sleepschedule 8, the others 4".
func workerDefaults() string {
	var own []string
	for _, c := range controllers.All {
		if c.Workers > 0 && c.Workers != kit.DefaultWorkers {
			own = append(own, fmt.Sprintf("%s %d", c.Name, c.Workers))
		}
	}
	slices.Sort(own)
	return strings.Join(append(own, fmt.Sprintf("the others %d", kit.DefaultWorkers)), ", ")
}

// selectControllers returns the controllers named, or an error naming one unknown.
func selectControllers(names []string) ([]kit.Controller, error) {
	out := make([]kit.Controller, 0, len(names))
	for _, name := range names {
		i := slices.IndexFunc(controllers.All, func(c kit.Controller) bool { return c.Name == name })
		if i < 0 {
			return nil, fmt.Errorf("unknown controller %q in --controllers; known: %s", name, strings.Join(controllerNames(), ", "))
		}
		out = append(out, controllers.All[i])
	}
	return out, nil
}

func newScheme() *runtime.Scheme { return scheme.New() }

type managerOptions struct {
	bindableClusterRoles    []string
	kubeconfig              string
	controllers             []string
	leaderElect             bool
	leaderElectionNamespace string
	leaseDuration           time.Duration
	renewDeadline           time.Duration
	retryPeriod             time.Duration
	metricsAddr             string
	metrics                 metricsOptions
	probeAddr               string
	pprofAddr               string
	qps                     float32
	burst                   int
	concurrency             int
	logFormat               string
	logLevel                string
	webhook                 webhookOptions
}

func newManagerCommand() *cobra.Command {
	o := managerOptions{}
	cmd := &cobra.Command{
		Use:   "manager",
		Short: "Run Orderly's controllers in one controller-runtime manager",
		Long: "Run Orderly's controllers against a Kubernetes cluster, with leader election, Prometheus\n" +
			"metrics and health probes. Uses --kubeconfig, else $KUBECONFIG, else the in-cluster config.\n\n" +
			"Controllers: " + strings.Join(controllerNames(), ", "),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runManager(ctrl.SetupSignalHandler(), o)
		},
	}
	addManagerFlags(cmd.Flags(), &o)
	return cmd
}

func addManagerFlags(f *pflag.FlagSet, o *managerOptions) {
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")
	f.StringSliceVar(&o.controllers, "controllers", controllerNames(), "controllers to run (comma-separated)")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that only one replica reconciles at a time")
	f.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "the manager's namespace: of the leader election Lease and the webhook's Service and Secret (default: the pod's namespace, else orderly-system)")
	// Named as kube-controller-manager and kube-scheduler name them. The renew deadline
	// is how long an API server outage the leader survives: past it, the manager
	// exits (and is restarted) rather than risk two leaders.
	f.DurationVar(&o.leaseDuration, "leader-elect-lease-duration", defaultLeaseDuration, "how long a standby replica waits after the leader's last renewal before it takes over (a killed leader is replaced after about this long)")
	f.DurationVar(&o.renewDeadline, "leader-elect-renew-deadline", defaultRenewDeadline, "how long the leader keeps trying to renew its lease (e.g. through an API server outage) before it gives up leadership and exits; less than --leader-elect-lease-duration")
	f.DurationVar(&o.retryPeriod, "leader-elect-retry-period", defaultRetryPeriod, "how often replicas try to acquire or renew the lease")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	addMetricsFlags(f, &o.metrics)
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	// Off by default: profiles show the objects in the cache, so bind it to loopback
	// and reach it with kubectl port-forward.
	f.StringVar(&o.pprofAddr, "pprof-bind-address", "", "address of Go's /debug/pprof endpoints, for profiling memory and CPU (empty: off; e.g. 127.0.0.1:8082)")
	f.Float32Var(&o.qps, "kube-api-qps", 0, "client-side limit of requests per second to the API server, for the whole process (0: none, the API server's Priority and Fairness paces Orderly)")
	f.IntVar(&o.burst, "kube-api-burst", 0, "burst of requests above --kube-api-qps (0: twice --kube-api-qps)")
	f.IntVar(&o.concurrency, "max-concurrent-reconciles", 0, "reconciles that each controller runs at once (0: each controller's own default: "+workerDefaults()+")")
	f.StringVar(&o.logFormat, "log-format", "json", "log format: json or console")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info or error")
	f.StringSliceVar(&o.bindableClusterRoles, "tenant-bindable-clusterroles", tenant.DefaultBindableClusterRoles, "ClusterRoles a Tenant may bind in its namespaces, besides orderly-tenant-admin; the manager's RBAC must grant bind on each (docs/tenant.md)")
	f.DurationVar(&secretrotation.MinInterval, "secretrotation-min-interval", time.Hour, "shortest SecretRotation spec.interval accepted (lower it for tests only)")
	addWebhookFlags(f, &o.webhook)
	addImageScanFlags(f)
}

// restConfig is the client configuration of every command; its warnings go to
// standard error (the manager logs them instead).
func restConfig(kubeconfig string) (*rest.Config, error) {
	var (
		cfg *rest.Config
		err error
	)
	if kubeconfig != "" {
		cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig)
	} else {
		cfg, err = ctrl.GetConfig()
	}
	if err != nil {
		return nil, err
	}
	cfg.WarningHandler, cfg.WarningHandlerWithContext = nil, cliWarnings()
	return cfg, nil
}

func leaderElectionNamespace(flag string) string {
	if flag != "" {
		return flag
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		return strings.TrimSpace(string(b))
	}
	return "orderly-system"
}

// checkLeaseNamespace refuses to start a manager whose leader election namespace does
// not exist: it would wait for a Lease it can never create, running no controller,
// with only an error repeated in its log every few seconds. Any other answer (the
// namespace is there, reading it is forbidden, the API server is not reachable yet)
// is left to the manager, which retries.
func checkLeaseNamespace(ctx context.Context, cfg *rest.Config, namespace string) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	_, err = cs.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("the leader election namespace %q does not exist: create it, name another with --leader-election-namespace, or run a single replica with --leader-elect=false", namespace)
	}
	return nil
}

// defaultGCPercent is the manager's GOGC unless its environment sets GOGC. The
// manager's live heap is small (its caches hold trimmed objects), and most of its
// resident memory is the headroom the garbage collector lets the heap grow into
// while watch events and write responses are decoded during a transition: at Go's
// default of 100 the heap reaches twice what is live. With 50 (and 32 SleepSchedule
// workers) BenchmarkSleepSchedule's peak fell from 110 to 90.5 MiB, for a little
// more CPU in the collector.
const defaultGCPercent = 50

func runManager(ctx context.Context, o managerOptions) error {
	gcPercent := os.Getenv("GOGC")
	if gcPercent == "" {
		debug.SetGCPercent(defaultGCPercent)
		gcPercent = strconv.Itoa(defaultGCPercent)
	}
	memLimit := setMemoryLimit()
	zapOpts := zap.Options{Development: o.logFormat == "console"}
	switch o.logLevel {
	case "debug":
		zapOpts.Level = zapcore.DebugLevel
	case "error":
		zapOpts.Level = zapcore.ErrorLevel
	case "info", "":
	default:
		return fmt.Errorf("unknown --log-level %q: use debug, info or error", o.logLevel)
	}
	if o.logFormat != "json" && o.logFormat != "console" {
		return fmt.Errorf("unknown --log-format %q: use json or console", o.logFormat)
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	log := ctrl.Log.WithName("setup")

	selected, err := selectControllers(o.controllers)
	if err != nil {
		return err
	}
	if err := imageScanFlags.apply(); err != nil {
		return err
	}
	webhookOpts := o.webhook.options()
	webhookOpts.ImagePolicy = imageScanFlags.webhook
	webhookOpts.Conversion = servesConversion(webhookOpts.URL)
	if _, err := webhookOpts.Validate(); err != nil {
		return err
	}
	if err := o.metrics.validate(); err != nil {
		return err
	}
	registerClientLatency()
	leaseDuration, renewDeadline, retryPeriod, err := leaseTimings(o)
	if err != nil {
		return err
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading Kubernetes client config: %w", err)
	}
	if err := setClientLimits(cfg, o.qps, o.burst); err != nil {
		return err
	}
	cfg.UserAgent = "orderly/" + version.Version
	cfg.WarningHandlerWithContext = managerWarnings()

	scheme := newScheme()
	byObject, err := kit.MergeCache(scheme, selected)
	if err != nil {
		return err
	}
	namespace := leaderElectionNamespace(o.leaderElectionNamespace)
	if o.leaderElect {
		if err := checkLeaseNamespace(ctx, cfg, namespace); err != nil {
			return err
		}
	}
	// The database connector is shared by the data controllers and closed when the
	// manager stops.
	databases := database.Engines{string(datav1alpha1.EnginePostgres): postgres.NewConnector(), string(datav1alpha1.EngineMySQL): mysql.NewConnector()}
	defer databases.Close()
	admissionServer, err := orderlywebhook.Prepare(ctx, cfg, webhookOpts, namespace, selected)
	if err != nil {
		return err
	}
	deps := kit.Deps{
		Options:              controller.Options{MaxConcurrentReconciles: o.concurrency},
		Clock:                clock.RealClock{},
		Databases:            databases,
		Admission:            admissionServer.Admission,
		Namespace:            namespace,
		BindableClusterRoles: o.bindableClusterRoles,
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		WebhookServer:                 admissionServer.NewServer(),
		Metrics:                       o.metrics.serverOptions(o.metricsAddr),
		HealthProbeBindAddress:        o.probeAddr,
		PprofBindAddress:              o.pprofAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "orderly-manager",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 &leaseDuration,
		RenewDeadline:                 &renewDeadline,
		RetryPeriod:                   &retryPeriod,
		Cache:                         cache.Options{ByObject: byObject},
		GracefulShutdownTimeout:       ptr.To(15 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	// Ready means the caches have synced: a replica that answers before then would
	// take webhook requests, and tell tests and benchmarks it is running, too early.
	if err := mgr.AddReadyzCheck("caches", cachesSynced(mgr)); err != nil {
		return err
	}
	if err := admissionServer.Register(ctx, mgr); err != nil {
		return err
	}
	if !webhookOpts.Conversion {
		if err := orderlywebhook.RegisterNoConversion(mgr); err != nil {
			return err
		}
	}
	for _, c := range selected {
		if err := c.Setup(ctx, mgr, deps.For(c)); err != nil {
			return fmt.Errorf("setting up controller %q: %w", c.Name, err)
		}
	}
	slices.Sort(o.controllers)
	log.Info("Starting manager", "version", version.Version, "controllers", o.controllers, "leaderElection", o.leaderElect,
		"GOGC", gcPercent, "softMemoryLimitBytes", memLimit)
	return mgr.Start(ctx)
}

// Lease timings of controller-runtime and of the flags by default.
const (
	defaultLeaseDuration = 15 * time.Second
	defaultRenewDeadline = 10 * time.Second
	defaultRetryPeriod   = 2 * time.Second
)

// leaseTimings returns the lease duration, renew deadline and retry period (the
// defaults for those left at zero, as in managerOptions built without flags), or an
// error naming the flags when client-go would refuse them once the manager runs.
func leaseTimings(o managerOptions) (lease, renew, retry time.Duration, err error) {
	lease, renew, retry = cmp.Or(o.leaseDuration, defaultLeaseDuration), cmp.Or(o.renewDeadline, defaultRenewDeadline), cmp.Or(o.retryPeriod, defaultRetryPeriod)
	switch {
	case lease < 0 || renew < 0 || retry < 0:
		err = errors.New("--leader-elect-lease-duration, --leader-elect-renew-deadline and --leader-elect-retry-period must be positive")
	case renew >= lease:
		err = fmt.Errorf("--leader-elect-renew-deadline (%s) must be less than --leader-elect-lease-duration (%s)", renew, lease)
	case float64(renew) <= leaderelection.JitterFactor*float64(retry):
		err = fmt.Errorf("--leader-elect-renew-deadline (%s) must be more than %.1f times --leader-elect-retry-period (%s)", renew, leaderelection.JitterFactor, retry)
	}
	return lease, renew, retry, err
}

// cachesSynced is a readiness check that passes once the manager's caches have synced.
func cachesSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !mgr.GetCache().WaitForCacheSync(ctx) {
			return errors.New("caches have not synced yet")
		}
		return nil
	}
}
