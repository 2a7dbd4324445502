// Package postgres is the PostgreSQL engine of the data controllers, using pgx.
//
// What a DevDatabase's role can and cannot touch decides what Orderly may trust:
//
//   - The database is owned by the admin, and the role gets CONNECT, TEMPORARY and
//     CREATE on it and owns its public schema. So the role cannot write the
//     database's comment (Orderly's ownership marker), its settings (which would
//     apply to the admin's sessions too) or its name. The role's own comment needs
//     CREATEROLE to change. Databases made by earlier versions, owned by the role,
//     are recognised by the role's marker alone and taken over on the next Ensure.
//   - Every admin session runs with search_path pg_catalog, pg_temp (sent at
//     connection start, which no database or role setting overrides), so that no
//     object the role creates can be picked instead of a built-in one: the
//     CVE-2018-1058 class.
//   - Extensions are created once, when the database is created and before the
//     role has a password anyone knows, in the schema "extensions", owned by the
//     admin, which the role may use but not write.
//   - Every statement has a deadline in Orderly and statement_timeout and
//     lock_timeout on the server, so a hung server or a lock held elsewhere never
//     holds a worker for long.
package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"orderly.dev/orderly/internal/database"
)

// markerPrefix starts the comment that marks a database or role as Orderly's; the
// owner's UID follows.
const markerPrefix = "orderly.dev/owner-uid="

// retainedPrefix marks a database that a DevDatabase with deletionPolicy Retain
// left behind: no longer Orderly's, never dropped by it.
const retainedPrefix = "orderly.dev/retained-from="

// ExtensionsSchema is the schema, owned by the admin, that extensions are created in.
const ExtensionsSchema = "extensions"

// adminSearchPath is the search_path of every admin session: built-ins only, the
// session's own temporary schema last.
const adminSearchPath = "pg_catalog, pg_temp"

// creatingSuffix follows the marker on a role while Orderly creates its database:
// the database exists unmarked (CREATE DATABASE and COMMENT cannot share a
// transaction) until it is prepared, and only this says that Orderly made it.
const creatingSuffix = ";creating-database"

// Marker is the comment on a database or role owned by the DevDatabase with uid.
func Marker(uid string) string { return markerPrefix + uid }

// creatingMarker is the role's comment while its database is being created.
func creatingMarker(uid string) string { return Marker(uid) + creatingSuffix }

// SQLSTATE codes Orderly reacts to.
const (
	codeObjectInUse         = "55006"
	codeInvalidCatalogName  = "3D000"
	codeDuplicateDatabase   = "42P04"
	codeInsufficientPriv    = "42501"
	codeLockNotAvailable    = "55P03"
	codeQueryCanceled       = "57014"
	codeIdleInTransactionTO = "25P03"
)

// Postgres is the engine for one PostgreSQL server.
type Postgres struct {
	pool     *pgxpool.Pool
	server   database.Server
	timeouts database.Timeouts
}

var _ database.Engine = (*Postgres)(nil)

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// exec runs sql (statements separated by semicolons run as one implicit
// transaction) on the pool, within the deadline of n statements.
func (p *Postgres) exec(ctx context.Context, n int, what, sql string) error {
	ctx, cancel := p.timeouts.Deadline(ctx, n)
	defer cancel()
	_, err := p.pool.Exec(ctx, sql)
	return p.classify(err, what)
}

// describe says what went wrong in the pgx errors it knows, for
// database.Scrubber.Describe, without anything that could carry a password or the
// admin's name: a server error is its message and SQLSTATE (a refused login its
// SQLSTATE alone, since its message names the user), a connection error its cause
// without the connection settings. Other errors are "".
func describe(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		if strings.HasPrefix(pgErr.Code, "28") {
			return fmt.Sprintf("the server refused the admin's login (SQLSTATE %s)", pgErr.Code)
		}
		return fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	if pgconn.Timeout(err) {
		return "the server did not answer in time"
	}
	var netErr net.Error
	var connErr *pgconn.ConnectError
	if !errors.As(err, &netErr) && errors.As(err, &connErr) {
		// Its own message names the admin user; what went wrong is underneath.
		if inner := errors.Unwrap(connErr); inner != nil {
			return database.Scrubber{}.Describe(inner, describe)
		}
		return "cannot connect"
	}
	return ""
}

