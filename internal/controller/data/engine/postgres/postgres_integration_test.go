//go:build integration

package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/controller/data/engine"
	"orderly.dev/orderly/internal/testpg"
)

var pg *testpg.Server

func TestMain(m *testing.M) {
	var err error
	pg, err = testpg.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL for the tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	pg.Close()
	os.Exit(code)
}

func connect(t *testing.T) (engine.Engine, *pgx.Conn) {
	t.Helper()
	c := NewConnector()
	t.Cleanup(c.Close)
	e, err := c.Connect(context.Background(), "postgres", engine.Server{Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := pgx.Connect(context.Background(), pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close(context.Background()) })
	return e, admin
}

func count(t *testing.T, admin *pgx.Conn, q, name string) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(context.Background(), q, name).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	qDB   = "SELECT count(*) FROM pg_database WHERE datname = $1"
	qRole = "SELECT count(*) FROM pg_roles WHERE rolname = $1"
)

func newDB(uid string) engine.Database {
	name, role := engine.Names(uid)
	return engine.Database{Name: name, Role: role, OwnerUID: uid, Password: engine.Password(), SetPassword: true}
}

func TestEnsureIsIdempotentAndDropRemovesEverything(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("aaaaaaaa-0000-4000-8000-000000000001")
	res, err := e.Ensure(ctx, db)
	if err != nil || !res.Created {
		t.Fatalf("first Ensure: %+v, %v", res, err)
	}
	db.SetPassword = false
	if res, err := e.Ensure(ctx, db); err != nil || res.Created {
		t.Fatalf("second Ensure: %+v, %v", res, err)
	}
	// The role can use its database, with terminated connections on drop.
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", db.Role, db.Password, pg.Host, pg.Port, db.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qDB, db.Name) != 0 || count(t, admin, qRole, db.Role) != 0 {
		t.Fatal("database or role left behind")
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the role's connection survived the drop")
	}
	if err := e.Drop(ctx, db, false); err != nil {
		t.Fatalf("Drop of what is gone: %v", err)
	}
}

func TestNeverDropsOrAltersWhatIsNotMarked(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("bbbbbbbb-0000-4000-8000-000000000002")
	// Someone else's database and role happen to have Orderly's names.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE ROLE %q LOGIN`, db.Role)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ensure(ctx, db); !errors.Is(err, engine.ErrNotOwned) {
		t.Fatalf("Ensure over a foreign role: %v, want ErrNotOwned", err)
	}
	if err := e.Drop(ctx, db, false); !errors.Is(err, engine.ErrNotOwned) {
		t.Fatalf("Drop of a foreign role: %v, want ErrNotOwned", err)
	}
	if count(t, admin, qRole, db.Role) != 1 {
		t.Fatal("foreign role dropped")
	}

	other := newDB("cccccccc-0000-4000-8000-000000000003")
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, other.Name)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ensure(ctx, other); !errors.Is(err, engine.ErrNotOwned) {
		t.Fatalf("Ensure over a foreign database: %v, want ErrNotOwned", err)
	}
	// Ensure created (and marked) the role before it found the database; Drop must
	// still leave the foreign database alone.
	if err := e.Drop(ctx, other, false); !errors.Is(err, engine.ErrNotOwned) {
		t.Fatalf("Drop of a foreign database: %v, want ErrNotOwned", err)
	}
	if count(t, admin, qDB, other.Name) != 1 {
		t.Fatal("foreign database dropped")
	}
}

func TestCrashBetweenCreateDatabaseAndCommentIsRecovered(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("dddddddd-0000-4000-8000-000000000004")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	// Simulate the crash: the database lost its marker but is owned by the marked role.
	if _, err := admin.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %q IS NULL`, db.Name)); err != nil {
		t.Fatal(err)
	}
	db.SetPassword = false
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatalf("Ensure after a crash: %v", err)
	}
	var comment string
	if err := admin.QueryRow(ctx, "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", db.Name).Scan(&comment); err != nil {
		t.Fatal(err)
	}
	if comment != Marker(db.OwnerUID) {
		t.Fatalf("marker = %q", comment)
	}
	if err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
}

func TestRetainKeepsTheDatabaseForTheAdmin(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("eeeeeeee-0000-4000-8000-000000000005")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", db.Role, db.Password, pg.Host, pg.Port, db.Name))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE kept (id int); INSERT INTO kept VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close(ctx)
	if err := e.Drop(ctx, db, true); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qRole, db.Role) != 0 || count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("Retain must drop the role and keep the database")
	}
	kept, err := pgx.Connect(ctx, pg.URL(db.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer kept.Close(ctx)
	var v int
	if err := kept.QueryRow(ctx, "SELECT id FROM kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("retained data: %d, %v", v, err)
	}
	// Released: no longer Orderly's, so a later Drop leaves it alone.
	if err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("a released database was dropped")
	}
}

func TestTemplateErrors(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	if _, err := admin.Exec(ctx, "CREATE DATABASE tmpl_busy"); err != nil {
		t.Fatal(err)
	}
	busy, err := pgx.Connect(ctx, pg.URL("tmpl_busy"))
	if err != nil {
		t.Fatal(err)
	}
	db := newDB("ffffffff-0000-4000-8000-000000000006")
	db.Template = "tmpl_busy"
	if _, err := e.Ensure(ctx, db); !errors.Is(err, engine.ErrTemplateInUse) {
		t.Fatalf("clone of a busy template: %v, want ErrTemplateInUse", err)
	}
	_ = busy.Close(ctx)
	db.SetPassword = false
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatalf("clone once free: %v", err)
	}
	missing := newDB("ffffffff-0000-4000-8000-000000000007")
	missing.Template = "no_such_db"
	if _, err := e.Ensure(ctx, missing); !errors.Is(err, engine.ErrTemplateMissing) {
		t.Fatalf("clone of a missing template: %v, want ErrTemplateMissing", err)
	}
}

func TestUnreachableIsClassified(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	e, err := c.Connect(context.Background(), "postgres", engine.Server{Host: "127.0.0.1", Port: 1, SSLMode: "disable", Username: "x", Password: "secret-password"})
	if err == nil {
		_, err = e.Info(context.Background())
	}
	if !errors.Is(err, engine.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if s := err.Error(); strings.Contains(s, "secret-password") {
		t.Fatalf("error leaks the password: %s", s)
	}
}
