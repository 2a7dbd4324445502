//go:build integration

package mysql

import (
	"context"
	"database/sql"
	"errors"
	"slices"
	"testing"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testmysql"
)

func withUsers(db database.Database, users ...database.User) database.Database {
	for i := range users {
		users[i].Role = database.UserRoleFor(Kind, db.OwnerUID, users[i].Name)
		if users[i].Password == "" {
			users[i].Password, users[i].SetPassword = database.Password(), true
		}
	}
	db.Users = users
	return db
}

func asExtra(t *testing.T, db database.Database, u database.User) *sql.DB {
	t.Helper()
	conn, err := testmysql.Open(my.Host, my.Port, u.Role, u.Password, db.Name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// Extra users reach their database only, with their access and no more, for the
// tables present and those made later; a change of access takes the old one back,
// an unlisted user is dropped, and Drop drops them all with their records.
func TestExtraUsersGetTheirAccessOnly(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	other := newDB("a4a4a4a4-0000-4000-8000-000000000002")
	if _, err := e.Ensure(ctx, other); err != nil {
		t.Fatal(err)
	}
	db := withUsers(newDB("a4a4a4a4-0000-4000-8000-000000000001"),
		database.User{Name: "app-ro", Access: database.ReadOnly}, database.User{Name: "writer", Access: database.ReadWrite})
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	owner := asUser(t, db)
	mustExec(t, owner, "CREATE TABLE t (id INT PRIMARY KEY AUTO_INCREMENT, v INT)", "INSERT INTO t (v) VALUES (1)")
	mustExec(t, admin, "CREATE TABLE "+Ident(other.Name)+".secret (v INT)")
	ro, rw := asExtra(t, db, db.Users[0]), asExtra(t, db, db.Users[1])
	mustExec(t, ro, "SELECT * FROM t")
	mustExec(t, rw, "SELECT * FROM t", "INSERT INTO t (v) VALUES (2)", "UPDATE t SET v = 3 WHERE v = 2", "DELETE FROM t WHERE v = 3")
	for _, c := range []struct {
		conn  *sql.DB
		stmts []string
	}{
		{ro, []string{"INSERT INTO t (v) VALUES (9)", "UPDATE t SET v = 9", "DELETE FROM t"}},
		{rw, nil},
	} {
		for _, s := range append(c.stmts,
			"CREATE TABLE x (id INT)", "DROP TABLE t", "ALTER TABLE t ADD COLUMN w INT", "TRUNCATE TABLE t",
			"SELECT * FROM "+Ident(other.Name)+".secret", "SELECT * FROM orderly.owners", "SELECT * FROM mysql.user",
			"GRANT SELECT ON "+GrantTarget(db.Name)+".* TO '"+other.Role+"'@'%'", "CREATE USER 'sneaky'@'%'") {
			if _, err := c.conn.Exec(s); err == nil {
				t.Errorf("an extra user could run: %s", s)
			}
		}
	}
	// Tables made later are covered too.
	mustExec(t, owner, "CREATE TABLE later (v INT)", "INSERT INTO later VALUES (1)")
	mustExec(t, ro, "SELECT * FROM later")
	mustExec(t, rw, "INSERT INTO later VALUES (2)")

	// ReadOnly becomes ReadWrite, ReadWrite becomes ReadOnly. MySQL gives a session
	// the new database privileges at its next USE only, so the users' sessions are
	// ended: none keeps the old access.
	db.Users[0].Access, db.Users[1].Access = database.ReadWrite, database.ReadOnly
	db.Users[0].SetPassword, db.Users[1].SetPassword = false, false
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	for _, u := range db.Users {
		if n := count(t, admin, "SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE USER = ?", u.Role); n != 0 {
			t.Errorf("%d session(s) of %s kept their old access", n, u.Name)
		}
	}
	ro, rw = asExtra(t, db, db.Users[0]), asExtra(t, db, db.Users[1])
	mustExec(t, ro, "INSERT INTO t (v) VALUES (4)")
	if _, err := rw.Exec("INSERT INTO t (v) VALUES (5)"); err == nil {
		t.Error("a user made ReadOnly can still insert")
	}
	// writer is no longer listed: dropped, its session ended, its record gone.
	writer := db.Users[1]
	db.Users = db.Users[:1]
	res, err := e.Ensure(ctx, db)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(res.UsersDropped, []string{"writer"}) {
		t.Errorf("UsersDropped = %v, want [writer]", res.UsersDropped)
	}
	if count(t, admin, qUser, writer.Role) != 0 || count(t, admin, "SELECT COUNT(*) FROM orderly.owners WHERE name = ?", writer.Role) != 0 {
		t.Error("an unlisted user or its record is left")
	}
	if err := rw.Ping(); err == nil {
		t.Error("the unlisted user's session survived")
	}
	// Again: nothing to do.
	if res, err := e.Ensure(ctx, db); err != nil || len(res.UsersDropped) != 0 {
		t.Fatalf("converged Ensure: %+v, %v", res, err)
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qUser, db.Users[0].Role) != 0 || count(t, admin, "SELECT COUNT(*) FROM orderly.owners WHERE owner_uid = ?", db.OwnerUID) != 0 {
		t.Error("Drop left an extra user or a record")
	}
	if _, err := e.Drop(ctx, other, false); err != nil {
		t.Fatal(err)
	}
}

// A user with an extra user's name that Orderly did not make is refused and left
// as it was; retain drops the users and keeps the database.
func TestExtraUsersNotOursAreLeftAlone(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := withUsers(newDB("a4a4a4a4-0000-4000-8000-000000000003"), database.User{Name: "reader", Access: database.ReadOnly})
	mustExec(t, admin, "CREATE USER '"+db.Users[0].Role+"'@'%' IDENTIFIED BY 'theirs'")
	t.Cleanup(func() { _, _ = admin.Exec("DROP USER IF EXISTS '" + db.Users[0].Role + "'@'%'") })
	if _, err := e.Ensure(ctx, db); !errors.Is(err, database.ErrNotOwned) {
		t.Fatalf("Ensure over someone else's user: %v, want ErrNotOwned", err)
	}
	c, err := testmysql.Open(my.Host, my.Port, db.Users[0].Role, "theirs", "")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	if err := c.Ping(); err != nil {
		t.Errorf("someone else's user was altered: %v", err)
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qUser, db.Users[0].Role) != 1 {
		t.Error("Drop dropped someone else's user")
	}

	kept := withUsers(newDB("a4a4a4a4-0000-4000-8000-000000000004"), database.User{Name: "reader", Access: database.ReadOnly})
	if _, err := e.Ensure(ctx, kept); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Drop(ctx, kept, true); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec("DROP DATABASE IF EXISTS " + Ident(kept.Name)) })
	if count(t, admin, qDB, kept.Name) != 1 || count(t, admin, qUser, kept.Users[0].Role) != 0 {
		t.Error("retain: want the database kept and its users dropped")
	}
}