// classify wraps connection-level failures in ErrUnreachable and the server's own
// timeouts in ErrTimeout, in messages without the admin's credentials.
func (p *Postgres) classify(err error, what string) error {
	if err == nil {
		return nil
	}
	return classify(err, what, p.timeouts, database.ScrubberFor(p.server))
}

func classify(err error, what string, t database.Timeouts, sc database.Scrubber) error {
	if err == nil {
		return nil
	}
	safe := func() string { return sc.Describe(err, describe) }
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch {
		// Authentication and connection-exception classes mean the admin cannot work.
		case strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P03":
			return fmt.Errorf("%w: %s: %s", database.ErrUnreachable, what, safe())
		case pgErr.Code == codeLockNotAvailable:
			return fmt.Errorf("%w: %s: another session holds a lock it needs (waited %s): %s", database.ErrTimeout, what, t.Lock, safe())
		case pgErr.Code == codeQueryCanceled || pgErr.Code == codeIdleInTransactionTO:
			return fmt.Errorf("%w: %s: %s", database.ErrTimeout, what, safe())
		}
		return fmt.Errorf("%s: %s", what, safe())
	}
	if errors.Is(err, context.DeadlineExceeded) || pgconn.Timeout(err) {
		return fmt.Errorf("%w: %s: the server did not answer in time", database.ErrUnreachable, what)
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if pgconn.SafeToRetry(err) || errors.As(err, &connErr) || errors.As(err, &netErr) {
		return fmt.Errorf("%w: %s: %s", database.ErrUnreachable, what, safe())
	}
	return fmt.Errorf("%s: %s", what, safe())
}

// identity is the server's system_identifier, or "" when the admin may not read it.
func (p *Postgres) identity(ctx context.Context) (string, error) {
	ctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	var id string
	err := p.pool.QueryRow(ctx, `SELECT system_identifier::text FROM pg_control_system()`).Scan(&id)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == codeInsufficientPriv {
		return "", nil
	}
	return id, p.classify(err, "reading the server's identity")
}

// Info reports the server's version, identity and how many databases Orderly owns there.
func (p *Postgres) Info(ctx context.Context) (database.Info, error) {
	var info database.Info
	var n int64
	qctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	err := p.pool.QueryRow(qctx, `SELECT current_setting('server_version'),
		(SELECT count(*) FROM pg_database d WHERE starts_with(coalesce(shobj_description(d.oid, 'pg_database'), ''), $1))`,
		markerPrefix).Scan(&info.Version, &n)
	if err != nil {
		return info, p.classify(err, "querying the server")
	}
	info.OwnedDatabases = int(n)
	info.SystemIdentifier, err = p.identity(ctx)
	return info, err
}

// Owned lists the databases and roles named prefix... that carry Orderly's marker
// (a role whose database is being created carries it too).
func (p *Postgres) Owned(ctx context.Context, prefix string) (database.Owned, error) {
	var owned database.Owned
	qctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	rows, err := p.pool.Query(qctx, `SELECT true, datname FROM pg_database d
		WHERE starts_with(datname, $1) AND starts_with(coalesce(shobj_description(d.oid, 'pg_database'), ''), $2)
		UNION ALL SELECT false, rolname FROM pg_roles r
		WHERE starts_with(rolname, $1) AND starts_with(coalesce(shobj_description(r.oid, 'pg_authid'), ''), $2)
		ORDER BY 2`, prefix, markerPrefix)
	if err != nil {
		return owned, p.classify(err, "listing Orderly's databases")
	}
	var isDatabase bool
	var name string
	_, err = pgx.ForEachRow(rows, []any{&isDatabase, &name}, func() error {
		if isDatabase {
			owned.Databases = append(owned.Databases, name)
		} else {
			owned.Roles = append(owned.Roles, name)
		}
		return nil
	})
	return owned, p.classify(err, "listing Orderly's databases")
}

type roleState struct {
	exists     bool
	comment    string
	validUntil *time.Time
}

