package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"go.uber.org/zap/zapcore"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/flowcontrol"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/databaseserver"
	"orderly.dev/orderly/internal/controller/data/devdatabase"
	"orderly.dev/orderly/internal/controller/data/engine/postgres"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/controller/power/sleepschedule"
	"orderly.dev/orderly/internal/controller/tenancy/tenant"
	"orderly.dev/orderly/internal/version"
)

// managedController is one controller the manager can run.
type managedController struct {
	// cacheByObject narrows what the shared cache holds for this controller.
	cacheByObject func() map[client.Object]cache.ByObject
	setup         func(ctx context.Context, mgr ctrl.Manager, opts controller.Options, o *managerOptions) error
}

// controllers lists every controller of Orderly by the name --controllers takes.
var controllers = map[string]managedController{
	labelpolicy.Name: {
		cacheByObject: labelpolicy.CacheByObject,
		setup: func(ctx context.Context, mgr ctrl.Manager, opts controller.Options, o *managerOptions) error {
			r := &labelpolicy.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-labelpolicy"),
				Mutation: o.lpMutation}
			if w := o.lpWebhook; w != nil {
				if err := w.register(mgr); err != nil {
					return err
				}
				r.Webhook, r.WebhookCABundle = w.endpoint, w.caBundle
			}
			return r.SetupWithManager(ctx, mgr, opts)
		},
	},
	tenant.Name: {
		cacheByObject: tenant.CacheByObject,
		setup: func(ctx context.Context, mgr ctrl.Manager, opts controller.Options, _ *managerOptions) error {
			r := &tenant.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-tenant")}
			return r.SetupWithManager(ctx, mgr, opts)
		},
	},
	sleepschedule.Name: {
		cacheByObject: sleepschedule.CacheByObject,
		setup: func(ctx context.Context, mgr ctrl.Manager, opts controller.Options, _ *managerOptions) error {
			r := &sleepschedule.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-sleepschedule"),
				Clock: sleepschedule.RealClock, Writers: 4 * opts.MaxConcurrentReconciles}
			return r.SetupWithManager(ctx, mgr, opts)
		},
	},
	databaseserver.Name: {
		cacheByObject: databaseserver.CacheByObject,
		setup: func(ctx context.Context, mgr ctrl.Manager, opts controller.Options, _ *managerOptions) error {
			r := &databaseserver.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Connector: dbConnector}
			return r.SetupWithManager(ctx, mgr, opts)
		},
	},
	devdatabase.Name: {
		cacheByObject: devdatabase.CacheByObject,
		setup: func(ctx context.Context, mgr ctrl.Manager, opts controller.Options, _ *managerOptions) error {
			r := &devdatabase.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("orderly-devdatabase"), Connector: dbConnector}
			return r.SetupWithManager(ctx, mgr, opts)
		},
	},
}

// dbConnector pools the data controllers' connections to database servers.
var dbConnector = postgres.NewConnector()

