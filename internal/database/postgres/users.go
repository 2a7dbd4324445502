package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"orderly.dev/orderly/internal/database"
)

// A DevDatabase's extra users (spec.users) are login roles named after the main
// role (database.UserRole), created by the admin with a SCRAM verifier and VALID UNTIL
// the database's expiry, and marked like the main role, with the user's name and,
// once its privileges are granted, its access:
//
//	orderly.dev/owner-uid=<uid>;user=<name>;access=ReadOnly
//
// The privileges on the database's schemas, tables and sequences, and the default
// privileges for what the main role creates later, are granted by the main role
// itself, in a session logged in as it: it owns (or, for a clone, holds with the
// grant option) what it grants, and an admin that is not a superuser need not be
// able to act as the role. The admin grants only CONNECT on the database, which it
// owns. A marker without the access means the grants are not done yet (a crash, a
// timeout), so they are done again.

// userSep separates the main marker from a user's part.
const userSep = ";user="

// accessSep separates a user's marker from its access.
const accessSep = ";access="

// codeDependentObjects: DROP ROLE refused because objects or privileges depend on it.
const codeDependentObjects = "2BP01"

// userMarker is the comment of the owner uid's user name, before its privileges
// are granted.
func userMarker(uid, name string) string { return Marker(uid) + userSep + name }

// userMarkerWith is the comment of a user whose privileges are access.
func userMarkerWith(uid, name string, access database.Access) string {
	return userMarker(uid, name) + accessSep + string(access)
}

// userOf reads a user role's comment: the user's name when it is marked as one of
// uid's users (empty otherwise), and the access its privileges were granted for
// (empty while not granted).
func userOf(comment, uid string) (name string, access database.Access) {
	rest, ok := strings.CutPrefix(comment, Marker(uid)+userSep)
	if !ok || rest == "" {
		return "", ""
	}
	name, acc, found := strings.Cut(rest, accessSep)
	if !found {
		return name, ""
	}
	switch a := database.Access(acc); a {
	case database.ReadOnly, database.ReadWrite:
		return name, a
	}
	return "", ""
}

// userRole is an existing role whose name is one of a database's users'.
type userRole struct {
	comment    string
	validUntil *time.Time
	// user and access are what its marker says (user empty: not marked as ours).
	user   string
	access database.Access
}

// userRoles lists the roles whose names a user of db could have (the main role's
// name, '_', anything).
func (p *Postgres) userRoles(ctx context.Context, db database.Database) (map[string]userRole, error) {
	qctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	rows, err := p.pool.Query(qctx, `SELECT rolname, coalesce(shobj_description(oid, 'pg_authid'), ''),
		CASE WHEN isfinite(rolvaliduntil) THEN rolvaliduntil END
		FROM pg_roles WHERE starts_with(rolname, $1)`, db.Role+"_")
	if err != nil {
		return nil, p.classify(err, "listing the database's users")
	}
	out := map[string]userRole{}
	var name, comment string
	var valid *time.Time
	_, err = pgx.ForEachRow(rows, []any{&name, &comment, &valid}, func() error {
		u := userRole{comment: comment, validUntil: valid}
		u.user, u.access = userOf(comment, db.OwnerUID)
		out[name] = u
		return nil
	})
	if err != nil {
		return nil, p.classify(err, "listing the database's users")
	}
	return out, nil
}

// ensureUsers makes db's extra users exactly db.Users, and returns the names of
// those it dropped.
func (p *Postgres) ensureUsers(ctx context.Context, db database.Database) ([]string, error) {
	have, err := p.userRoles(ctx, db)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, u := range db.Users {
		want[u.Role] = true
		cur, exists := have[u.Role]
		if exists && cur.user != u.Name {
			return nil, fmt.Errorf("role %s %w", u.Role, database.ErrNotOwned)
		}
		if err := p.ensureUser(ctx, db, u, cur, exists); err != nil {
			return nil, err
		}
	}
	var dropped []string
	for _, role := range slices.Sorted(maps.Keys(have)) {
		cur := have[role]
		if want[role] || cur.user == "" {
			continue
		}
		if _, err := p.dropUser(ctx, db, role, true); err != nil {
			return dropped, err
		}
		dropped = append(dropped, cur.user)
	}
	return dropped, nil
}