func (p *Postgres) role(ctx context.Context, name string) (roleState, error) {
	ctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	var st roleState
	var comment *string
	err := p.pool.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid'), CASE WHEN isfinite(rolvaliduntil) THEN rolvaliduntil END
		FROM pg_roles WHERE rolname = $1`, name).Scan(&comment, &st.validUntil)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, p.classify(err, "looking up role")
	}
	st.exists = true
	if comment != nil {
		st.comment = *comment
	}
	return st, nil
}

type databaseState struct {
	exists  bool
	comment string
	owner   string
}

func (p *Postgres) database(ctx context.Context, name string) (databaseState, error) {
	ctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	var st databaseState
	var comment *string
	err := p.pool.QueryRow(ctx, `SELECT shobj_description(d.oid, 'pg_database'), pg_get_userbyid(d.datdba)
		FROM pg_database d WHERE d.datname = $1`, name).Scan(&comment, &st.owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, p.classify(err, "looking up database")
	}
	st.exists = true
	if comment != nil {
		st.comment = *comment
	}
	return st, nil
}

// ownership is what Orderly may conclude about an existing database with a
// DevDatabase's name.
type ownership int

const (
	// notOurs: never altered or dropped.
	notOurs ownership = iota
	// ours: owned by the admin side and marked; prepared.
	ours
	// unprepared: owned by the admin side, unmarked, and its role is marked: Orderly
	// created it and stopped before preparing and marking it (a crash, a timeout).
	unprepared
	// legacy: owned by the marked role, as earlier versions made them. The role
	// could have rewritten the database's comment, so it is no evidence either way.
	legacy
	// released: a retained database, handed to the admin; no longer Orderly's.
	released
)

// roleMarked says whether the role is marked as db's (the role cannot comment on
// itself: that needs CREATEROLE).
func roleMarked(role roleState, db database.Database) bool {
	return role.exists && (role.comment == Marker(db.OwnerUID) || role.comment == creatingMarker(db.OwnerUID))
}

// judge decides who a database belongs to from what the role cannot write: the
// database's owner, the role's marker, and the database's comment only when the
// role does not own the database (only the owner may comment on it).
func judge(st databaseState, role roleState, db database.Database) ownership {
	switch {
	case st.owner == db.Role && roleMarked(role, db):
		return legacy
	case st.owner == db.Role:
		return notOurs
	case strings.HasPrefix(st.comment, retainedPrefix):
		return released
	case st.comment == Marker(db.OwnerUID):
		return ours
	case st.comment == "" && role.exists && role.comment == creatingMarker(db.OwnerUID):
		return unprepared
	}
	return notOurs
}

// validUntil is the VALID UNTIL clause's value for t.
func validUntil(t time.Time) string {
	if t.IsZero() {
		return "infinity"
	}
	return t.UTC().Format(time.RFC3339)
}

// sameValidity says whether the role's VALID UNTIL is t (to the second).
func sameValidity(have *time.Time, t time.Time) bool {
	if have == nil || have.IsZero() || have.Year() > 9999 {
		return t.IsZero()
	}
	return !t.IsZero() && have.Truncate(time.Second).Equal(t.Truncate(time.Second))
}

// Ensure creates what is missing of db's role and database, prepares a new database
// (privileges, public schema, extensions), takes over a database made by an
// earlier version, and makes the database's extra users db.Users.
func (p *Postgres) Ensure(ctx context.Context, db database.Database) (database.EnsureResult, error) {
	res, err := p.ensureDatabase(ctx, db)
	if err != nil {
		return res, err
	}
	res.UsersDropped, err = p.ensureUsers(ctx, db)
	return res, err
}

// ensureDatabase is Ensure's database and main role.
func (p *Postgres) ensureDatabase(ctx context.Context, db database.Database) (database.EnsureResult, error) {
	var res database.EnsureResult
	id, err := p.identity(ctx)
	if err != nil {
		return res, err
	}
	res.ServerID = id
	if err := database.SameServer(db.ServerID, id); err != nil {
		return res, err
	}
	role, err := p.role(ctx, db.Role)
	if err != nil {
		return res, err
	}
	if role.exists && !roleMarked(role, db) {
		return res, fmt.Errorf("role %s %w", db.Role, database.ErrNotOwned)
	}
	st, err := p.database(ctx, db.Name)
	if err != nil {
		return res, err
	}
	// The role says "creating" from before CREATE DATABASE until the database is
	// marked, so that an unmarked database of this name is known to be Orderly's.
	wantComment := Marker(db.OwnerUID)
	if !st.exists {
		wantComment = creatingMarker(db.OwnerUID)
	}
	r := ident(db.Role)
	if !role.exists {
		verifier, err := scramVerifier(db.Password)
		if err != nil {
			return res, err
		}
		// Role and marker in one (implicit) transaction: a role with Orderly's name
		// and no marker can only be someone else's.
		if err := p.exec(ctx, 2, "creating role",
			"CREATE ROLE "+r+" LOGIN PASSWORD "+literal(verifier)+" VALID UNTIL "+literal(validUntil(db.ValidUntil))+
				"; COMMENT ON ROLE "+r+" IS "+literal(wantComment)); err != nil {
			return res, err
		}
		role = roleState{exists: true, comment: wantComment}
	} else {
		if db.SetPassword {
			verifier, err := scramVerifier(db.Password)
			if err != nil {
				return res, err
			}
			if err := p.exec(ctx, 1, "setting the role's password", "ALTER ROLE "+r+" PASSWORD "+literal(verifier)); err != nil {
				return res, err
			}
		}
		if !sameValidity(role.validUntil, db.ValidUntil) {
			if err := p.exec(ctx, 1, "setting the role's expiry", "ALTER ROLE "+r+" VALID UNTIL "+literal(validUntil(db.ValidUntil))); err != nil {
				return res, err
			}
		}
		if !st.exists && role.comment != wantComment {
			if err := p.exec(ctx, 1, "marking role", "COMMENT ON ROLE "+r+" IS "+literal(wantComment)); err != nil {
				return res, err
			}
			role.comment = wantComment
		}
	}

	state := unprepared
	if st.exists {
		state = judge(st, role, db)
	} else {
		if err := p.createDatabase(ctx, db); err != nil {
			return res, err
		}
		res.Created = true
	}
	switch state {
	case ours:
		if role.comment == Marker(db.OwnerUID) {
			return res, nil
		}
	case unprepared:
		if err := p.prepare(ctx, db); err != nil {
			return res, err
		}
	case legacy:
		if err := p.takeOver(ctx, db); err != nil {
			return res, err
		}
	default:
		return res, fmt.Errorf("database %s %w", db.Name, database.ErrNotOwned)
	}
	// Marked last, both in one transaction: a marked database is a prepared one.
	return res, p.exec(ctx, 2, "marking database", "COMMENT ON DATABASE "+ident(db.Name)+" IS "+literal(Marker(db.OwnerUID))+
		"; COMMENT ON ROLE "+r+" IS "+literal(Marker(db.OwnerUID)))
}

// createDatabase creates db owned by the admin, with no access for PUBLIC. A clone
// runs on a connection of its own with the longer Clone timeout.
func (p *Postgres) createDatabase(ctx context.Context, db database.Database) error {
	stmt := "CREATE DATABASE " + ident(db.Name)
	var err error
	if db.Template == "" {
		ctx, cancel := p.timeouts.Deadline(ctx, 1)
		_, err = p.pool.Exec(ctx, stmt)
		cancel()
	} else {
		err = p.clone(ctx, stmt+" TEMPLATE "+ident(db.Template))
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeObjectInUse:
			return fmt.Errorf("%w: %s", database.ErrTemplateInUse, pgErr.Message)
		case codeInvalidCatalogName:
			return fmt.Errorf("%w: %s", database.ErrTemplateMissing, pgErr.Message)
		case codeDuplicateDatabase:
			// Created meanwhile by another reconcile of the same DevDatabase.
			err = nil
		}
	}
	if err != nil {
		return p.classify(err, "creating database")
	}
	// Nobody but the role (granted later) and superusers may connect or make
	// temporary tables.
	return p.exec(ctx, 1, "revoking public access", "REVOKE ALL ON DATABASE "+ident(db.Name)+" FROM PUBLIC")
}

// clone runs a CREATE DATABASE ... TEMPLATE on a connection of its own, whose
// statement_timeout is the Clone timeout, so the pool's sessions keep the short one.
func (p *Postgres) clone(ctx context.Context, stmt string) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeouts.Clone+p.timeouts.Grace)
	defer cancel()
	conn, err := p.connectTo(ctx, "postgres", p.timeouts.Clone)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	_, err = conn.Exec(ctx, stmt)
	return err
}

// connectTo opens an admin session to dbname, set up like the pool's, with the
// given statement_timeout.
func (p *Postgres) connectTo(ctx context.Context, dbname string, statement time.Duration) (*pgx.Conn, error) {
	cfg, err := Config(p.server, Session{Database: dbname, Timeouts: p.timeouts, Statement: statement})
	if err != nil {
		return nil, err
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, p.classify(err, "connecting to database "+dbname)
	}
	return conn, nil
}

// inside runs statements inside database as the admin, in one implicit
// transaction, with queries first to decide them. fn receives the session and
// returns the statements to run.
func (p *Postgres) inside(ctx context.Context, dbname, what string, fn func(ctx context.Context, conn *pgx.Conn) ([]string, error)) error {
	// Connecting and the queries that decide the statements: a few statements' time.
	qctx, cancel := p.timeouts.Deadline(ctx, 4)
	defer cancel()
	conn, err := p.connectTo(qctx, dbname, p.timeouts.Statement)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	stmts, err := fn(qctx, conn)
	if err != nil {
		return err
	}
	if len(stmts) == 0 {
		return nil
	}
	sctx, scancel := p.timeouts.Deadline(ctx, len(stmts))
	defer scancel()
	if _, err := conn.Exec(sctx, strings.Join(stmts, ";\n")); err != nil {
		return p.classify(err, what)
	}
	return nil
}

// publicOwnership returns the statement that gives the role its database's public
// schema, where the schema follows the database's owner (pg_database_owner, from
// PostgreSQL 15): the admin owns the database, and the role should own public as
// it did when it owned the database.
func (p *Postgres) publicOwnership(ctx context.Context, conn *pgx.Conn, role string) ([]string, error) {
	var owner string
	err := conn.QueryRow(ctx, `SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'public'`).Scan(&owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, p.classify(err, "looking up the public schema")
	}
	if owner != "pg_database_owner" {
		return nil, nil
	}
	return []string{"ALTER SCHEMA public OWNER TO " + ident(role)}, nil
}

// prepare makes a database Orderly created ready for its role, in one transaction
// inside it: privileges on a clone's objects, the public schema, the extensions, and
// the role's access to the database.
func (p *Postgres) prepare(ctx context.Context, db database.Database) error {
	r := ident(db.Role)
	return p.inside(ctx, db.Name, "preparing the database", func(ctx context.Context, conn *pgx.Conn) ([]string, error) {
		var stmts []string
		if db.Template != "" {
			// Objects cloned from the template keep the template's owners; give the
			// role full use of every table, sequence and schema in its own database,
			// except the admin's extensions schema, which it may only use.
			rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace
				WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema' AND nspname <> $1`, ExtensionsSchema)
			if err != nil {
				return nil, p.classify(err, "listing schemas")
			}
			schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return nil, p.classify(err, "listing schemas")
			}
			for _, s := range schemas {
				n := ident(s)
				// With the grant option, so that the role can pass them on to its
				// database's extra users (spec.users), whom it grants to itself.
				stmts = append(stmts,
					"GRANT USAGE, CREATE ON SCHEMA "+n+" TO "+r+" WITH GRANT OPTION",
					"GRANT ALL ON ALL TABLES IN SCHEMA "+n+" TO "+r+" WITH GRANT OPTION",
					"GRANT ALL ON ALL SEQUENCES IN SCHEMA "+n+" TO "+r+" WITH GRANT OPTION",
					"GRANT ALL ON ALL FUNCTIONS IN SCHEMA "+n+" TO "+r)
			}
		}
		public, err := p.publicOwnership(ctx, conn, db.Role)
		if err != nil {
			return nil, err
		}
		stmts = append(stmts, public...)
		if len(db.Extensions) > 0 {
			ext, err := p.extensionStatements(ctx, conn, db)
			if err != nil {
				return nil, err
			}
			stmts = append(stmts, ext...)
		}
		return append(stmts, "GRANT CONNECT, TEMPORARY, CREATE ON DATABASE "+ident(db.Name)+" TO "+r), nil
	})
}

