//go:build integration

package mysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testmysql"
)

// The cases of the PostgreSQL engine's suite (database/postgres), against MariaDB,
// where they apply: what differs is said at each.

var my *testmysql.Server

func TestMain(m *testing.M) {
	var err error
	my, err = testmysql.Start()
	if err != nil {
		fmt.Fprintln(os.Stderr, "starting MariaDB for the tests:", err)
		os.Exit(1)
	}
	code := m.Run()
	my.Close()
	os.Exit(code)
}

func server(s *testmysql.Server) database.Server {
	return database.Server{Engine: Kind, Host: s.Host, Port: s.Port, SSLMode: "disable", Username: s.Username, Password: s.Password}
}

func connectWith(t *testing.T, c *Connector, s database.Server) database.Engine {
	t.Helper()
	e, err := c.Connect(context.Background(), Kind, s)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func connect(t *testing.T) (database.Engine, *sql.DB) {
	t.Helper()
	c := NewConnector()
	t.Cleanup(c.Close)
	e := connectWith(t, c, server(my))
	admin, err := my.Admin("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = admin.Close() })
	return e, admin
}

func count(t *testing.T, admin *sql.DB, q string, args ...any) int {
	t.Helper()
	var n int
	if err := admin.QueryRow(q, args...).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

const (
	qDB   = "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?"
	qUser = "SELECT COUNT(*) FROM mysql.user WHERE User = ?"
)

func newDB(uid string) database.Database {
	name, user := database.NamesFor(Kind, uid)
	return database.Database{Name: name, Role: user, OwnerUID: uid, Password: database.Password(), SetPassword: true}
}

// asUser opens a session as db's user in its database.
func asUser(t *testing.T, db database.Database) *sql.DB {
	t.Helper()
	conn, err := testmysql.Open(my.Host, my.Port, db.Role, db.Password, db.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

func mustExec(t *testing.T, db *sql.DB, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		if _, err := db.Exec(s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
}

func TestEnsureIsIdempotentAndDropRemovesEverything(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("aaaaaaaa-0000-4000-8000-000000000001")
	res, err := e.Ensure(ctx, db)
	if err != nil || !res.Created || res.ServerID == "" {
		t.Fatalf("first Ensure: %+v, %v", res, err)
	}
	db.SetPassword = false
	if res, err := e.Ensure(ctx, db); err != nil || res.Created {
		t.Fatalf("second Ensure: %+v, %v", res, err)
	}
	// The user can use its database; its connection is killed on drop.
	conn := asUser(t, db)
	mustExec(t, conn, "CREATE TABLE t (id INT PRIMARY KEY)", "INSERT INTO t VALUES (1)")
	dr, err := e.Drop(ctx, db, false)
	if err != nil {
		t.Fatal(err)
	}
	// At least the user's open session; on a loaded machine a session the pool
	// replaced may still be on the server's list and be killed too (seen once: 2).
	if dr.Terminated < 1 {
		t.Errorf("Drop terminated %d sessions, want the user's open one", dr.Terminated)
	}
	if count(t, admin, qDB, db.Name) != 0 || count(t, admin, qUser, db.Role) != 0 {
		t.Fatal("database or user left behind")
	}
	if count(t, admin, "SELECT COUNT(*) FROM orderly.owners WHERE owner_uid = ?", db.OwnerUID) != 0 {
		t.Error("Orderly's records of a dropped database are left")
	}
	if err := conn.Ping(); err == nil {
		t.Fatal("the user's connection survived the drop")
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatalf("Drop of what is gone: %v", err)
	}
}

func TestNeverDropsOrAltersWhatIsNotMarked(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("bbbbbbbb-0000-4000-8000-000000000002")
	// Someone else's user and database happen to have Orderly's names.
	mustExec(t, admin, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'theirs'", db.Role))
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Ensure over a foreign user: %v, want ErrNotOwned", err)
	}
	if _, err := e.Drop(ctx, db, false); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Drop of a foreign user: %v, want ErrNotOwned", err)
	}
	if count(t, admin, qUser, db.Role) != 1 {
		t.Fatal("foreign user dropped")
	}
	if c, err := testmysql.Open(my.Host, my.Port, db.Role, "theirs", ""); err != nil || c.Ping() != nil {
		t.Fatal("the foreign user's password was changed")
	} else {
		_ = c.Close()
	}

	other := newDB("cccccccc-0000-4000-8000-000000000003")
	mustExec(t, admin, "CREATE DATABASE "+Ident(other.Name), "CREATE TABLE "+Ident(other.Name)+".theirs (id INT)")
	if _, err := e.Ensure(ctx, other); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Ensure over a foreign database: %v, want ErrNotOwned", err)
	}
	if _, err := e.Drop(ctx, other, false); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Drop of a foreign database: %v, want ErrNotOwned", err)
	}
	if count(t, admin, qDB, other.Name) != 1 {
		t.Fatal("foreign database dropped")
	}
	// Recorded for another DevDatabase: not this one's either.
	third := newDB("dddddddd-0000-4000-8000-00000000000a")
	if _, err := e.Ensure(ctx, third); err != nil {
		t.Fatal(err)
	}
	impostor := third
	impostor.OwnerUID = "dddddddd-0000-4000-8000-00000000000b"
	if _, err := e.Drop(ctx, impostor, false); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Drop by another owner: %v, want ErrNotOwned", err)
	}
	if _, err := e.Drop(ctx, third, false); err != nil {
		t.Fatal(err)
	}
}

// A crash between CREATE DATABASE and the grant leaves a database recorded as
// "creating": the next Ensure makes it again and finishes.
func TestCrashBetweenCreateDatabaseAndGrantIsRecovered(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("dddddddd-0000-4000-8000-000000000004")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	mustExec(t, admin,
		"UPDATE orderly.owners SET state = 'creating' WHERE kind = 'database' AND name = '"+db.Name+"'",
		"REVOKE ALL PRIVILEGES ON "+GrantTarget(db.Name)+".* FROM '"+db.Role+"'@'%'")
	db.SetPassword = false
	res, err := e.Ensure(ctx, db)
	if err != nil {
		t.Fatalf("Ensure after a crash: %v", err)
	}
	if !res.Created {
		t.Error("the unfinished database was not made again")
	}
	if n := count(t, admin, "SELECT COUNT(*) FROM orderly.owners WHERE kind = 'database' AND name = ? AND state = 'ready'", db.Name); n != 1 {
		t.Fatal("the database is not recorded as ready")
	}
	mustExec(t, asUser(t, db), "CREATE TABLE t (id INT)")
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
}

// A database its user dropped itself (it may: DROP is among its privileges) is made
// again, empty.
func TestADatabaseItsUserDroppedIsMadeAgain(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("dddddddd-0000-4000-8000-000000000005")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	mustExec(t, asUser(t, db), "DROP DATABASE "+Ident(db.Name))
	db.SetPassword = false
	if res, err := e.Ensure(ctx, db); err != nil || !res.Created {
		t.Fatalf("Ensure: %+v, %v", res, err)
	}
	if count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("not made again")
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
	conn := asUser(t, db)
	mustExec(t, conn, "CREATE TABLE kept (id INT)", "INSERT INTO kept VALUES (42)")
	if _, err := e.Drop(ctx, db, true); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qUser, db.Role) != 0 || count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("Retain must drop the user and keep the database")
	}
	if conn.Ping() == nil {
		t.Error("the user's session survived")
	}
	if n := count(t, admin, "SELECT COUNT(*) FROM mysql.db WHERE User = ?", db.Role); n != 0 {
		t.Errorf("%d grants of the dropped user are left", n)
	}
	var v int
	if err := admin.QueryRow("SELECT id FROM " + Ident(db.Name) + ".kept").Scan(&v); err != nil || v != 42 {
		t.Fatalf("retained data: %d, %v", v, err)
	}
	// Released: no longer Orderly's, so a later Drop leaves it alone, and Ensure
	// does not take it back.
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("a released database was dropped")
	}
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrNotOwned) {
		t.Errorf("Ensure of a retained database: %v, want ErrNotOwned", err)
	}
	info, err := e.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_ = info
}