// ensureUser creates user u (role, marker and CONNECT in one transaction), keeps
// its password and expiry, and grants its privileges when its marker does not say
// they are granted for its access.
func (p *Postgres) ensureUser(ctx context.Context, db database.Database, u database.User, cur userRole, exists bool) error {
	r := ident(u.Role)
	if !exists {
		verifier, err := scramVerifier(u.Password)
		if err != nil {
			return err
		}
		if err := p.exec(ctx, 3, "creating user "+u.Name,
			"CREATE ROLE "+r+" LOGIN PASSWORD "+literal(verifier)+" VALID UNTIL "+literal(validUntil(db.ValidUntil))+
				"; COMMENT ON ROLE "+r+" IS "+literal(userMarker(db.OwnerUID, u.Name))+
				"; GRANT CONNECT ON DATABASE "+ident(db.Name)+" TO "+r); err != nil {
			return err
		}
	} else {
		if u.SetPassword {
			verifier, err := scramVerifier(u.Password)
			if err != nil {
				return err
			}
			if err := p.exec(ctx, 1, "setting user "+u.Name+"'s password", "ALTER ROLE "+r+" PASSWORD "+literal(verifier)); err != nil {
				return err
			}
		}
		if !sameValidity(cur.validUntil, db.ValidUntil) {
			if err := p.exec(ctx, 1, "setting user "+u.Name+"'s expiry", "ALTER ROLE "+r+" VALID UNTIL "+literal(validUntil(db.ValidUntil))); err != nil {
				return err
			}
		}
		if cur.access == u.Access {
			return nil
		}
	}
	// Revoked first, so that a change of access leaves nothing of the old one.
	if err := p.asOwner(ctx, db, "granting user "+u.Name+"'s privileges", func(ctx context.Context, conn *pgx.Conn) ([]string, error) {
		schemas, err := userSchemas(ctx, conn)
		if err != nil {
			return nil, p.classify(err, "listing schemas")
		}
		return append(revokeStatements(u.Role, schemas), grantStatements(u.Role, u.Access, schemas)...), nil
	}); err != nil {
		return err
	}
	return p.exec(ctx, 1, "marking user "+u.Name, "COMMENT ON ROLE "+r+" IS "+literal(userMarkerWith(db.OwnerUID, u.Name, u.Access)))
}

// dropUser drops a user's role after ending its sessions. With revoke (the
// database lives on), its privileges there are revoked first: those the main role
// granted by the main role, CONNECT by the admin; what is left that the role
// cannot be dropped for (objects it made where PUBLIC may create, on old servers)
// goes with DROP OWNED, which needs an admin that can act as the role.
func (p *Postgres) dropUser(ctx context.Context, db database.Database, role string, revoke bool) (int, error) {
	n, err := p.terminate(ctx, "terminating a user's connections", `usename = $1`, role)
	if err != nil {
		return n, err
	}
	r := ident(role)
	if revoke {
		if err := p.asOwner(ctx, db, "revoking a user's privileges", func(ctx context.Context, conn *pgx.Conn) ([]string, error) {
			schemas, err := userSchemas(ctx, conn)
			if err != nil {
				return nil, p.classify(err, "listing schemas")
			}
			return revokeStatements(role, schemas), nil
		}); err != nil {
			return n, err
		}
		if err := p.exec(ctx, 1, "revoking a user's access to the database", "REVOKE ALL ON DATABASE "+ident(db.Name)+" FROM "+r); err != nil {
			return n, err
		}
	}
	err = p.dropRole(ctx, r)
	var pgErr *pgconn.PgError
	if revoke && errors.As(err, &pgErr) && pgErr.Code == codeDependentObjects {
		if err := p.inside(ctx, db.Name, "dropping what a user owns", func(context.Context, *pgx.Conn) ([]string, error) {
			return []string{"DROP OWNED BY " + r}, nil
		}); err != nil {
			return n, err
		}
		err = p.dropRole(ctx, r)
	}
	return n, p.classify(err, "dropping a user")
}

// dropRole drops a role, returning the server's error as it is.
func (p *Postgres) dropRole(ctx context.Context, r string) error {
	ctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	_, err := p.pool.Exec(ctx, "DROP ROLE IF EXISTS "+r)
	return err
}