// extensionStatements creates db's extensions in the admin's schema "extensions",
// which the role may use and not write (an extension whose control file fixes its
// schema goes there instead), and puts that schema on the database's search_path
// for the role's sessions. The admin's own sessions ignore that setting.
func (p *Postgres) extensionStatements(ctx context.Context, conn *pgx.Conn, db database.Database) ([]string, error) {
	r, x := ident(db.Role), ident(ExtensionsSchema)
	stmts := []string{
		"CREATE SCHEMA IF NOT EXISTS " + x,
		// A schema of that name cloned from a template keeps the template's owner;
		// whoever owns it, the role must not write it.
		"REVOKE CREATE ON SCHEMA " + x + " FROM PUBLIC, " + r,
		"GRANT USAGE ON SCHEMA " + x + " TO " + r,
	}
	for _, name := range db.Extensions {
		var fixed *string
		err := conn.QueryRow(ctx, `SELECT v.schema::text FROM pg_available_extension_versions v
			JOIN pg_available_extensions a ON a.name = v.name AND a.default_version = v.version WHERE v.name = $1`, name).Scan(&fixed)
		if errors.Is(err, pgx.ErrNoRows) {
			return nil, fmt.Errorf("%w: %s: it is not available on the server", database.ErrExtension, name)
		}
		if err != nil {
			return nil, p.classify(err, "looking up extension "+name)
		}
		stmt := "CREATE EXTENSION IF NOT EXISTS " + ident(name)
		if fixed == nil {
			stmt += " SCHEMA " + x
		}
		stmts = append(stmts, stmt)
	}
	return append(stmts, "ALTER DATABASE "+ident(db.Name)+` SET search_path = "$user", public, `+x), nil
}

