package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/controller/data/engine"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/localpg"
)

// The local PostgreSQL of `make run`; the port is kept away from 5432 so that it
// never collides with a PostgreSQL the machine already runs.
const (
	devPostgresPort   = 55432
	devPostgresSecret = "default/postgres-admin"
	// devPostgresTemplate is the database behind the sample DatabaseServer's
	// template "seeded".
	devPostgresTemplate = "app_seed"
)

// devPostgresOptions are the flags shared by the dev postgres commands.
type devPostgresOptions struct {
	dir, cluster, kubeconfig, secret string
	port                             int32
	optional                         bool
}

// defaultDevPostgresDir is under Orderly's cache; as root (whose home the postgres
// user cannot enter) it is /var/tmp/orderly-postgres.
func defaultDevPostgresDir() string {
	if os.Geteuid() == 0 {
		return "/var/tmp/orderly-postgres"
	}
	return filepath.Join(devcluster.CacheDir(), "postgres")
}

func newDevPostgresCommand() *cobra.Command {
	var o devPostgresOptions
	cmd := &cobra.Command{
		Use:   "postgres",
		Short: "Run a local PostgreSQL for the sample DatabaseServer (up|down|status)",
		Long: `Run a persistent local PostgreSQL for DevDatabases, with initdb and pg_ctl from the
postgresql package (` + localpg.InstallCommand + ` on Debian/Ubuntu; or set $` + localpg.BinDirEnv + `
to a directory with initdb, pg_ctl and postgres). It listens on 127.0.0.1:` + fmt.Sprint(devPostgresPort) + ` (away from
5432), its superuser is ` + localpg.Admin + ` with a generated password, and its files live in
$` + devcluster.CacheDirEnv + `/postgres (as root: /var/tmp/orderly-postgres, since PostgreSQL refuses to
run as root and runs as the postgres user instead).

'up' also writes the admin credentials into the Secret default/postgres-admin of the
local cluster, which the sample DatabaseServer (config/samples) refers to, and creates
the sample template database ` + devPostgresTemplate + `. 'make run' calls 'up --optional'.`,
		Example: `  orderly dev postgres up
  orderly dev postgres status
  orderly dev postgres down`,
		Args: cobra.NoArgs,
	}
	f := cmd.PersistentFlags()
	f.StringVar(&o.dir, "dir", defaultDevPostgresDir(), "directory of the PostgreSQL cluster's files")
	f.Int32Var(&o.port, "port", devPostgresPort, "loopback port PostgreSQL listens on")
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
	f.StringVar(&o.secret, "secret", devPostgresSecret, "namespace/name of the admin credentials Secret; empty for none")
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

func (o devPostgresOptions) passwordFile() string { return filepath.Join(o.dir, "admin-password") }

// devPostgres finds the binaries and describes the cluster in o.dir.
func devPostgres(o devPostgresOptions) (*localpg.Cluster, error) {
	bin, err := localpg.FindBinDir()
	if err != nil {
		return nil, err
	}
	return localpg.New(o.dir, o.port, bin)
}

func devPostgresUp(ctx context.Context, o devPostgresOptions, out, errOut io.Writer) error {
	c, err := devPostgres(o)
	if errors.Is(err, localpg.ErrNotInstalled) && o.optional {
		fmt.Fprintf(errOut, "PostgreSQL is not installed, so no local PostgreSQL was started: the sample DatabaseServer\n"+
			"will report Reachable=False. To have one, run\n\n    %s\n\nand start again.\n", localpg.InstallCommand)
		return nil
	}
	if err != nil {
		return err
	}
	password, err := devPostgresPassword(o, c)
	if err != nil {
		return err
	}
	if !c.Running() {
		if err := c.Start(); err != nil {
			return fmt.Errorf("starting PostgreSQL on 127.0.0.1:%d (is the port taken? use --port): %w", o.port, err)
		}
	}
	if err := seedTemplate(ctx, c, password); err != nil {
		return err
	}
	version, _ := c.Version()
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

// devPostgresPassword initialises the cluster with a new password the first time,
// and reads that password afterwards.
func devPostgresPassword(o devPostgresOptions, c *localpg.Cluster) (string, error) {
	if c.Initialized() {
		b, err := os.ReadFile(o.passwordFile())
		if err != nil {
			return "", fmt.Errorf("reading the admin password (delete the cluster with 'orderly dev postgres down' to start afresh): %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	password := engine.Password()
	if err := c.Init(password); err != nil {
		return "", err
	}
	if err := os.WriteFile(o.passwordFile(), []byte(password+"\n"), 0o600); err != nil {
		return "", err
	}
	return password, nil
}

// seedTemplate creates the sample template database with a small table, once.
func seedTemplate(ctx context.Context, c *localpg.Cluster, password string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, c.URL(password, "postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the local PostgreSQL: %w", err)
	}
	defer func() { _ = admin.Close(context.Background()) }()
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", devPostgresTemplate).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+devPostgresTemplate); err != nil {
		return fmt.Errorf("creating the sample template database: %w", err)
	}
	seed, err := pgx.Connect(ctx, c.URL(password, devPostgresTemplate))
	if err != nil {
		return err
	}
	defer func() { _ = seed.Close(context.Background()) }()
	_, err = seed.Exec(ctx, `CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL);
INSERT INTO products (name, price) VALUES ('teapot', 24.90), ('mug', 7.50), ('kettle', 39.00);`)
	if err != nil {
		return fmt.Errorf("seeding the sample template database: %w", err)
	}
	return nil
}

// writeAdminSecret creates or updates the admin credentials Secret.
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
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	data := map[string][]byte{"username": []byte(localpg.Admin), "password": []byte(password)}
	var sec corev1.Secret
	err = c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}, Data: data}
		err = c.Create(ctx, &sec)
	case err == nil:
		sec.Data = data
		err = c.Update(ctx, &sec)
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s: %w", o.secret, err)
	}
	return nil
}

func devPostgresDown(o devPostgresOptions, out io.Writer) error {
	if _, err := os.Stat(o.dir); os.IsNotExist(err) {
		fmt.Fprintf(out, "no local PostgreSQL in %s\n", o.dir)
		return nil
	}
	c, err := devPostgres(o)
	if err != nil && !errors.Is(err, localpg.ErrNotInstalled) {
		return err
	}
	if c != nil && c.Running() {
		if err := c.Stop(); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(o.dir); err != nil {
		return err
	}
	fmt.Fprintf(out, "local PostgreSQL stopped and %s removed\n", o.dir)
	return nil
}

func devPostgresStatus(o devPostgresOptions) (string, error) {
	if _, err := os.Stat(o.dir); os.IsNotExist(err) {
		return "", fmt.Errorf("there is no local PostgreSQL in %s; create it with: orderly dev postgres up", o.dir)
	}
	c, err := devPostgres(o)
	if err != nil {
		return "", err
	}
	if !c.Running() {
		return "", fmt.Errorf("the local PostgreSQL does not run (files: %s); start it with: orderly dev postgres up", o.dir)
	}
	version, _ := c.Version()
	return fmt.Sprintf("PostgreSQL %s runs on 127.0.0.1:%d (files in %s)", version, o.port, o.dir), nil
}