// A template's tables are copied with their indexes and rows (generated columns
// computed again, AUTO_INCREMENT continuing); a missing template is reported.
func TestTemplatesAreCopied(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	mustExec(t, admin,
		"SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_AUTO_VALUE_ON_ZERO')",
		"CREATE DATABASE tmpl_shop",
		"CREATE TABLE tmpl_shop.items (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(20) NOT NULL, price INT, doubled INT AS (price * 2) VIRTUAL, UNIQUE KEY (name))",
		"INSERT INTO tmpl_shop.items (id, name, price) VALUES (0, 'zero', 0), (1, 'apple', 3), (2, 'pear', 4)",
		"CREATE TABLE tmpl_shop.empty (id INT)",
		"CREATE VIEW tmpl_shop.cheap AS SELECT name FROM tmpl_shop.items WHERE price < 4")
	db := newDB("ffffffff-0000-4000-8000-000000000006")
	db.Template = "tmpl_shop"
	res, err := e.Ensure(ctx, db)
	if err != nil || !res.Created {
		t.Fatalf("clone: %+v, %v", res, err)
	}
	conn := asUser(t, db)
	var n, sum int
	if err := conn.QueryRow("SELECT COUNT(*), SUM(doubled) FROM items").Scan(&n, &sum); err != nil || n != 3 || sum != 14 {
		t.Errorf("copied rows: %d, sum %d, %v", n, sum, err)
	}
	mustExec(t, conn, "INSERT INTO items (name, price) VALUES ('plum', 5)", "INSERT INTO empty VALUES (1)")
	if _, err := conn.Exec("INSERT INTO items (name, price) VALUES ('apple', 1)"); err == nil {
		t.Error("the unique index was not copied")
	}
	if count(t, admin, "SELECT COUNT(*) FROM tmpl_shop.items") != 3 {
		t.Error("the template changed")
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	missing := newDB("ffffffff-0000-4000-8000-000000000007")
	missing.Template = "no_such_db"
	if _, err := e.Ensure(ctx, missing); !errors.Is(err, database.ErrTemplateMissing) {
		t.Fatalf("clone of a missing template: %v, want ErrTemplateMissing", err)
	}
	if _, err := e.Drop(ctx, missing, false); err != nil {
		t.Fatal(err)
	}
}

func TestUnreachableIsClassified(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	e, err := c.Connect(context.Background(), Kind, database.Server{Host: "127.0.0.1", Port: 1, SSLMode: "disable", Username: "x", Password: "secret-password"})
	if err == nil {
		_, err = e.Info(context.Background())
	}
	if !errors.Is(err, database.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if strings.Contains(err.Error(), "secret-password") {
		t.Fatalf("error leaks the password: %v", err)
	}
}

// sessions counts the server's sessions of user.
func sessions(t *testing.T, admin *sql.DB, user string) int {
	t.Helper()
	return count(t, admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", user)
}

func waitSessions(t *testing.T, admin *sql.DB, user string, want int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := sessions(t, admin, user)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has %d sessions, want %d", user, got, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestPoolIsClosedWhenCredentialsChangeOrServerIsForgotten(t *testing.T) {
	ctx := context.Background()
	_, admin := connect(t)
	const first, other = "orderly_pool_a", "orderly_pool_b"
	for _, u := range []string{first, other} {
		mustExec(t, admin, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'pw-%s'", u, u), fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION", u))
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + first + "'@'%', '" + other + "'@'%'") })
	c := NewConnector()
	t.Cleanup(c.Close)
	s1 := database.Server{Name: "shared", Host: my.Host, Port: my.Port, SSLMode: "disable", Username: first, Password: "pw-" + first}
	e1 := connectWith(t, c, s1)
	if _, err := e1.Info(ctx); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, admin, first, 1)
	s2 := s1
	s2.Username, s2.Password = other, "pw-"+other
	e2 := connectWith(t, c, s2)
	if _, err := e2.Info(ctx); err != nil {
		t.Fatal(err)
	}
	waitSessions(t, admin, first, 0)
	waitSessions(t, admin, other, 1)
	if _, err := e1.Info(ctx); err == nil {
		t.Fatal("the engine of the replaced pool still works")
	}
	e3 := connectWith(t, c, s2)
	if _, err := e3.Info(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := e2.Info(ctx); err != nil {
		t.Fatalf("connecting with the same settings closed the pool: %v", err)
	}
	c.Forget("shared")
	waitSessions(t, admin, other, 0)
	if _, err := e2.Info(ctx); err == nil {
		t.Fatal("the engine of a forgotten server still works")
	}
	c.Close()
	if _, err := c.Connect(ctx, Kind, s2); err == nil {
		t.Fatal("Connect after Close made a pool that nobody closes")
	}
}

