//go:build integration

package localpg

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/jackc/pgx/v5"
)

// The local PostgreSQL of `orderly dev postgres`: created with a password that
// later runs keep, the sample template seeded once, reported, and deleted.
func TestDevUpStatusDown(t *testing.T) {
	ctx := context.Background()
	if _, err := InstallBinDir(); err != nil {
		t.Fatal(err)
	}
	parent, err := os.MkdirTemp("", "orderly-localpg-dev-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(parent) })
	// As root the directory is handed to the postgres user; its parent stays ours.
	if err := os.Chmod(parent, 0o755); err != nil {
		t.Fatal(err)
	}
	d := Dev{Dir: filepath.Join(parent, "postgres"), Port: freePort(t)}
	t.Cleanup(func() { _, _ = d.Down() })

	if _, err := d.Status(); !errors.Is(err, ErrNoCluster) {
		t.Fatalf("Status() before Up: %v, want ErrNoCluster", err)
	}
	password, version, err := d.Up(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if password == "" || version == "" {
		t.Fatalf("Up() = %q, %q", password, version)
	}
	if v, err := d.Status(); err != nil || v != version {
		t.Fatalf("Status() = %q, %v; want %q", v, err, version)
	}
	seed, err := pgx.Connect(ctx, (&Cluster{Port: d.Port}).URL(password, DevTemplate))
	if err != nil {
		t.Fatalf("the template database with Up's password: %v", err)
	}
	if _, err := seed.Exec(ctx, "INSERT INTO products (name, price) VALUES ('spoon', 1)"); err != nil {
		t.Fatal(err)
	}
	_ = seed.Close(ctx)

	// Again, and again after a stop: same password, the template not seeded twice.
	again, _, err := d.Up(ctx)
	if err != nil || again != password {
		t.Fatalf("second Up() = %q, %v; want the first password", again, err)
	}
	c, err := d.cluster()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Status(); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("Status() after a stop: %v, want ErrNotRunning", err)
	}
	if again, _, err = d.Up(ctx); err != nil || again != password {
		t.Fatalf("Up() after a stop = %q, %v; want the first password", again, err)
	}
	conn, err := pgx.Connect(ctx, c.URL(password, DevTemplate))
	if err != nil {
		t.Fatal(err)
	}
	var n int
	if err := conn.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&n); err != nil || n != 4 {
		t.Fatalf("products = %d, %v; want the 3 seeded rows and the one added", n, err)
	}
	_ = conn.Close(ctx)

	if existed, err := d.Down(); !existed || err != nil {
		t.Fatalf("Down() = %v, %v", existed, err)
	}
	if _, err := os.Stat(d.Dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is still there after Down: %v", d.Dir, err)
	}
	if c.Running() {
		t.Fatal("running after Down")
	}
	if existed, err := d.Down(); existed || err != nil {
		t.Fatalf("second Down() = %v, %v; want nothing to do", existed, err)
	}
}
