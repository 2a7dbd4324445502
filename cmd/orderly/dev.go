package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
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
	)
	return dev
}

// interruptible cancels the context on Ctrl-C or SIGTERM, so that builds and waits stop
// cleanly and leave no temporary files behind.
func interruptible(cmd *cobra.Command) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
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
			manifests, err := config.DevManifests()
			if err != nil {
				return fmt.Errorf("reading the embedded manifests: %w", err)
			}
			for _, w := range with {
				if w != "gateway-api" {
					return fmt.Errorf("unknown --with %q: the only extra is gateway-api", w)
				}
				gw, err := devcluster.GatewayAPIManifests(ctx)
				if err != nil {
					return err
				}
				manifests = append(manifests, gw...)
			}
			_, err = devcluster.Up(ctx, devcluster.Options{
				Name:      name,
				Nodes:     nodes,
				ExtraArgs: extraArgs,
				Manifests: manifests,
			}, cmd.OutOrStdout())
			return err
		},
	}
	addNameFlag(cmd, &name)
	cmd.Flags().IntVar(&nodes, "nodes", devcluster.DefaultNodes, "number of simulated (kwok) nodes")
	cmd.Flags().StringSliceVar(&with, "with", nil,
		"extra CRDs to install: gateway-api (the Gateway API "+devcluster.GatewayAPIVersion+" standard channel, for Canaries' HTTPRoutes)")
	cmd.Flags().StringArrayVar(&extraArgs, "extra-args", nil,
		"extra flag for a control plane component, as component=flag=value (repeatable; only when the cluster is created)")
	return cmd
}

func newDevDownCommand() *cobra.Command {
	var name string
	cmd := &cobra.Command{
		Use:   "down",
		Short: "Stop the local cluster and delete its state",
		Long: `Stop the local cluster's processes and delete its state (etcd data, certificates,
logs, kubeconfig). The built binaries stay cached. Succeeds if the cluster does not exist.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
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
		Short: "Build (or find cached) all binaries of the local cluster and print their directory",
		Long: `Build the binaries of the local cluster that are not cached yet: kube-apiserver,
kube-controller-manager, kube-scheduler and kubectl ` + devcluster.KubernetesVersion + `, etcd ` + devcluster.EtcdVersion + `,
kwok and kwokctl ` + devcluster.KwokVersion + `. Progress goes to standard error; the directory that
holds one subdirectory per component and version is printed on standard output.
Useful to warm the cache ahead of time (e.g. in CI).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			bins, err := devcluster.EnsureBinaries(ctx, cmd.ErrOrStderr())
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