// takeOver brings a database made by an earlier version (owned by its role) to
// today's form: owned by the admin, the role's settings on it reset (they would
// apply to the admin's sessions too), the role granted what it had as the owner,
// and its public schema given back to it.
func (p *Postgres) takeOver(ctx context.Context, db database.Database) error {
	d, r := ident(db.Name), ident(db.Role)
	if err := p.exec(ctx, 4, "taking over a database made by an earlier version",
		"ALTER DATABASE "+d+" OWNER TO CURRENT_USER; ALTER DATABASE "+d+" RESET ALL; REVOKE ALL ON DATABASE "+d+" FROM PUBLIC; "+
			"GRANT CONNECT, TEMPORARY, CREATE ON DATABASE "+d+" TO "+r); err != nil {
		return err
	}
	return p.inside(ctx, db.Name, "giving the role its public schema", func(ctx context.Context, conn *pgx.Conn) ([]string, error) {
		return p.publicOwnership(ctx, conn, db.Role)
	})
}

// Drop terminates connections, then drops db, its role and its users' roles, or
// with retain hands the database to the admin and drops only the roles. What is not
// Orderly's is never dropped or altered, and nothing is done on a server other than
// the database's.
func (p *Postgres) Drop(ctx context.Context, db database.Database, retain bool) (database.DropResult, error) {
	var res database.DropResult
	id, err := p.identity(ctx)
	if err != nil {
		return res, err
	}
	if err := database.SameServer(db.ServerID, id); err != nil {
		return res, err
	}
	role, err := p.role(ctx, db.Role)
	if err != nil {
		return res, err
	}
	if role.exists && !roleMarked(role, db) {
		return res, fmt.Errorf("role %s %w", db.Role, database.ErrNotOwned)
	}
	users, err := p.userRoles(ctx, db)
	if err != nil {
		return res, err
	}
	var userNames []string
	for name, u := range users {
		if u.user != "" {
			userNames = append(userNames, name)
		}
	}
	slices.Sort(userNames)
	st, err := p.database(ctx, db.Name)
	if err != nil {
		return res, err
	}
	if st.exists {
		switch judge(st, role, db) {
		case released:
		case ours, unprepared, legacy:
			if retain {
				n, err := p.release(ctx, db, userNames)
				res.Terminated += n
				if err != nil {
					return res, err
				}
				break
			}
			n, err := p.terminate(ctx, "terminating connections", `datname = $1 AND pid <> pg_backend_pid()`, db.Name)
			res.Terminated += n
			if err != nil {
				return res, err
			}
			if err := p.exec(ctx, 1, "dropping database", "DROP DATABASE IF EXISTS "+ident(db.Name)+" WITH (FORCE)"); err != nil {
				return res, err
			}
		default:
			return res, fmt.Errorf("database %s %w", db.Name, database.ErrNotOwned)
		}
	}
	for _, u := range userNames {
		n, err := p.dropUser(ctx, db, u, false)
		res.Terminated += n
		if err != nil {
			return res, err
		}
	}
	if role.exists {
		n, err := p.terminate(ctx, "terminating the role's connections", `usename = $1`, db.Role)
		res.Terminated += n
		if err != nil {
			return res, err
		}
		if err := p.exec(ctx, 1, "dropping role", "DROP ROLE IF EXISTS "+ident(db.Role)); err != nil {
			return res, err
		}
	}
	return res, nil
}

