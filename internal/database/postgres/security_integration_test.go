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

func connectAsRole(t *testing.T, db database.Database) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", db.Role, db.Password, pg.Host, pg.Port, db.Name))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return conn
}

// The role uses its database as its owner did, but cannot touch what Orderly trusts:
// the database's comment (the ownership marker) and its settings, which would apply
// to the admin's sessions too. Its password stops working at the expiry.
func TestTheRoleCannotRewriteWhatOrderlyTrusts(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("a1a1a1a1-0000-4000-8000-000000000011")
	db.ValidUntil = time.Now().Add(48 * time.Hour).Truncate(time.Second)
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	conn := connectAsRole(t, db)
	if _, err := conn.Exec(ctx, "CREATE TABLE t (id int); CREATE SCHEMA app; CREATE TABLE app.u (id int); DROP SCHEMA public CASCADE; CREATE SCHEMA public"); err != nil {
		t.Fatalf("the role cannot use its database as its owner would: %v", err)
	}
	for _, attack := range []string{
		fmt.Sprintf(`COMMENT ON DATABASE %q IS 'orderly.dev/retained-from=%s'`, db.Name, db.OwnerUID),
		fmt.Sprintf(`COMMENT ON DATABASE %q IS 'mine'`, db.Name),
		fmt.Sprintf(`ALTER DATABASE %q SET search_path = public, pg_catalog`, db.Name),
		fmt.Sprintf(`COMMENT ON ROLE %q IS 'orderly.dev/owner-uid=someone-else'`, db.Role),
		fmt.Sprintf(`ALTER ROLE %q VALID UNTIL 'infinity'`, db.Role),
	} {
		if _, err := conn.Exec(ctx, attack); err == nil {
			t.Errorf("the role could run: %s", attack)
		}
	}
	var validUntil time.Time
	if err := admin.QueryRow(ctx, "SELECT rolvaliduntil FROM pg_roles WHERE rolname = $1", db.Role).Scan(&validUntil); err != nil || !validUntil.Equal(db.ValidUntil) {
		t.Errorf("VALID UNTIL = %s (%v), want %s", validUntil, err, db.ValidUntil)
	}
	// An extended expiry moves it.
	db.ValidUntil = db.ValidUntil.Add(24 * time.Hour)
	db.SetPassword = false
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := admin.QueryRow(ctx, "SELECT rolvaliduntil FROM pg_roles WHERE rolname = $1", db.Role).Scan(&validUntil); err != nil || !validUntil.Equal(db.ValidUntil) {
		t.Errorf("VALID UNTIL after extending = %s (%v), want %s", validUntil, err, db.ValidUntil)
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
	if count(t, admin, qDB, db.Name) != 0 {
		t.Fatal("database left behind")
	}
}

// A database made by an earlier version is owned by its role, which could have
// rewritten its comment to anything. Orderly still drops it on expiry, and takes it
// over (the admin owns it from then on) when it is reconciled.
func TestDatabasesOfEarlierVersionsAreTakenOverWhateverTheirComment(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	legacy := func(uid string) database.Database {
		db := newDB(uid)
		// As earlier versions made them: owned by the marked role, marked by comment.
		for _, stmt := range []string{
			fmt.Sprintf(`CREATE ROLE %q LOGIN PASSWORD '%s'`, db.Role, db.Password),
			fmt.Sprintf(`COMMENT ON ROLE %q IS '%s'`, db.Role, Marker(db.OwnerUID)),
			fmt.Sprintf(`CREATE DATABASE %q OWNER %q`, db.Name, db.Role),
			fmt.Sprintf(`COMMENT ON DATABASE %q IS '%s'`, db.Name, Marker(db.OwnerUID)),
			fmt.Sprintf(`REVOKE ALL ON DATABASE %q FROM PUBLIC`, db.Name),
		} {
			if _, err := admin.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		conn := connectAsRole(t, db)
		// The owner says the database is no longer Orderly's, and plants a setting
		// for the admin's sessions.
		for _, stmt := range []string{
			"CREATE TABLE kept (id int); INSERT INTO kept VALUES (7)",
			fmt.Sprintf(`COMMENT ON DATABASE %q IS 'orderly.dev/retained-from=%s'`, db.Name, db.OwnerUID),
			fmt.Sprintf(`ALTER DATABASE %q SET default_transaction_read_only = on`, db.Name),
		} {
			if _, err := conn.Exec(ctx, stmt); err != nil {
				t.Fatal(err)
			}
		}
		_ = conn.Close(ctx)
		db.SetPassword = false
		return db
	}

	// Expiry: dropped, whatever the comment says.
	expiring := legacy("b2b2b2b2-0000-4000-8000-000000000012")
	if _, err := e.Drop(ctx, expiring, false); err != nil {
		t.Fatalf("Drop of a legacy database: %v", err)
	}
	if count(t, admin, qDB, expiring.Name) != 0 || count(t, admin, qRole, expiring.Role) != 0 {
		t.Fatal("a legacy database whose owner rewrote its comment survived its drop")
	}

	// Reconciled: taken over; the role keeps its data and can still work.
	kept := legacy("b2b2b2b2-0000-4000-8000-000000000013")
	if _, err := e.Ensure(ctx, kept); err != nil {
		t.Fatalf("Ensure of a legacy database: %v", err)
	}
	var owner, comment string
	if err := admin.QueryRow(ctx, "SELECT pg_get_userbyid(datdba), shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", kept.Name).Scan(&owner, &comment); err != nil {
		t.Fatal(err)
	}
	if owner != pg.Username || comment != Marker(kept.OwnerUID) {
		t.Errorf("after the take-over: owner %s, comment %q", owner, comment)
	}
	conn := connectAsRole(t, kept)
	var v int
	if err := conn.QueryRow(ctx, "SELECT id FROM kept").Scan(&v); err != nil || v != 7 {
		t.Errorf("the role's data: %d, %v", v, err)
	}
	if _, err := conn.Exec(ctx, "CREATE TABLE more (id int)"); err != nil {
		t.Errorf("the role cannot create tables any more (its planted setting should be gone): %v", err)
	}
	if _, err := conn.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %q IS 'mine'`, kept.Name)); err == nil {
		t.Error("the role can still rewrite the marker")
	}
	if _, err := e.Drop(ctx, kept, false); err != nil {
		t.Fatal(err)
	}
}

// The role plants an object for the admin to pick up by name; the admin's sessions
// never look where the role can write (search_path pg_catalog, pg_temp), and
// extensions go into a schema the role cannot write.
func TestExtensionsGoIntoTheAdminsSchema(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	db := newDB("c3c3c3c3-0000-4000-8000-000000000014")
	db.Extensions = []string{"pgcrypto", "plpgsql"}
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	inside, err := pgx.Connect(ctx, pg.URL(db.Name))
	if err != nil {
		t.Fatal(err)
	}
	defer inside.Close(ctx)
	var schema, owner string
	if err := inside.QueryRow(ctx, `SELECT n.nspname, pg_get_userbyid(n.nspowner) FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace WHERE x.extname = 'pgcrypto'`).Scan(&schema, &owner); err != nil {
		t.Fatal(err)
	}
	if schema != ExtensionsSchema || owner != pg.Username {
		t.Errorf("pgcrypto in schema %s owned by %s", schema, owner)
	}
	conn := connectAsRole(t, db)
	var digest string
	if err := conn.QueryRow(ctx, "SELECT encode(digest('x', 'sha256'), 'hex')").Scan(&digest); err != nil {
		t.Errorf("the role cannot use the extension unqualified: %v", err)
	}
	if _, err := conn.Exec(ctx, "CREATE FUNCTION extensions.gen_random_uuid() RETURNS uuid LANGUAGE sql AS 'SELECT NULL::uuid'"); err == nil {
		t.Error("the role can write into the extensions schema")
	}
	_ = admin
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
}

// A lock another session holds ends the statement at the lock timeout, instead of
// holding the caller (and a worker) until the lock is released.
func TestLockWaitsEndAtTheLockTimeout(t *testing.T) {
	ctx := context.Background()
	c := NewConnector()
	c.Timeouts = database.Timeouts{Statement: 5 * time.Second, Lock: 500 * time.Millisecond}
	t.Cleanup(c.Close)
	e, err := c.Connect(ctx, "postgres", database.Server{Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password})
	if err != nil {
		t.Fatal(err)
	}
	db := newDB("d4d4d4d4-0000-4000-8000-000000000015")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	// Another session (a backup, someone's psql) holds a lock on the database.
	holder, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close(ctx)
	tx, err := holder.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %q IS '%s'`, db.Name, Marker(db.OwnerUID))); err != nil {
		t.Fatal(err)
	}
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err = e.Drop(dctx, db, false)
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("Drop waited %s for the lock", took)
	}
	if !errors.Is(err, database.ErrTimeout) || !strings.Contains(err.Error(), "lock") {
		t.Errorf("Drop = %v, want ErrTimeout about a lock", err)
	}
	_ = tx.Rollback(ctx)
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatalf("Drop once the lock is gone: %v", err)
	}
}

