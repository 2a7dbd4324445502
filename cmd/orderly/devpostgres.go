package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/devstack"
	"orderly.dev/orderly/internal/localpg"
	"orderly.dev/orderly/internal/scheme"
)

// devPostgresSecret is the admin credentials Secret that the sample DatabaseServer
// (config/samples) refers to: in the manager's namespace, the only one Orderly reads
// a DatabaseServer's Secrets from.
const devPostgresSecret = "orderly-system/postgres-admin"

// devPostgresOptions are the flags shared by the dev postgres commands.
type devPostgresOptions struct {
	dir, cluster, kubeconfig, secret string
	port                             int32
	optional                         bool
}

func newDevPostgresCommand() *cobra.Command {
	var o devPostgresOptions
	cmd := &cobra.Command{
		Use:   "postgres",
		Short: "Run a local PostgreSQL for the sample DatabaseServer (up|down|status)",
		Long: `Run a persistent local PostgreSQL for DevDatabases, with initdb and pg_ctl from the
postgresql package (` + localpg.InstallCommand + ` on Debian/Ubuntu; or set $` + localpg.BinDirEnv + `
to a directory with initdb, pg_ctl and postgres). It listens on 127.0.0.1:` + fmt.Sprint(localpg.DevPort) + ` (away from
5432), its superuser is ` + localpg.Admin + ` with a generated password, and its files live in
$` + devcluster.CacheDirEnv + `/postgres (as root: /var/tmp/orderly-postgres, since PostgreSQL refuses to
run as root and runs as the postgres user instead).

'up' also writes the admin credentials into the Secret ` + devPostgresSecret + ` of the
local cluster (Orderly reads a DatabaseServer's Secrets from its own namespace only),
which the sample DatabaseServer (config/samples) refers to, and creates the sample
template database ` + localpg.DevTemplate + `. 'make run' calls 'up --optional'.`,
		Example: `  orderly dev postgres up
  orderly dev postgres status
  orderly dev postgres down`,
		Args: cobra.NoArgs,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.dir, "dir", devstack.DefaultPostgresDir(), "directory of the PostgreSQL cluster's files")
	f.Int32Var(&o.port, "port", localpg.DevPort, "loopback port PostgreSQL listens on")
	cmd.AddCommand(newDevPostgresUpCommand(&o), newDevPostgresDownCommand(&o), newDevPostgresStatusCommand(&o))
	return cmd
}

func newDevPostgresUpCommand(o *devPostgresOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Start the local PostgreSQL (creating it the first time) and write its admin Secret",
		Long: `Create the PostgreSQL cluster if it does not exist, start it if it does not run, create
the sample template database, and create or update the admin credentials Secret in the
local Kubernetes cluster. Running it again is harmless.

With --optional, missing PostgreSQL binaries are reported with the command that
installs them and the exit code is 0, so that 'make run' goes on without PostgreSQL.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := interruptible(cmd)
			defer cancel()
			return devPostgresUp(ctx, *o, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	addNameFlag(cmd, &o.cluster)
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster that gets the Secret (default: the local cluster's)")
	f.StringVar(&o.secret, "secret", devPostgresSecret, "namespace/name of the admin credentials Secret, in the manager's namespace (the only one Orderly reads it from); empty for none")
	f.BoolVar(&o.optional, "optional", false, "when PostgreSQL is not installed, say how to install it and exit 0")
	return cmd
}

func newDevPostgresDownCommand(o *devPostgresOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the local PostgreSQL and delete its data",
		Long:  `Stop the local PostgreSQL and delete its files (every database in it). Succeeds if it does not exist.`,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return devPostgresDown(*o, cmd.OutOrStdout())
		},
	}
}

func newDevPostgresStatusCommand(o *devPostgresOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Tell whether the local PostgreSQL runs (exit code 1 if not)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			detail, err := devPostgresStatus(*o)
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), detail)
			return nil
		},
	}
}

func (o devPostgresOptions) dev() localpg.Dev { return localpg.Dev{Dir: o.dir, Port: o.port} }

func devPostgresUp(ctx context.Context, o devPostgresOptions, out, errOut io.Writer) error {
	password, version, err := o.dev().Up(ctx)
	if errors.Is(err, localpg.ErrNotInstalled) && o.optional {
		fmt.Fprintf(errOut, "PostgreSQL is not installed, so no local PostgreSQL was started: the sample DatabaseServer\n"+
			"will report Reachable=False. To have one, run\n\n    %s\n\nand start again.\n", localpg.InstallCommand)
		return nil
	}
	if errors.Is(err, localpg.ErrNotInstalled) {
		return err
	}
	if err != nil {
		return fmt.Errorf("%w (--port chooses another port; 'orderly dev postgres down' deletes it to start afresh)", err)
	}
	fmt.Fprintf(out, "PostgreSQL %s runs on 127.0.0.1:%d (files in %s); superuser %s\n", version, o.port, o.dir, localpg.Admin)
	if o.secret == "" {
		return nil
	}
	if err := writeAdminSecret(ctx, o, password); err != nil {
		return err
	}
	fmt.Fprintf(out, "Its credentials are in the Secret %s, which the sample DatabaseServer uses\n", o.secret)
	return nil
}

// writeAdminSecret writes the admin credentials into the Secret --secret of the
// cluster --kubeconfig (default: the local cluster's).
func writeAdminSecret(ctx context.Context, o devPostgresOptions, password string) error {
	ns, name, ok := strings.Cut(o.secret, "/")
	if !ok || ns == "" || name == "" {
		return fmt.Errorf("--secret %q: want namespace/name", o.secret)
	}
	kubeconfig := o.kubeconfig
	if kubeconfig == "" {
		kubeconfig = devcluster.KubeconfigPath(o.cluster)
	}
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig %s (is the local cluster up? orderly dev up): %w", kubeconfig, err)
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	if err := localpg.WriteAdminSecret(ctx, c, client.ObjectKey{Namespace: ns, Name: name}, password); err != nil {
		return fmt.Errorf("%w (--secret names another)", err)
	}
	return nil
}

func devPostgresDown(o devPostgresOptions, out io.Writer) error {
	existed, err := o.dev().Down()
	if err != nil {
		return err
	}
	if !existed {
		fmt.Fprintf(out, "no local PostgreSQL in %s\n", o.dir)
		return nil
	}
	fmt.Fprintf(out, "local PostgreSQL stopped and %s removed\n", o.dir)
	return nil
}

func devPostgresStatus(o devPostgresOptions) (string, error) {
	version, err := o.dev().Status()
	switch {
	case errors.Is(err, localpg.ErrNoCluster):
		return "", fmt.Errorf("%w; create it with: orderly dev postgres up", err)
	case errors.Is(err, localpg.ErrNotRunning):
		return "", fmt.Errorf("%w; start it with: orderly dev postgres up", err)
	case err != nil:
		return "", err
	}
	return fmt.Sprintf("PostgreSQL %s runs on 127.0.0.1:%d (files in %s)", version, o.port, o.dir), nil
}