// Info reports the version, the server's identity (the same from every
// connector) and the databases Orderly owns there, not the retained ones.
func TestInfo(t *testing.T) {
	ctx := context.Background()
	e, _ := connect(t)
	before, err := e.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(before.Version, "MariaDB") || before.SystemIdentifier == "" {
		t.Fatalf("Info = %+v", before)
	}
	db := newDB("abababab-0000-4000-8000-000000000009")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	after, err := e.Info(ctx)
	if err != nil || after.OwnedDatabases != before.OwnedDatabases+1 {
		t.Fatalf("Info after Ensure = %+v, %v (before %d)", after, err, before.OwnedDatabases)
	}
	c := NewConnector()
	defer c.Close()
	again, err := connectWith(t, c, server(my)).Info(ctx)
	if err != nil || again.SystemIdentifier != before.SystemIdentifier {
		t.Errorf("identity from another connector: %+v, %v", again, err)
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
}

// What this engine cannot do (extensions) is refused clearly, never half done.
func TestUnsupportedIsRefused(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("acacacac-0000-4000-8000-00000000000c")
	db.Extensions = []string{"pgcrypto"}
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrExtension) {
		t.Errorf("extensions: %v, want ErrExtension", err)
	}
	if count(t, admin, qUser, db.Role) != 0 || count(t, admin, qDB, db.Name) != 0 {
		t.Error("a refused Ensure created something")
	}
}

