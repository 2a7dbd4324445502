package localpg

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
)

// The local PostgreSQL of `make run`.
const (
	// DevPort is kept away from 5432, so that it never collides with a PostgreSQL
	// the machine already runs.
	DevPort = 55432
	// DevTemplate is the database behind the sample DatabaseServer's template
	// "seeded" (config/samples).
	DevTemplate = "app_seed"
)

var (
	// ErrNoCluster: there is no local PostgreSQL in the directory.
	ErrNoCluster = errors.New("there is no local PostgreSQL")
	// ErrNotRunning: the local PostgreSQL exists but does not run.
	ErrNotRunning = errors.New("the local PostgreSQL does not run")
)

// Dev is the persistent local PostgreSQL of `orderly dev postgres`: one cluster in
// Dir, listening on 127.0.0.1:Port, whose superuser password is generated the first
// time and kept in Dir.
type Dev struct {
	Dir  string
	Port int32
}

func (d Dev) passwordFile() string { return filepath.Join(d.Dir, "admin-password") }

// cluster finds the server binaries and describes the cluster in d.Dir (creating the
// directory).
func (d Dev) cluster() (*Cluster, error) {
	bin, err := FindBinDir()
	if err != nil {
		return nil, err
	}
	return New(d.Dir, d.Port, bin)
}

// Up creates the cluster the first time, starts it when it does not run and creates
// the sample template database once; running it again is harmless. It returns the
// superuser's password and the server's version. ErrNotInstalled says that the
// server binaries are missing.
func (d Dev) Up(ctx context.Context) (password, version string, err error) {
	c, err := d.cluster()
	if err != nil {
		return "", "", err
	}
	if password, err = d.password(c); err != nil {
		return "", "", err
	}
	if !c.Running() {
		if err := c.Start(); err != nil {
			return "", "", fmt.Errorf("starting PostgreSQL on 127.0.0.1:%d (is the port taken?): %w", d.Port, err)
		}
	}
	if err := seedTemplate(ctx, c, password); err != nil {
		return "", "", err
	}
	version, _ = c.Version()
	return password, version, nil
}

// password initialises the cluster with a new password the first time, and reads
// that password afterwards.
func (d Dev) password(c *Cluster) (string, error) {
	if c.Initialized() {
		b, err := os.ReadFile(d.passwordFile())
		if err != nil {
			return "", fmt.Errorf("reading the admin password (delete the local PostgreSQL to start afresh): %w", err)
		}
		return strings.TrimSpace(string(b)), nil
	}
	password := rand.Text()
	if err := c.Init(password); err != nil {
		return "", err
	}
	// Written after Init: a failed Init leaves no password for a cluster that does
	// not exist, and the next Up starts afresh.
	if err := os.WriteFile(d.passwordFile(), []byte(password+"\n"), 0o600); err != nil {
		return "", err
	}
	return password, nil
}

// seedTemplate creates the sample template database with a small table, once.
func seedTemplate(ctx context.Context, c *Cluster, password string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	admin, err := pgx.Connect(ctx, c.URL(password, "postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the local PostgreSQL: %w", err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", DevTemplate).Scan(&n); err != nil {
		return err
	}
	if n > 0 {
		return nil
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{DevTemplate}.Sanitize()); err != nil {
		return fmt.Errorf("creating the sample template database: %w", err)
	}
	seed, err := pgx.Connect(ctx, c.URL(password, DevTemplate))
	if err != nil {
		return err
	}
	defer func() { _ = seed.Close(context.WithoutCancel(ctx)) }()
	_, err = seed.Exec(ctx, `CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2) NOT NULL);
INSERT INTO products (name, price) VALUES ('teapot', 24.90), ('mug', 7.50), ('kettle', 39.00);`)
	if err != nil {
		return fmt.Errorf("seeding the sample template database: %w", err)
	}
	return nil
}

// Down stops the cluster and deletes its directory, with every database in it.
// existed is false when there was nothing to delete.
func (d Dev) Down() (existed bool, err error) {
	if _, err := os.Stat(d.Dir); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	c, err := d.cluster()
	if err != nil && !errors.Is(err, ErrNotInstalled) {
		return true, err
	}
	// Without the binaries nothing can run from Dir: only the files are left.
	if c != nil && c.Running() {
		if err := c.Stop(); err != nil {
			return true, err
		}
	}
	return true, os.RemoveAll(d.Dir)
}

// Status returns the running server's version; ErrNoCluster or ErrNotRunning when
// it does not run.
func (d Dev) Status() (version string, err error) {
	if _, err := os.Stat(d.Dir); errors.Is(err, os.ErrNotExist) {
		return "", fmt.Errorf("%w in %s", ErrNoCluster, d.Dir)
	}
	c, err := d.cluster()
	if err != nil {
		return "", err
	}
	if !c.Running() {
		return "", fmt.Errorf("%w (files: %s)", ErrNotRunning, d.Dir)
	}
	version, _ = c.Version()
	return version, nil
}