// terminate ends the sessions pg_stat_activity selects by where, and says how many.
func (p *Postgres) terminate(ctx context.Context, what, where string, args ...any) (int, error) {
	qctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	var n int64
	err := p.pool.QueryRow(qctx, `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity WHERE `+where, args...).Scan(&n)
	return int(n), p.classify(err, what)
}

// release hands a retained database and everything in it to the admin, and marks it
// as no longer Orderly's; its users' privileges in it go too. It returns how many
// sessions it ended.
func (p *Postgres) release(ctx context.Context, db database.Database, users []string) (int, error) {
	n, err := p.terminate(ctx, "terminating connections", `datname = $1 AND (usename = $2 OR usename = ANY($3))`, db.Name, db.Role, users)
	if err != nil {
		return n, err
	}
	r := ident(db.Role)
	owned := []string{r}
	var userIdents []string
	for _, u := range users {
		userIdents = append(userIdents, ident(u))
	}
	owned = append(owned, userIdents...)
	// Inside the database: REASSIGN covers its objects (and the database itself, for
	// one made by an earlier version); DROP OWNED also revokes the roles'
	// privileges. The users' go first, in a statement of their own: the default
	// privileges the role granted them are entries of the role's own, and one DROP
	// OWNED of both removes that entry twice ("could not find tuple for default ACL").
	return n, p.inside(ctx, db.Name, "releasing the retained database", func(context.Context, *pgx.Conn) ([]string, error) {
		stmts := []string{"REASSIGN OWNED BY " + strings.Join(owned, ", ") + " TO CURRENT_USER"}
		if len(userIdents) > 0 {
			stmts = append(stmts, "DROP OWNED BY "+strings.Join(userIdents, ", "))
		}
		return append(stmts,
			"DROP OWNED BY "+r,
			"COMMENT ON DATABASE "+ident(db.Name)+" IS "+literal(retainedPrefix+db.OwnerUID)), nil
	})
}

// scramVerifier returns the SCRAM-SHA-256 verifier of password, in the form
// PostgreSQL stores (and accepts in CREATE/ALTER ROLE ... PASSWORD), so that the
// password itself never reaches the server's logs or pg_stat_statements.
func scramVerifier(password string) (string, error) {
	const iterations = 4096
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", err
	}
	// Orderly's passwords are ASCII letters and digits, which SASLprep leaves as they are.
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(key []byte, msg string) []byte {
		h := hmac.New(sha256.New, key)
		h.Write([]byte(msg))
		return h.Sum(nil)
	}
	stored := sha256.Sum256(mac(salted, "Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac(salted, "Server Key"))), nil
}

// Port formats a port for connection strings.
func Port(p int32) string { return strconv.Itoa(int(p)) }