// A server that stops answering (connections are accepted, nothing answers) costs
// each call its deadline and no more.
func TestAHungServerEndsEachCallAtItsDeadline(t *testing.T) {
	ctx := context.Background()
	srv, err := testmysql.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	proxy := startHangProxy(t, net.JoinHostPort(srv.Host, strconv.Itoa(int(srv.Port))))
	c := NewConnector()
	c.Timeouts = database.Timeouts{Statement: time.Second, Grace: 500 * time.Millisecond}
	t.Cleanup(c.Close)
	through := server(srv)
	through.Port = proxy.port()
	e := connectWith(t, c, through)
	if _, err := e.Info(ctx); err != nil {
		t.Fatal(err)
	}
	proxy.hang()
	db := newDB("e5e5e5e5-0000-4000-8000-000000000016")
	for what, call := range map[string]func() error{
		"Info":   func() error { _, err := e.Info(ctx); return err },
		"Ensure": func() error { _, err := e.Ensure(ctx, db); return err },
		"Drop":   func() error { _, err := e.Drop(ctx, db, false); return err },
	} {
		begin := time.Now()
		err := call()
		if took := time.Since(begin); took > 7*time.Second {
			t.Errorf("%s took %s", what, took)
		}
		if !errors.Is(err, database.ErrUnreachable) {
			t.Errorf("%s = %v, want ErrUnreachable", what, err)
		}
		if err != nil && strings.Contains(err.Error(), srv.Username) {
			t.Errorf("%s's error names the admin: %v", what, err)
		}
	}
}

func TestLoginErrorsDoNotNameTheAdmin(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	s := server(my)
	s.Password = "wrong-password"
	e := connectWith(t, c, s)
	_, err := e.Info(context.Background())
	if !errors.Is(err, database.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if msg := err.Error(); strings.Contains(msg, my.Username) || strings.Contains(msg, "wrong-password") || !strings.Contains(msg, "1045") {
		t.Fatalf("error: %s", msg)
	}
}

// Owned lists what Orderly's records give to DevDatabases under a prefix: not a
// database of that name without a record, nor a retained one.
func TestOwnedListsOnlyWhatOrderlyRecorded(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	const prefixUID = "0e0e0e0e-0000-4000-8000-00000000"
	mine, retained := newDB(prefixUID+"0001"), newDB(prefixUID+"0002")
	for _, db := range []database.Database{mine, retained} {
		if _, err := e.Ensure(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.Drop(ctx, retained, true); err != nil {
		t.Fatal(err)
	}
	theirs, _ := database.NamesFor(Kind, prefixUID+"0003")
	mustExec(t, admin, "CREATE DATABASE "+Ident(theirs))
	t.Cleanup(func() {
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + Ident(theirs))
		_, _ = admin.Exec("DROP DATABASE IF EXISTS " + Ident(retained.Name))
		_, _ = e.Drop(context.Background(), mine, false)
	})
	prefix, _ := database.NamesFor(Kind, prefixUID)
	owned, err := e.Owned(ctx, prefix)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(owned.Databases, ",") != mine.Name || len(owned.Roles) != 0 {
		t.Errorf("Owned(%s) = %+v, want the database %s alone", prefix, owned, mine.Name)
	}
	// Users are named from a hash of the UID: listed under their own prefix.
	owned, err = e.Owned(ctx, mine.Role)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(owned.Roles, ",") != mine.Role || len(owned.Databases) != 0 {
		t.Errorf("Owned(%s) = %+v, want the user %s alone", mine.Role, owned, mine.Role)
	}
}
