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
	"orderly.dev/orderly/internal/testing/testmysql"
)

// A DevDatabase's user uses its database as an owner would, and reaches nothing
// else: not another DevDatabase's database, not a database whose name its grant's
// pattern would match if _ were left a wildcard, not Orderly's records (which it
// can neither read nor forge), not more privileges.
func TestTheUserReachesOnlyItsOwnDatabase(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	mine, theirs := newDB("a1a1a1a1-0000-4000-8000-000000000011"), newDB("a1a1a1a1-0000-4000-8000-000000000012")
	for _, db := range []database.Database{mine, theirs} {
		if _, err := e.Ensure(ctx, db); err != nil {
			t.Fatal(err)
		}
	}
	// orderly_a1a1... with its first _ as x: matched by an unescaped grant pattern.
	lookalike := strings.Replace(mine.Name, "_", "x", 1)
	mustExec(t, admin, "CREATE DATABASE "+Ident(lookalike), "CREATE TABLE "+Ident(lookalike)+".secret (v INT)", "CREATE TABLE "+Ident(theirs.Name)+".secret (v INT)")
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + Ident(lookalike)) })

	conn := asUser(t, mine)
	mustExec(t, conn,
		"CREATE TABLE t (id INT PRIMARY KEY, v VARCHAR(10))", "INSERT INTO t VALUES (1, 'a')", "CREATE INDEX iv ON t (v)",
		"CREATE VIEW vt AS SELECT id FROM t", "ALTER TABLE t ADD COLUMN w INT", "CREATE TEMPORARY TABLE tmp (id INT)",
		"CREATE PROCEDURE p() SELECT 1", "CALL p()", "DROP TABLE t")
	for _, attack := range []string{
		"SELECT * FROM " + Ident(theirs.Name) + ".secret",
		"USE " + Ident(theirs.Name),
		"SELECT * FROM " + Ident(lookalike) + ".secret",
		"CREATE DATABASE " + Ident(strings.Replace(mine.Name, "_", "y", 1)),
		"SELECT * FROM orderly.owners",
		"INSERT INTO orderly.owners (kind, name, owner_uid, state) VALUES ('database', 'x', 'y', 'ready')",
		"UPDATE orderly.owners SET state = 'retained' WHERE name = '" + mine.Name + "'",
		"UPDATE orderly.server SET uuid = 'forged'",
		"DROP DATABASE orderly",
		"GRANT ALL PRIVILEGES ON " + GrantTarget(mine.Name) + ".* TO '" + theirs.Role + "'@'%'",
		"GRANT ALL PRIVILEGES ON *.* TO '" + mine.Role + "'@'%'",
		"CREATE USER 'sneaky'@'%' IDENTIFIED BY 'x'",
		"ALTER USER '" + theirs.Role + "'@'%' IDENTIFIED BY 'taken-over'",
		"SELECT * FROM mysql.user",
		"SET GLOBAL max_connections = 1",
		"SELECT * FROM information_schema.PROCESSLIST WHERE USER <> '" + mine.Role + "' LIMIT 1 INTO @x",
	} {
		if _, err := conn.Exec(attack); err == nil && !strings.HasPrefix(attack, "SELECT * FROM information_schema") {
			t.Errorf("the user could run: %s", attack)
		}
	}
	// PROCESSLIST shows a user only its own sessions.
	if n := count(t, conn, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER <> ?", mine.Role); n != 0 {
		t.Errorf("the user sees %d sessions of others", n)
	}
	var dbs []string
	rows, err := conn.Query("SHOW DATABASES")
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var d string
		_ = rows.Scan(&d)
		dbs = append(dbs, d)
	}
	_ = rows.Close()
	if strings.Join(dbs, ",") != "information_schema,"+mine.Name {
		t.Errorf("the user sees the databases %v", dbs)
	}
	// Orderly's records are as Orderly wrote them.
	if n := count(t, admin, "SELECT COUNT(*) FROM orderly.owners WHERE name = ? AND state = 'ready' AND owner_uid = ?", mine.Name, mine.OwnerUID); n != 1 {
		t.Error("the ownership record changed")
	}
	for _, db := range []database.Database{mine, theirs} {
		if _, err := e.Drop(ctx, db, false); err != nil {
			t.Fatal(err)
		}
	}
}