// A server that never answers, or stops answering after the login, costs each call
// its deadline and no more.
func TestHungServersEndEachCallAtItsDeadline(t *testing.T) {
	ctx := context.Background()
	for name, start := range map[string]func() (*testpg.Fake, error){"silent": testpg.Silent, "stalling": testpg.Stalling} {
		t.Run(name, func(t *testing.T) {
			f, err := start()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(f.Close)
			c := NewConnector()
			c.Timeouts = database.Timeouts{Statement: time.Second, Grace: 500 * time.Millisecond}
			t.Cleanup(c.Close)
			e, err := c.Connect(ctx, "postgres", database.Server{Host: f.Host, Port: f.Port, SSLMode: "disable", Username: "orderly_admin", Password: "pw"})
			if err != nil {
				t.Fatal(err)
			}
			db := newDB("e5e5e5e5-0000-4000-8000-000000000016")
			for what, call := range map[string]func() error{
				"Info":   func() error { _, err := e.Info(ctx); return err },
				"Ensure": func() error { _, err := e.Ensure(ctx, db); return err },
				"Drop":   func() error { _, err := e.Drop(ctx, db, false); return err },
			} {
				begin := time.Now()
				err := call()
				// Silent: the connection attempt's own 5 s; stalling: a statement's 1.5 s.
				if took := time.Since(begin); took > 7*time.Second {
					t.Errorf("%s took %s", what, took)
				}
				if !errors.Is(err, database.ErrUnreachable) || !strings.Contains(err.Error(), "in time") {
					t.Errorf("%s = %v, want ErrUnreachable saying the server did not answer in time", what, err)
				}
				if strings.Contains(err.Error(), "orderly_admin") {
					t.Errorf("%s's error names the admin: %v", what, err)
				}
			}
		})
	}
}