func controllerNames() []string {
	names := make([]string, 0, len(controllers))
	for n := range controllers {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(tenancyv1alpha1.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.AddToScheme(s))
	utilruntime.Must(datav1alpha1.AddToScheme(s))
	utilruntime.Must(powerv1alpha1.AddToScheme(s))
	return s
}

type managerOptions struct {
	kubeconfig              string
	controllers             []string
	leaderElect             bool
	leaderElectionNamespace string
	metricsAddr             string
	probeAddr               string
	qps                     float32
	burst                   int
	concurrency             int
	logFormat               string
	logLevel                string
	webhook                 webhookOptions

	// Resolved by runManager from webhook.
	lpMutation labelpolicy.MutationMode
	lpWebhook  *labelPolicyWebhook
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
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")
	f.StringSliceVar(&o.controllers, "controllers", controllerNames(), "controllers to run (comma-separated)")
	f.BoolVar(&o.leaderElect, "leader-elect", true, "elect a leader so that only one replica reconciles at a time")
	f.StringVar(&o.leaderElectionNamespace, "leader-election-namespace", "", "the manager's namespace: of the leader election Lease and the webhook's Service and Secret (default: the pod's namespace, else orderly-system)")
	f.StringVar(&o.metricsAddr, "metrics-bind-address", ":8080", "address of the Prometheus metrics endpoint (0 disables it)")
	f.StringVar(&o.probeAddr, "health-probe-bind-address", ":8081", "address of the /healthz and /readyz endpoints")
	f.Float32Var(&o.qps, "kube-api-qps", 50, "queries per second to the API server, for the whole process")
	f.IntVar(&o.burst, "kube-api-burst", 100, "burst of queries to the API server")
	f.IntVar(&o.concurrency, "max-concurrent-reconciles", 4, "reconciles that each controller runs at once")
	f.StringVar(&o.logFormat, "log-format", "json", "log format: json or console")
	f.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info or error")
	addWebhookFlags(f, &o.webhook)
	return cmd
}

func restConfig(kubeconfig string) (*rest.Config, error) {
	if kubeconfig != "" {
		return clientcmd.BuildConfigFromFlags("", kubeconfig)
	}
	return ctrl.GetConfig()
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

func runManager(ctx context.Context, o managerOptions) error {
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

	for _, name := range o.controllers {
		if _, ok := controllers[name]; !ok {
			return fmt.Errorf("unknown controller %q in --controllers; known: %s", name, strings.Join(controllerNames(), ", "))
		}
	}
	var err error
	if o.lpMutation, err = o.webhook.validate(); err != nil {
		return err
	}
	cfg, err := restConfig(o.kubeconfig)
	if err != nil {
		return fmt.Errorf("loading Kubernetes client config: %w", err)
	}
	cfg.QPS, cfg.Burst = o.qps, o.burst
	// One limiter for the whole process: client-go otherwise gives every REST client
	// (one per kind in controller-runtime) its own, and --kube-api-qps would not bound
	// what Orderly sends to the API server in total.
	cfg.RateLimiter = flowcontrol.NewTokenBucketRateLimiter(o.qps, o.burst)
	cfg.UserAgent = "orderly/" + version.Version

	byObject := map[client.Object]cache.ByObject{}
	for _, name := range o.controllers {
		for obj, opts := range controllers[name].cacheByObject() {
			byObject[obj] = opts
		}
	}
	namespace := leaderElectionNamespace(o.leaderElectionNamespace)
	scheme := newScheme()
	var webhookOpts webhook.Options
	if slices.Contains(o.controllers, labelpolicy.Name) {
		direct, err := client.New(cfg, client.Options{Scheme: scheme})
		if err != nil {
			return err
		}
		if o.lpWebhook, webhookOpts, err = prepareLabelPolicyWebhook(ctx, cfg, direct, o.lpMutation, &o.webhook, namespace); err != nil {
			return err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        scheme,
		WebhookServer:                 webhook.NewServer(webhookOpts),
		Metrics:                       metricsserver.Options{BindAddress: o.metricsAddr},
		HealthProbeBindAddress:        o.probeAddr,
		LeaderElection:                o.leaderElect,
		LeaderElectionID:              "orderly-manager",
		LeaderElectionNamespace:       namespace,
		LeaderElectionReleaseOnCancel: true,
		Cache:                         cache.Options{ByObject: byObject},
		GracefulShutdownTimeout:       ptrTo(15 * time.Second),
	})
	if err != nil {
		return fmt.Errorf("creating manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("healthz", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("readyz", healthz.Ping); err != nil {
		return err
	}
	if o.lpWebhook != nil {
		if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
			return err
		}
	}
	for _, name := range o.controllers {
		if err := controllers[name].setup(ctx, mgr, controller.Options{MaxConcurrentReconciles: o.concurrency}, &o); err != nil {
			return fmt.Errorf("setting up controller %q: %w", name, err)
		}
	}
	slices.Sort(o.controllers)
	log.Info("Starting manager", "version", version.Version, "controllers", o.controllers, "leaderElection", o.leaderElect)
	return mgr.Start(ctx)
}

func ptrTo[T any](v T) *T { return &v }
