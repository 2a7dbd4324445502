//go:build integration

package mysql

import (
	"context"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"orderly.dev/orderly/internal/database"
)

func ready(t *testing.T, e database.Engine, uid string) database.Database {
	t.Helper()
	db := newDB(uid)
	if _, err := e.Ensure(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = e.Drop(context.Background(), db, false) })
	return db
}

// The init SQL runs as the database's own user (never the admin), in its
// database, with the server's identifier of its session handed to begun before it
// runs, and its outcome is known from the server while it runs.
func TestInitRunsAsTheDatabasesUser(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := ready(t, e, "a5a5a5a5-0000-4000-8000-000000000001")
	var txn string
	var during database.TxnState
	err := e.Init(ctx, db, "CREATE TABLE seed (id INT PRIMARY KEY, who VARCHAR(100));\nINSERT INTO seed VALUES (1, CURRENT_USER());\nINSERT INTO seed VALUES (2, DATABASE())",
		func(id string) error {
			txn = id
			var err error
			during, err = e.InitOutcome(ctx, id)
			return err
		})
	if err != nil {
		t.Fatal(err)
	}
	if txn == "" || during != database.TxnInProgress {
		t.Errorf("begun got %q and the outcome while running was %q, want a session id and %q", txn, during, database.TxnInProgress)
	}
	var who, dbname string
	if err := admin.QueryRow("SELECT who FROM " + Ident(db.Name) + ".seed WHERE id = 1").Scan(&who); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow("SELECT who FROM " + Ident(db.Name) + ".seed WHERE id = 2").Scan(&dbname); err != nil {
		t.Fatal(err)
	}
	if who != db.Role+"@%" || dbname != db.Name {
		t.Errorf("the SQL ran as %s in %s, want %s@%% in %s", who, dbname, db.Role, db.Name)
	}
	// Once the session has ended, MySQL cannot say what became of it.
	if st, err := e.InitOutcome(ctx, txn); err != nil || st != database.TxnUnknown {
		t.Errorf("outcome after the run: %q, %v; want %q", st, err, database.TxnUnknown)
	}
	if st, err := e.InitOutcome(ctx, "not-a-session"); err != nil || st != database.TxnUnknown {
		t.Errorf("outcome of a bogus id: %q, %v", st, err)
	}
}

// The SQL gets the user's rights only: what only the admin may do fails, as
// ErrInit with the server's message and never a password; DML is rolled back,
// while DDL that MySQL committed at once stays, and the message says so.
func TestInitCannotUseTheAdminsRightsAndFailsAsMySQLDoes(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := ready(t, e, "a5a5a5a5-0000-4000-8000-000000000002")
	for _, attack := range []string{
		"SELECT * FROM mysql.user",
		"CREATE DATABASE stolen",
		"SELECT * FROM orderly.owners",
		"CREATE USER 'sneaky'@'%' IDENTIFIED BY 'x'",
		"GRANT ALL PRIVILEGES ON *.* TO '" + db.Role + "'@'%'",
		"SET GLOBAL max_connections = 1",
	} {
		err := e.Init(ctx, db, attack, func(string) error { return nil })
		if !errors.Is(err, database.ErrInit) {
			t.Errorf("%s: %v, want ErrInit", attack, err)
			continue
		}
		for _, secret := range []string{db.Password, my.Password} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("%s: the error holds a password: %v", attack, err)
			}
		}
	}
	if count(t, admin, qDB, "stolen") != 0 || count(t, admin, qUser, "sneaky") != 0 {
		t.Fatal("the init SQL did what only the admin may")
	}
	err := e.Init(ctx, db, "CREATE TABLE a (id INT);\nINSERT INTO a VALUES (1);\nINSERT INTO nosuch VALUES (1)", func(string) error { return nil })
	if !errors.Is(err, database.ErrInit) || !strings.Contains(err.Error(), "nosuch") || !strings.Contains(err.Error(), DDLNote) {
		t.Fatalf("failing SQL: %v; want ErrInit naming the table and saying what stays", err)
	}
	if n := count(t, admin, "SELECT COUNT(*) FROM "+Ident(db.Name)+".a"); n != 0 {
		t.Errorf("the failed run's rows stayed (%d)", n)
	}
}