// Passwords reach the server only as SCRAM verifiers: never in its log (or
// pg_stat_statements), even with every statement logged.
func TestPasswordsNeverReachTheServersLog(t *testing.T) {
	ctx := context.Background()
	srv, err := testpg.Start(testpg.WithSettings("log_statement=all"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	c := NewConnector()
	t.Cleanup(c.Close)
	e, err := c.Connect(ctx, "postgres", database.Server{Host: srv.Host, Port: srv.Port, SSLMode: "disable", Username: srv.Username, Password: srv.Password})
	if err != nil {
		t.Fatal(err)
	}
	db := newDB("f6f6f6f6-0000-4000-8000-000000000017")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	db.Password, db.SetPassword = database.Password(), true
	first := db.Password
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", db.Role, db.Password, srv.Host, srv.Port, db.Name))
	if err != nil {
		t.Fatalf("the role cannot log in with its password: %v", err)
	}
	_ = conn.Close(ctx)
	logged, err := os.ReadFile(srv.LogFile())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(logged), "CREATE ROLE") {
		t.Fatal("the log does not show the statements (log_statement=all not in effect?)")
	}
	for _, p := range []string{first, db.Password} {
		if strings.Contains(string(logged), p) {
			t.Errorf("the server's log holds a password")
		}
	}
	if !strings.Contains(string(logged), "SCRAM-SHA-256$4096:") {
		t.Error("no SCRAM verifier in the log")
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
	if res.ServerID == "" {
		t.Fatal("no server identity")
	}
	info, err := e.Info(ctx)
	if err != nil || info.SystemIdentifier != res.ServerID {
		t.Fatalf("Info = %+v, %v", info, err)
	}
	elsewhere := db
	elsewhere.ServerID = "1"
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

// A refused login is reported without the admin's name.
func TestLoginErrorsDoNotNameTheAdmin(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	e, err := c.Connect(context.Background(), "postgres", database.Server{Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: "wrong-password"})
	if err == nil {
		_, err = e.Info(context.Background())
	}
	if !errors.Is(err, database.ErrUnreachable) {
		t.Fatalf("got %v, want ErrUnreachable", err)
	}
	if s := err.Error(); strings.Contains(s, pg.Username) || strings.Contains(s, "wrong-password") || !strings.Contains(s, "28P01") {
		t.Fatalf("error: %s", s)
	}
}
