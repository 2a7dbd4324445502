//go:build integration

package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/database"
)

// sessionAs connects to db as role with password.
func sessionAs(t *testing.T, db, role, password string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", role, password, pg.Host, pg.Port, db))
	if err != nil {
		t.Fatalf("logging in as %s: %v", role, err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

func withUsers(db database.Database, users ...database.User) database.Database {
	for i := range users {
		users[i].Role = database.UserRole(db.OwnerUID, users[i].Name)
		if users[i].Password == "" {
			users[i].Password, users[i].SetPassword = database.Password(), true
		}
	}
	db.Users = users
	return db
}

// TestUsersGetTheirAccessAndGoWhenUnlisted: a ReadOnly user reads every table,
// present and future, and cannot write; a ReadWrite one writes rows but cannot
// change the schema; a user's access can change; an unlisted user is dropped with
// its privileges, and Drop takes the rest, counting the sessions it ended.
func TestUsersGetTheirAccessAndGoWhenUnlisted(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := withUsers(newDB("aaaaaaaa-0000-4000-8000-0000000000u1"),
		database.User{Name: "reader", Access: database.ReadOnly}, database.User{Name: "app-writer", Access: database.ReadWrite})
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	owner := sessionAs(t, db.Name, db.Role, db.Password)
	if _, err := owner.Exec(ctx, "CREATE TABLE before (id serial primary key, v text); INSERT INTO before (v) VALUES ('a')"); err != nil {
		t.Fatal(err)
	}
	reader := sessionAs(t, db.Name, db.Users[0].Role, db.Users[0].Password)
	writer := sessionAs(t, db.Name, db.Users[1].Role, db.Users[1].Password)
	if db.Users[1].Role != db.Role+"_app_writer" {
		t.Fatalf("user role %s", db.Users[1].Role)
	}
	// Future tables of the owner come with the users' privileges.
	if _, err := owner.Exec(ctx, "CREATE TABLE later (id serial primary key, v text); INSERT INTO later (v) VALUES ('b')"); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"before", "later"} {
		var n int
		if err := reader.QueryRow(ctx, "SELECT count(*) FROM "+table).Scan(&n); err != nil || n != 1 {
			t.Fatalf("reader reading %s: %d, %v", table, n, err)
		}
		if _, err := reader.Exec(ctx, "INSERT INTO "+table+" (v) VALUES ('x')"); err == nil || !strings.Contains(err.Error(), "permission denied") {
			t.Fatalf("reader inserting into %s: %v", table, err)
		}
		if _, err := writer.Exec(ctx, "INSERT INTO "+table+" (v) VALUES ('w'); UPDATE "+table+" SET v = 'u' WHERE v = 'w'; DELETE FROM "+table+" WHERE v = 'u'"); err != nil {
			t.Fatalf("writer writing %s: %v", table, err)
		}
	}
	for name, conn := range map[string]*pgx.Conn{"reader": reader, "writer": writer} {
		if _, err := conn.Exec(ctx, "CREATE TABLE mine (id int)"); err == nil {
			t.Fatalf("%s created a table", name)
		}
		if _, err := conn.Exec(ctx, "DROP TABLE before"); err == nil {
			t.Fatalf("%s dropped a table", name)
		}
	}
	// Idempotent, and the passwords kept.
	db.SetPassword = false
	for i := range db.Users {
		db.Users[i].SetPassword = false
	}
	if res, err := e.Ensure(ctx, db); err != nil || len(res.UsersDropped) != 0 {
		t.Fatalf("second Ensure: %+v, %v", res, err)
	}
	// ReadOnly becomes ReadWrite, and reader is unlisted: dropped, its session ended.
	db.Users = []database.User{db.Users[1]}
	db.Users[0].Access = database.ReadOnly
	res, err := e.Ensure(ctx, db)
	if err != nil || len(res.UsersDropped) != 1 || res.UsersDropped[0] != "reader" {
		t.Fatalf("Ensure without reader: %+v, %v", res, err)
	}
	if count(t, admin, qRole, db.Role+"_reader") != 0 {
		t.Fatal("the unlisted user's role is still there")
	}
	if _, err := writer.Exec(ctx, "INSERT INTO later (v) VALUES ('w')"); err == nil || !strings.Contains(err.Error(), "permission denied") {
		t.Fatalf("writer turned ReadOnly still inserts: %v", err)
	}
	var n int
	if err := writer.QueryRow(ctx, "SELECT count(*) FROM later").Scan(&n); err != nil {
		t.Fatal(err)
	}
	dres, err := e.Drop(ctx, db, false)
	if err != nil {
		t.Fatal(err)
	}
	if dres.Terminated < 2 {
		t.Fatalf("Drop terminated %d sessions, want the owner's and the writer's at least", dres.Terminated)
	}
	if count(t, admin, qRole, db.Users[0].Role) != 0 || count(t, admin, qRole, db.Role) != 0 || count(t, admin, qDB, db.Name) != 0 {
		t.Fatal("roles or database left behind")
	}
}

// TestUsersNeverTakeOverSomeoneElsesRole: a role with a user's name that Orderly
// did not mark is neither altered nor dropped.
func TestUsersNeverTakeOverSomeoneElsesRole(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := withUsers(newDB("aaaaaaaa-0000-4000-8000-0000000000u2"), database.User{Name: "squat", Access: database.ReadOnly})
	squat := db.Users[0].Role
	if _, err := admin.Exec(ctx, "CREATE ROLE "+ident(squat)+" LOGIN"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP ROLE IF EXISTS "+ident(squat)) })
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Ensure with a squatted user role: %v", err)
	}
	db.Users = nil
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qRole, db.Role+"_squat") != 1 {
		t.Fatal("someone else's role was dropped")
	}
}

// TestInitRunsAsTheOwnerInOneTransaction: the SQL gets the database role's rights,
// not the admin's; a failure rolls everything back; the transaction's outcome can
// be asked afterwards.
func TestInitRunsAsTheOwnerInOneTransaction(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("aaaaaaaa-0000-4000-8000-0000000000i1")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.Drop(context.Background(), db, false) })
	var txns []string
	begun := func(txn string) error { txns = append(txns, txn); return nil }

	err := e.Init(ctx, db, "CREATE TABLE t (id int);\nINSERT INTO t VALUES (1);\nCREATE ROLE evil SUPERUSER;", begun)
	refused := err != nil && (strings.Contains(err.Error(), "permission denied") || strings.Contains(err.Error(), "must be superuser"))
	if !errors.Is(err, database.ErrInit) || !refused {
		t.Fatalf("init creating a superuser: %v", err)
	}
	if count(t, admin, qRole, "evil") != 0 {
		t.Fatal("the init SQL created a superuser")
	}
	if st, err := e.InitOutcome(ctx, txns[0]); err != nil || st != database.TxnAborted {
		t.Fatalf("outcome of the failed run: %s, %v", st, err)
	}
	owner := sessionAs(t, db.Name, db.Role, db.Password)
	var n int
	if err := owner.QueryRow(ctx, "SELECT count(*) FROM pg_tables WHERE tablename = 't'").Scan(&n); err != nil || n != 0 {
		t.Fatalf("the failed run left table t: %d, %v", n, err)
	}

	// The error says where in the SQL it failed.
	if err := e.Init(ctx, db, "CREATE TABLE t (id int);\nSELECT * FROM missing;", begun); !errors.Is(err, database.ErrInit) || !strings.Contains(err.Error(), "line 2") {
		t.Fatalf("init reading a missing table: %v", err)
	}
	if err := e.Init(ctx, db, "CREATE TABLE t (id int); INSERT INTO t VALUES (1), (2);", begun); err != nil {
		t.Fatal(err)
	}
	if st, err := e.InitOutcome(ctx, txns[2]); err != nil || st != database.TxnCommitted {
		t.Fatalf("outcome of the good run: %s, %v", st, err)
	}
	var tableOwner string
	if err := owner.QueryRow(ctx, "SELECT tableowner FROM pg_tables WHERE tablename = 't'").Scan(&tableOwner); err != nil || tableOwner != db.Role {
		t.Fatalf("table t owned by %q (%v), want the database's role", tableOwner, err)
	}

	// When begun fails, nothing runs.
	if err := e.Init(ctx, db, "DROP TABLE t", func(string) error { return errors.New("no record") }); err == nil {
		t.Fatal("Init ran although begun failed")
	}
	if err := owner.QueryRow(ctx, "SELECT count(*) FROM t").Scan(&n); err != nil || n != 2 {
		t.Fatalf("table t after a refused run: %d, %v", n, err)
	}
	// Garbage and future transaction ids are unknown, not errors.
	if st, err := e.InitOutcome(ctx, "999999999"); err != nil || st != database.TxnUnknown {
		t.Fatalf("outcome of a future transaction: %s, %v", st, err)
	}
}