// Passwords reach the server only as mysql_native_password hashes: never in its
// general log, which shows every statement.
func TestPasswordsNeverReachTheServersLog(t *testing.T) {
	ctx := context.Background()
	srv, err := testmysql.Start(testmysql.WithGeneralLog())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := NewConnector()
	t.Cleanup(c.Close)
	e := connectWith(t, c, server(srv))
	db := newDB("f6f6f6f6-0000-4000-8000-000000000017")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	first := db.Password
	db.Password = database.Password()
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	conn, err := testmysql.Open(srv.Host, srv.Port, db.Role, db.Password, db.Name)
	if err != nil || conn.Ping() != nil {
		t.Fatalf("the user cannot log in with its new password: %v", err)
	}
	_ = conn.Close()
	if old, _ := testmysql.Open(srv.Host, srv.Port, db.Role, first, db.Name); old.Ping() == nil {
		t.Error("the old password still works")
	}
	logged, err := os.ReadFile(srv.GeneralLog())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "CREATE USER") || !strings.Contains(string(logged), "ALTER USER") {
		t.Fatal("the general log does not show the statements")
	}
	for _, p := range []string{first, db.Password} {
		if strings.Contains(string(logged), p) {
			t.Error("the server's log holds a password")
		}
	}
	if !strings.Contains(string(logged), NativeHash(db.Password)) {
		t.Error("no password hash in the log")
	}
}

// The identity of the server a database was created on is checked before anything
// is created or dropped: after a change of host, nothing happens on the new server.
func TestNothingIsDoneOnAnotherServer(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("a7a7a7a7-0000-4000-8000-000000000018")
	res, err := e.Ensure(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	elsewhere := db
	elsewhere.ServerID = "00000000-0000-0000-0000-000000000000"
	elsewhere.SetPassword = false
	if _, err := e.Ensure(ctx, elsewhere); !errors.Is(err, database.ErrServerChanged) {
		t.Errorf("Ensure on another server: %v", err)
	}
	if _, err := e.Drop(ctx, elsewhere, false); !errors.Is(err, database.ErrServerChanged) {
		t.Errorf("Drop on another server: %v", err)
	}
	if count(t, admin, qDB, db.Name) != 1 {
		t.Fatal("dropped on the wrong server")
	}
	db.ServerID = res.ServerID
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
}

// A lock another session holds ends the drop at the lock timeout, instead of
// holding the caller (and a worker) until the lock is released.
func TestLockWaitsEndAtTheLockTimeout(t *testing.T) {
	ctx := context.Background()
	c := NewConnector()
	c.Timeouts = database.Timeouts{Statement: 5 * time.Second, Lock: time.Second}
	t.Cleanup(c.Close)
	e := connectWith(t, c, server(my))
	db := newDB("d4d4d4d4-0000-4000-8000-000000000015")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	// Another session (a backup, someone's client), with no current database, holds
	// a lock on a table of it.
	holder, err := my.Admin("")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	mustExec(t, holder, "CREATE TABLE "+Ident(db.Name)+".t (id INT)")
	tx, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec("SELECT * FROM " + Ident(db.Name) + ".t FOR UPDATE"); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	_, err = e.Drop(ctx, db, false)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Drop waited %s for the lock", took)
	}
	if !errors.Is(err, database.ErrTimeout) || !strings.Contains(err.Error(), "lock") {
		t.Errorf("Drop = %v, want ErrTimeout about a lock", err)
	}
	_ = tx.Rollback()
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatalf("Drop once the lock is gone: %v", err)
	}
}
