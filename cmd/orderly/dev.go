package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/spf13/cobra"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/devstack"
	"orderly.dev/orderly/internal/standin/certmanager"
	"orderly.dev/orderly/internal/standin/versitygw"
)

func newDevCommand() *cobra.Command {
	dev := &cobra.Command{
		Use:   "dev",
		Short: "Run a local Kubernetes control plane for development, without Docker",
		Long: `Build and run a real local Kubernetes control plane (etcd, kube-apiserver,
kube-controller-manager, kube-scheduler) with simulated kwok nodes, without a container
runtime.

Every binary is compiled from source through the Go module proxy with the go command on
PATH, and cached by version under $` + devcluster.CacheDirEnv + ` (default: the user's cache
directory, e.g. ~/.cache/orderly). The first build takes about 15 minutes on 2 cores;
later runs reuse the cache and a cluster starts in seconds.

Versions: Kubernetes ` + devcluster.KubernetesVersion + `, etcd ` + devcluster.EtcdVersion + `, kwok ` + devcluster.KwokVersion + `.
The cluster's kubeconfig lives in the cache; your ~/.kube/config is never modified.`,
		Example: `  orderly dev up --nodes 2
  export KUBECONFIG=$(orderly dev kubeconfig)
  orderly dev status
  orderly dev down

  # Assets for controller-runtime envtest:
  KUBEBUILDER_ASSETS=$(orderly dev assets) go test ./...`,
		Args: cobra.NoArgs,
	}
	dev.AddCommand(
		newDevUpCommand(),
		newDevDownCommand(),
		newDevStatusCommand(),
		newDevKubeconfigCommand(),
		newDevKubectlPathCommand(),
		newDevBuildCommand(),
		newDevAssetsCommand(),
		newDevPostgresCommand(),
		newDevRunCommand(),
		newDevDigCommand(),
		newDevServeCanaryMetricsCommand(),
	)
	return dev
}

// interruptible cancels the context on Ctrl-C or SIGTERM, so that builds and waits stop
// cleanly and leave no temporary files behind.
func interruptible(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
}

func downCommand(name string) string {
	if name == devcluster.DefaultName {
		return "orderly dev down"
	}
	return "orderly dev down --name " + name
}

func addNameFlag(cmd *cobra.Command, name *string) {
	cmd.Flags().StringVar(name, "name", devcluster.DefaultName, "name of the local cluster")
}

func newDevUpCommand() *cobra.Command {
	var name string
	var (
		nodes     int
		extraArgs []string
		with      []string
	)
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the local cluster (building its binaries the first time) and install Orderly's CRDs",
		Long: `Start the local cluster, or converge it if it already runs.

Builds the binaries that are not cached yet, starts the control plane with kwokctl's
binary runtime, scales the simulated nodes to --nodes (each holds up to 1000 pods),
applies Orderly's CustomResourceDefinitions and the tenant admin ClusterRole with
server-side apply, and waits until the API server, the nodes and the CRDs are ready.
kube-controller-manager runs with kube-api-qps=500 and kube-api-burst=1000, so that
it keeps up with thousands of objects.

Running it again on a running cluster only rescales the nodes and reapplies the
manifests; --extra-args only take effect when the cluster is created.`,
		Example: `  orderly dev up
  orderly dev up --nodes 10 --name bench --extra-args kube-apiserver=max-requests-inflight=1000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			parts, err := devstack.ParseParts(with)
			if err != nil {
				return err
			}
			manifests, err := config.DevManifests()
			if err != nil {
				return fmt.Errorf("reading the embedded manifests: %w", err)
			}
			out := cmd.OutOrStdout()
			ctrllog.SetLogger(logr.Discard())
			if len(parts) > 0 {
				// The stand-ins built from source build beside the cluster's binaries.
				if _, err := devstack.Build(ctx, out); err != nil {
					return err
				}
			}
			_, err = devcluster.Up(ctx, devcluster.Options{
				Name:      name,
				Nodes:     nodes,
				ExtraArgs: extraArgs,
				Manifests: manifests,
			}, out)
			if err != nil || len(parts) == 0 {
				return err
			}
			fmt.Fprintf(out, "\nbringing up the local stand-ins (%s)...\n", strings.Join(partStrings(parts), ", "))
			stack, err := devstack.Up(ctx, devstack.Options{Cluster: name, Parts: parts, Detached: true,
				ManagerMetrics: fmt.Sprintf("127.0.0.1:%d", devMetricsPort)}, out)
			if err != nil {
				return err
			}
			printFixes(out, stack)
			fmt.Fprintf(out, "\nThey run until `%s`. Run the manager beside them with:\n\n  orderly manager --kubeconfig %s --leader-elect=false --metrics-bind-address=:%d --health-probe-bind-address=:%d %s\n",
				downCommand(name), devcluster.KubeconfigPath(name), devMetricsPort, devProbePort, strings.Join(stack.ManagerArgs(devWebhookPort), " "))
			return nil
		},
	}
	addNameFlag(cmd, &name)
	cmd.Flags().IntVar(&nodes, "nodes", devcluster.DefaultNodes, "number of simulated (kwok) nodes")
	cmd.Flags().StringSliceVar(&with, "with", nil,
		"local stand-ins to bring up beside the cluster, for the samples: all, or some of "+strings.Join(partNames(), ", ")+
			" (e.g. gateway-api: the Gateway API "+devcluster.GatewayAPIVersion+" CRDs and the samples' Gateways)")
	cmd.Flags().StringArrayVar(&extraArgs, "extra-args", nil,
		"extra flag for a control plane component, as component=flag=value (repeatable; only when the cluster is created)")
	return cmd
}

func newDevDownCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster and its stand-ins, and delete their state",
		Long: `Stop the local stand-ins that 'orderly dev up --with' started (the member cluster,
PostgreSQL, the DNS server, the S3 store, Prometheus, the registry, cert-manager), then
the local cluster's processes, and delete their state (etcd data, certificates, logs,
kubeconfig; the stand-ins' files, PostgreSQL's databases too). The built binaries stay
cached. Succeeds if the cluster does not exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			if err := devstack.Down(ctx, name, cmd.OutOrStdout()); err != nil {
				return err
			}
			return devcluster.Down(ctx, name, cmd.OutOrStdout())
		},
	}
	addNameFlag(cmd, &name)
	return cmd
}

func newDevStatusCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Tell whether the local cluster runs (exit code 1 if not)",
		Long: `Print one line about the local cluster: its version, address and nodes if it runs,
or what to do if it does not. The exit code is 0 only when the cluster exists and its
API server answers /readyz, so scripts can do: orderly dev status || orderly dev up`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			running, detail, err := devcluster.Status(cmd.Context(), name)
			if err != nil {
				return err
			}
			if !running {
				return errors.New(detail)
			}
			fmt.Fprintln(cmd.OutOrStdout(), detail)
			for _, line := range devstack.Status(name) {
				fmt.Fprintln(cmd.OutOrStdout(), "  stand-in "+line)
			}
			return nil
		},
	}
	addNameFlag(cmd, &name)
	return cmd
}

func newDevKubeconfigCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "kubeconfig",
		Short: "Print the path of the local cluster's kubeconfig",
		Long: `Print the path of the local cluster's kubeconfig (whether or not the cluster runs),
for use as: export KUBECONFIG=$(orderly dev kubeconfig)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			fmt.Fprintln(cmd.OutOrStdout(), devcluster.KubeconfigPath(name))
			return nil
		},
	}
	addNameFlag(cmd, &name)
	return cmd
}

func newDevKubectlPathCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "kubectl-path",
		Short: "Print the path of the kubectl built for the local cluster (same version)",
		Long: `Print the absolute path of the kubectl built for the local cluster, building the
binaries first if they are not cached yet (progress goes to standard error). Use it when
no kubectl is installed, or when the installed one is too old for the cluster:

  $(orderly dev kubectl-path) --kubeconfig "$(orderly dev kubeconfig)" get nodes`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			bins, err := devcluster.EnsureBinaries(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), bins.Kubectl)
			return nil
		},
	}
}

func newDevBuildCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "build",
		Short: "Build (or find cached) all binaries of the local cluster and its stand-ins, and print their directory",
		Long: `Build the binaries of the local cluster that are not cached yet: kube-apiserver,
kube-controller-manager, kube-scheduler and kubectl ` + devcluster.KubernetesVersion + `, etcd ` + devcluster.EtcdVersion + `,
kwok and kwokctl ` + devcluster.KwokVersion + `; and beside them the stand-ins built from source
(versitygw ` + versitygw.Version + `, cert-manager's controller ` + certmanager.Version + `). Progress goes to standard
error; the directory that holds one subdirectory per component and version is printed
on standard output. Useful to warm the cache ahead of time (e.g. in CI).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			bins, err := devstack.Build(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), bins.Dir)
			return nil
		},
	}
}

func newDevAssetsCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "assets",
		Short: "Print a KUBEBUILDER_ASSETS directory (etcd, kube-apiserver, kubectl) for envtest",
		Long: `Build etcd, kube-apiserver and kubectl if they are not cached yet, and print the
directory that holds them, for controller-runtime's envtest. Only the directory goes to
standard output (progress goes to standard error), so it can be captured:

  KUBEBUILDER_ASSETS=$(orderly dev assets) go test ./...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			dir, err := devcluster.EnsureEnvtestAssets(ctx, cmd.ErrOrStderr())
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), dir)
			return nil
		},
	}
}
