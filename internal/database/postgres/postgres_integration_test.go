//go:build integration

package postgres

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testpg"
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

func connect(t *testing.T) (database.Engine, *pgx.Conn) {
	t.Helper()
	c := NewConnector()
	t.Cleanup(c.Close)
	e, err := c.Connect(context.Background(), "postgres", database.Server{Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password})
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

func newDB(uid string) database.Database {
	name, role := database.Names(uid)
	return database.Database{Name: name, Role: role, OwnerUID: uid, Password: database.Password(), SetPassword: true}
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
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qDB, db.Name) != 0 || count(t, admin, qRole, db.Role) != 0 {
		t.Fatal("database or role left behind")
	}
	if err := conn.Ping(ctx); err == nil {
		t.Fatal("the role's connection survived the drop")
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
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
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Ensure over a foreign role: %v, want ErrNotOwned", err)
	}
	if _, err := e.Drop(ctx, db, false); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Drop of a foreign role: %v, want ErrNotOwned", err)
	}
	if count(t, admin, qRole, db.Role) != 1 {
		t.Fatal("foreign role dropped")
	}

	other := newDB("cccccccc-0000-4000-8000-000000000003")
	if _, err := admin.Exec(ctx, fmt.Sprintf(`CREATE DATABASE %q`, other.Name)); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Ensure(ctx, other); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Ensure over a foreign database: %v, want ErrNotOwned", err)
	}
	// Ensure created (and marked) the role before it found the database; Drop must
	// still leave the foreign database alone.
	if _, err := e.Drop(ctx, other, false); !errors.Is(err, database.ErrNotOwned) {
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
	// Simulate the crash: the database is not marked yet, and its role still says
	// that Orderly is creating it (as between CREATE DATABASE and the marking).
	if _, err := admin.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %q IS NULL; COMMENT ON ROLE %q IS '%s'`, db.Name, db.Role, creatingMarker(db.OwnerUID))); err != nil {
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
	if _, err := e.Drop(ctx, db, false); err != nil {
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
	if _, err := e.Drop(ctx, db, true); err != nil {
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
	if _, err := e.Drop(ctx, db, false); err != nil {
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
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrTemplateInUse) {
		t.Fatalf("clone of a busy template: %v, want ErrTemplateInUse", err)
	}
	_ = busy.Close(ctx)
	db.SetPassword = false
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatalf("clone once free: %v", err)
	}
	missing := newDB("ffffffff-0000-4000-8000-000000000007")
	missing.Template = "no_such_db"
	if _, err := e.Ensure(ctx, missing); !errors.Is(err, database.ErrTemplateMissing) {
		t.Fatalf("clone of a missing template: %v, want ErrTemplateMissing", err)
	}
}

func TestUnreachableIsClassified(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	e, err := c.Connect(context.Background(), "postgres", database.Server{Host: "127.0.0.1", Port: 1, SSLMode: "disable", Username: "x", Password: "secret-password"})
	if err == nil {
		_, err = e.Info(context.Background())
	}
	if !errors.Is(err, database.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if s := err.Error(); strings.Contains(s, "secret-password") {
		t.Fatalf("error leaks the password: %s", s)
	}
}

// sessions counts the server's sessions opened by Orderly's pools as user.
func sessions(t *testing.T, admin *pgx.Conn, user string) int {
	t.Helper()
	return count(t, admin, "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'orderly' AND usename = $1", user)
}

// waitSessions polls until user has want sessions from Orderly's pools.
func waitSessions(t *testing.T, admin *pgx.Conn, user string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := sessions(t, admin, user)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d sessions from Orderly's pools, want %d", user, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPoolIsClosedWhenCredentialsChangeOrServerIsForgotten(t *testing.T) {
	ctx := context.Background()
	_, admin := connect(t)
	const other = "orderly_pooltest_admin"
	if _, err := admin.Exec(ctx, "CREATE ROLE "+other+" LOGIN CREATEDB CREATEROLE PASSWORD 'other-password'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+other) })

	c := NewConnector()
	t.Cleanup(c.Close)
	first := database.Server{Name: "shared", Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password}
	e1, err := c.Connect(ctx, "postgres", first)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e1.Info(ctx); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, admin, pg.Username, 1)

	// The admin credentials change: the old pool is closed, its sessions end.
	second := first
	second.Username, second.Password = other, "other-password"
	e2, err := c.Connect(ctx, "postgres", second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Info(ctx); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, admin, pg.Username, 0)
	waitSessions(t, admin, other, 1)
	if _, err := e1.Info(ctx); err == nil {
		t.Fatal("the engine of the replaced pool still works")
	}

	// Unchanged settings reuse the pool.
	e3, err := c.Connect(ctx, "postgres", second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e3.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Info(ctx); err != nil {
		t.Fatalf("connecting with the same settings closed the pool: %v", err)
	}
	waitSessions(t, admin, other, 1)

	// The server is deleted: its pool is closed.
	c.Forget("shared")
	waitSessions(t, admin, other, 0)
	if _, err := e2.Info(ctx); err == nil {
		t.Fatal("the engine of a forgotten server still works")
	}
}

// The manager closes the connector when it stops: every pool goes, the ones replaced
// or forgotten before too (even while a reconcile still holds one of their
// connections), and no pool is made afterwards.
func TestCloseClosesEveryPoolAndMakesNoMore(t *testing.T) {
	ctx := context.Background()
	_, admin := connect(t)
	c := NewConnector()
	server := func(name string) database.Server {
		return database.Server{Name: name, Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password}
	}
	forgotten, err := c.Connect(ctx, "postgres", server("forgotten"))
	if err != nil {
		t.Fatal(err)
	}
	// A reconcile still uses a connection of the pool when its server is forgotten.
	inUse, err := forgotten.(*Postgres).pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	c.Forget("forgotten")
	live, err := c.Connect(ctx, "postgres", server("live"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := live.Info(ctx); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, admin, pg.Username, 2)

	closed := make(chan struct{})
	go func() {
		c.Close()
		close(closed)
	}()
	select {
	case <-closed:
		t.Fatal("Close returned while a pool it had forgotten still had a connection open")
	case <-time.After(500 * time.Millisecond):
	}
	inUse.Release()
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("Close did not return once the last connection was returned")
	}
	waitSessions(t, admin, pg.Username, 0)

	if _, err := c.Connect(ctx, "postgres", server("late")); err == nil {
		t.Fatal("Connect after Close made a pool that nobody closes")
	}
	if _, err := live.Info(ctx); err == nil {
		t.Fatal("the engine of a closed connector still works")
	}
	c.Close()
}

// Owned lists what carries Orderly's marker under a prefix: a prepared database and
// its role, a role whose database is being created, extra users; never a database or
// role of that name that Orderly did not mark, nor a retained database.
func TestOwnedListsOnlyWhatOrderlyMarked(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	const prefixUID = "0e0e0e0e-0000-4000-8000-00000000"
	mine := newDB(prefixUID + "0001")
	mine.Users = []database.User{{Name: "reader", Role: database.UserRole(mine.OwnerUID, "reader"), Password: database.Password(), SetPassword: true, Access: database.ReadOnly}}
	retained := newDB(prefixUID + "0002")
	creating := newDB(prefixUID + "0003")
	for _, db := range []database.Database{mine, retained} {
		if _, err := e.Ensure(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Drop(ctx, retained, true); err != nil {
		t.Fatal(err)
	}
	// Interrupted between the role and its database: the role says so.
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident(creating.Role)+"; COMMENT ON ROLE "+ident(creating.Role)+" IS "+literal(creatingMarker(creating.OwnerUID))); err != nil {
		t.Fatal(err)
	}
	// Someone else's, under the same prefix.
	theirs, _ := database.Names(prefixUID + "0004")
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+ident(theirs)); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident(theirs)+"; COMMENT ON ROLE "+ident(theirs)+" IS 'not orderly'"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(theirs))
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(retained.Name))
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+ident(theirs))
		_, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+ident(creating.Role))
		_, _ = e.Drop(context.Background(), mine, false)
	})
	prefix, _ := database.Names(prefixUID)
	owned, err := e.Owned(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	wantDatabases := []string{mine.Name}
	wantRoles := []string{mine.Role, mine.Users[0].Role, creating.Role}
	if strings.Join(owned.Databases, ",") != strings.Join(wantDatabases, ",") || strings.Join(owned.Roles, ",") != strings.Join(wantRoles, ",") {
		t.Errorf("Owned(%s) = %+v, want databases %v and roles %v", prefix, owned, wantDatabases, wantRoles)
	}
	if owned, err := e.Owned(ctx, "orderly_zzz"); err != nil || len(owned.Databases)+len(owned.Roles) > 0 {
		t.Errorf("another prefix: %+v, %v", owned, err)
	}
}
