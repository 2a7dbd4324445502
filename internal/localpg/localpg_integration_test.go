//go:build integration

package localpg

import (
	"context"
	"net"
	"os"
	"testing"

	"github.com/jackc/pgx/v5"
)

func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// A cluster is created, started, stopped and started again with its data.
func TestClusterLifecycle(t *testing.T) {
	ctx := context.Background()
	bin, err := InstallBinDir()
	if err != nil {
		t.Fatal(err)
	}
	// Not t.TempDir(): as root, the postgres user must be able to enter its parents.
	dir, err := os.MkdirTemp("", "orderly-localpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	c, err := New(dir, freePort(t), bin)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Kill() })
	if c.Initialized() || c.Running() {
		t.Fatal("a new directory looks initialised or running")
	}
	if err := c.Init("pw-1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	if !c.Running() {
		t.Fatal("not running after Start")
	}
	conn, err := pgx.Connect(ctx, c.URL("pw-1", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE kept"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if _, err := pgx.Connect(ctx, c.URL("wrong", "postgres")); err == nil {
		t.Fatal("a wrong password was accepted over TCP")
	}

	if err := c.Stop(); err != nil {
		t.Fatal(err)
	}
	if c.Running() {
		t.Fatal("running after Stop")
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	conn, err = pgx.Connect(ctx, c.URL("pw-1", "kept"))
	if err != nil {
		t.Fatalf("the data did not survive a restart: %v", err)
	}
	_ = conn.Close(ctx)
	if v, err := c.Version(); err != nil || v == "" {
		t.Fatalf("Version() = %q, %v", v, err)
	}
}
