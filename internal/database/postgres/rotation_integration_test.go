//go:build integration

package postgres

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/database"
)

func loginAs(role, password string) error {
	conn, err := pgx.Connect(context.Background(), fmt.Sprintf("postgres://%s:%s@%s:%d/postgres?sslmode=disable", role, password, pg.Host, pg.Port))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())
	var one int
	return conn.QueryRow(context.Background(), "SELECT 1").Scan(&one)
}

// The alternating-roles strategy: the inactive role gets the new password while the
// active one keeps working; after DisableLogin the old one is refused. The password
// never reaches the server as text (the stored verifier is not the password, and
// pg_stat_activity / the statement never holds it).
func TestAlternatingRoles(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	p := e.(*Postgres)
	uid := "rot-0000-0001"
	if _, err := admin.Exec(ctx, `CREATE ROLE app_rw NOLOGIN; COMMENT ON ROLE app_rw IS 'orderly.dev/grantable-to=team-a'`); err != nil {
		t.Fatal(err)
	}
	a := RotatingRole{Name: "app_a", OwnerUID: uid, Namespace: "team-a", Password: database.Password(), GrantRoles: []string{"app_rw"}}
	if err := p.SetRotatingRole(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := loginAs(a.Name, a.Password); err != nil {
		t.Fatalf("role a cannot log in: %v", err)
	}
	// Rotation: b gets a password; a keeps working until it is disabled.
	b := a
	b.Name, b.Password = "app_b", database.Password()
	if err := p.SetRotatingRole(ctx, b); err != nil {
		t.Fatal(err)
	}
	for _, r := range []RotatingRole{a, b} {
		if err := loginAs(r.Name, r.Password); err != nil {
			t.Fatalf("%s cannot log in during the rotation: %v", r.Name, err)
		}
	}
	var member bool
	if err := admin.QueryRow(ctx, "SELECT pg_has_role('app_b', 'app_rw', 'USAGE')").Scan(&member); err != nil || !member {
		t.Fatalf("app_b does not have app_rw's grants (%v)", err)
	}
	var stored string
	if err := admin.QueryRow(ctx, "SELECT rolpassword FROM pg_authid WHERE rolname = 'app_b'").Scan(&stored); err != nil || stored == b.Password || stored[:14] != "SCRAM-SHA-256$" {
		t.Fatalf("stored password is not a SCRAM verifier (%v)", err)
	}
	if err := p.DisableLogin(ctx, a.Name, uid); err != nil {
		t.Fatal(err)
	}
	if err := loginAs(a.Name, a.Password); err == nil {
		t.Fatal("the old role still logs in after DisableLogin")
	}
	if err := loginAs(b.Name, b.Password); err != nil {
		t.Fatalf("the new role stopped working: %v", err)
	}
	// Next rotation: a again, with a new password.
	a.Password = database.Password()
	if err := p.SetRotatingRole(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := loginAs(a.Name, a.Password); err != nil {
		t.Fatalf("role a cannot log in again: %v", err)
	}
}

// A tenant cannot use a SecretRotation to take over someone's role or to be
// granted a role that was not made grantable to its namespace, or that confers
// more than plain privileges.
func TestRotatingRolesRefuseWhatIsNotTheirs(t *testing.T) {
	ctx := context.Background()
	e, admin := connect(t)
	p := e.(*Postgres)
	if _, err := admin.Exec(ctx, `CREATE ROLE someone_a LOGIN PASSWORD 'x';
		CREATE ROLE team_b_rw NOLOGIN; COMMENT ON ROLE team_b_rw IS 'orderly.dev/grantable-to=team-b';
		CREATE ROLE sneaky NOLOGIN; COMMENT ON ROLE sneaky IS 'orderly.dev/grantable-to=team-a'; GRANT pg_read_server_files TO sneaky;
		CREATE ROLE maker NOLOGIN CREATEROLE; COMMENT ON ROLE maker IS 'orderly.dev/grantable-to=team-a'`); err != nil {
		t.Fatal(err)
	}
	err := p.SetRotatingRole(ctx, RotatingRole{Name: "someone_a", OwnerUID: "u1", Namespace: "team-a", Password: database.Password()})
	if !errors.Is(err, database.ErrNotOwned) {
		t.Errorf("taking over an existing role: %v, want ErrNotOwned", err)
	}
	if err := p.DisableLogin(ctx, "someone_a", "u1"); !errors.Is(err, database.ErrNotOwned) {
		t.Errorf("disabling someone's role: %v, want ErrNotOwned", err)
	}
	for _, g := range []string{"team_b_rw", "sneaky", "maker", "pg_read_server_files", pg.Username, "missing"} {
		err := p.SetRotatingRole(ctx, RotatingRole{Name: "t_a", OwnerUID: "u2", Namespace: "team-a", Password: database.Password(), GrantRoles: []string{g}})
		if !errors.Is(err, ErrGrantNotAllowed) {
			t.Errorf("granting %s: %v, want ErrGrantNotAllowed", g, err)
		}
	}
	if n := count(t, admin, qRole, "t_a"); n != 0 {
		t.Error("a refused rotation created its role")
	}
}