// When begun fails (the run could not be recorded), nothing runs.
func TestInitRunsNothingWhenBegunFails(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := ready(t, e, "a5a5a5a5-0000-4000-8000-000000000003")
	stop := errors.New("not recorded")
	if err := e.Init(ctx, db, "CREATE TABLE t (id INT)", func(string) error { return stop }); !errors.Is(err, stop) {
		t.Fatalf("Init: %v, want begun's error", err)
	}
	if n := count(t, admin, "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = ?", db.Name); n != 0 {
		t.Error("the SQL ran although begun failed")
	}
}

// SQL that runs past Timeouts.Init ends as ErrInit, whether the server's
// max_statement_time stops it (MariaDB) or the SQL lifts that and Orderly kills
// the session at Init plus Grace: the worker is back soon, the session is gone
// from the server, and what it did is rolled back. Here the SQL waits for a row
// lock the test holds.
func TestInitEndsAtItsDeadline(t *testing.T) {
	ctx := context.Background()
	c := NewConnector()
	c.Timeouts = database.Timeouts{Init: time.Second, Grace: time.Second}
	t.Cleanup(c.Close)
	e := connectWith(t, c, server(my))
	_, admin := connect(t)
	db := ready(t, e, "a5a5a5a5-0000-4000-8000-000000000004")
	mustExec(t, admin, "CREATE TABLE "+Ident(db.Name)+".t (id INT PRIMARY KEY, v INT)", "INSERT INTO "+Ident(db.Name)+".t VALUES (1, 0)")
	// The lock's holder has a connection of its own (admin has one only).
	holderDB, err := my.Admin("")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = holderDB.Close() })
	holder, err := holderDB.Begin()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = holder.Rollback() }()
	if _, err := holder.Exec("SELECT v FROM " + Ident(db.Name) + ".t WHERE id = 1 FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	for _, sql := range []string{
		"INSERT INTO t VALUES (2, 2);\nUPDATE t SET v = 1 WHERE id = 1",
		"SET SESSION max_statement_time = 0, innodb_lock_wait_timeout = 100;\nINSERT INTO t VALUES (3, 3);\nUPDATE t SET v = 1 WHERE id = 1",
	} {
		var txn string
		start := time.Now()
		err := e.Init(ctx, db, sql, func(id string) error { txn = id; return nil })
		if !errors.Is(err, database.ErrInit) || !strings.Contains(err.Error(), "ran longer than 1s") {
			t.Fatalf("%q: %v, want ErrInit saying it ran too long", sql, err)
		}
		if d := time.Since(start); d > 10*time.Second {
			t.Errorf("%q: Init returned after %s", sql, d)
		}
		deadline := time.Now().Add(10 * time.Second)
		for count(t, admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ?", txn) != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%q: the init session still runs on the server", sql)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	if err := holder.Rollback(); err != nil {
		t.Fatal(err)
	}
	if n := count(t, admin, "SELECT COUNT(*) FROM "+Ident(db.Name)+".t"); n != 1 {
		t.Errorf("the runs that ran out of time left rows (%d, want 1)", n)
	}
}

// LOAD DATA LOCAL INFILE cannot make the manager send one of its own files.
func TestInitCannotReadTheManagersFiles(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := ready(t, e, "a5a5a5a5-0000-4000-8000-000000000005")
	f, err := os.CreateTemp(t.TempDir(), "secret")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.WriteString("the manager's secret\n")
	_ = f.Close()
	mustExec(t, admin, "CREATE TABLE "+Ident(db.Name)+".f (l TEXT)")
	err = e.Init(ctx, db, "LOAD DATA LOCAL INFILE '"+f.Name()+"' INTO TABLE f", func(string) error { return nil })
	if !errors.Is(err, database.ErrInit) {
		t.Errorf("LOAD DATA LOCAL INFILE: %v, want ErrInit", err)
	}
	if n := count(t, admin, "SELECT COUNT(*) FROM "+Ident(db.Name)+".f"); n != 0 {
		t.Error("the manager's file was loaded")
	}
}