// userSchemas lists the schemas a user may be given: all but the system's and the
// admin's extensions schema.
func userSchemas(ctx context.Context, conn *pgx.Conn) ([]string, error) {
	rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace
		WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' AND nspname <> $1 ORDER BY nspname`, ExtensionsSchema)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}

// tablePrivileges and sequencePrivileges are what each access gets.
func tablePrivileges(a database.Access) string {
	if a == database.ReadWrite {
		return "SELECT, INSERT, UPDATE, DELETE"
	}
	return "SELECT"
}

// grantStatements gives role access to every table (and, ReadWrite, sequence) in
// schemas, and to those the session's role (the main role) makes later. A GRANT of
// what the main role may not pass on (an object someone else owns) is a warning,
// not an error.
func grantStatements(role string, a database.Access, schemas []string) []string {
	r := ident(role)
	tables := tablePrivileges(a)
	var stmts []string
	for _, s := range schemas {
		n := ident(s)
		stmts = append(stmts, "GRANT USAGE ON SCHEMA "+n+" TO "+r, "GRANT "+tables+" ON ALL TABLES IN SCHEMA "+n+" TO "+r)
		if a == database.ReadWrite {
			stmts = append(stmts, "GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA "+n+" TO "+r)
		}
	}
	stmts = append(stmts,
		"ALTER DEFAULT PRIVILEGES GRANT USAGE ON SCHEMAS TO "+r,
		"ALTER DEFAULT PRIVILEGES GRANT "+tables+" ON TABLES TO "+r)
	if a == database.ReadWrite {
		stmts = append(stmts, "ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "+r)
	}
	return stmts
}

// revokeStatements takes back what grantStatements gave, whatever the access.
func revokeStatements(role string, schemas []string) []string {
	r := ident(role)
	var stmts []string
	for _, s := range schemas {
		n := ident(s)
		stmts = append(stmts,
			"REVOKE ALL ON ALL TABLES IN SCHEMA "+n+" FROM "+r,
			"REVOKE ALL ON ALL SEQUENCES IN SCHEMA "+n+" FROM "+r,
			"REVOKE ALL ON SCHEMA "+n+" FROM "+r)
	}
	return append(stmts,
		"ALTER DEFAULT PRIVILEGES REVOKE ALL ON SCHEMAS FROM "+r,
		"ALTER DEFAULT PRIVILEGES REVOKE ALL ON TABLES FROM "+r,
		"ALTER DEFAULT PRIVILEGES REVOKE ALL ON SEQUENCES FROM "+r)
}

// connectAsOwner opens a session in db logged in as its main role (with
// db.Password), never as the admin, with the given statement_timeout and the
// admin's pinned search_path unless keepSearchPath.
func (p *Postgres) connectAsOwner(ctx context.Context, db database.Database, statement time.Duration, keepSearchPath bool) (*pgx.Conn, error) {
	s := p.server
	s.Username, s.Password = db.Role, db.Password
	cfg, err := Config(s, Session{Database: db.Name, Timeouts: p.timeouts, Statement: statement, KeepSearchPath: keepSearchPath})
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && strings.HasPrefix(pgErr.Code, "28") {
			return nil, fmt.Errorf("%w: the server refused the database role's login (SQLSTATE %s); Orderly logs in as the role to grant its users' privileges and run its init SQL", database.ErrUnreachable, pgErr.Code)
		}
		return nil, p.classify(err, "connecting as the database's role")
	}
	return conn, nil
}

// asOwner runs statements in one implicit transaction in a session logged in as
// db's main role, with queries first to decide them.
func (p *Postgres) asOwner(ctx context.Context, db database.Database, what string, fn func(ctx context.Context, conn *pgx.Conn) ([]string, error)) error {
	qctx, cancel := p.timeouts.Deadline(ctx, 4)
	defer cancel()
	conn, err := p.connectAsOwner(qctx, db, p.timeouts.Statement, false)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	stmts, err := fn(qctx, conn)
	if err != nil || len(stmts) == 0 {
		return err
	}
	sctx, scancel := p.timeouts.Deadline(ctx, len(stmts))
	defer scancel()
	if _, err := conn.Exec(sctx, strings.Join(stmts, ";\n")); err != nil {
		return p.classify(err, what)
	}
	return nil
}