// TestInitIsStoppedAtItsTimeout: SQL that runs too long is cancelled and rolled
// back, even when it lifts its own statement_timeout.
func TestInitIsStoppedAtItsTimeout(t *testing.T) {
	ctx := context.Background()
	c := NewConnector()
	c.Timeouts = database.Timeouts{Init: time.Second, Grace: time.Second}
	t.Cleanup(c.Close)
	e, err := c.Connect(ctx, "postgres", pgServer())
	if err != nil {
		t.Fatal(err)
	}
	db := newDB("aaaaaaaa-0000-4000-8000-0000000000i2")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.Drop(context.Background(), db, false) })
	start := time.Now()
	err = e.Init(ctx, db, "SET statement_timeout = 0; CREATE TABLE t (id int); SELECT pg_sleep(30);", func(string) error { return nil })
	if !errors.Is(err, database.ErrInit) || time.Since(start) > 10*time.Second {
		t.Fatalf("a run that sleeps past its timeout: %v after %s", err, time.Since(start))
	}
}

func pgServer() database.Server {
	return database.Server{Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password}
}

// TestUsersOfACloneReadTheTemplatesTables: a clone's tables belong to the
// template's owner; the database's role holds them with the grant option, so its
// users get them too. With Retain, the database stays and every role goes.
func TestUsersOfACloneReadTheTemplatesTables(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	tmpl := "users_tmpl"
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+tmpl); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+tmpl) })
	seed, err := pgx.Connect(ctx, pg.URL(tmpl))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := seed.Exec(ctx, "CREATE TABLE products (id int); INSERT INTO products VALUES (1), (2)"); err != nil {
		t.Fatal(err)
	}
	_ = seed.Close(ctx)
	db := withUsers(newDB("aaaaaaaa-0000-4000-8000-0000000000u3"), database.User{Name: "ro", Access: database.ReadOnly})
	db.Template = tmpl
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	ro := sessionAs(t, db.Name, db.Users[0].Role, db.Users[0].Password)
	var n int
	if err := ro.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&n); err != nil || n != 2 {
		t.Fatalf("user reading the clone's table: %d, %v", n, err)
	}
	if _, err := e.Drop(ctx, db, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+ident(db.Name)+" WITH (FORCE)")
	})
	if count(t, admin, qRole, db.Users[0].Role) != 0 || count(t, admin, qRole, db.Role) != 0 || count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("Retain must keep the database and drop every role")
	}
}
