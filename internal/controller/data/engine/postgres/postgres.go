// Package postgres is the PostgreSQL engine of the data controllers, using pgx.
package postgres

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"orderly.dev/orderly/internal/controller/data/engine"
)

// markerPrefix starts the comment that marks a database or role as Orderly's; the
// owner's UID follows.
const markerPrefix = "orderly.dev/owner-uid="

// retainedPrefix marks a database that a DevDatabase with deletionPolicy Retain
// left behind: no longer Orderly's, never dropped by it.
const retainedPrefix = "orderly.dev/retained-from="

// Marker is the comment on a database or role owned by the DevDatabase with uid.
func Marker(uid string) string { return markerPrefix + uid }

// SQLSTATE codes Orderly reacts to.
const (
	codeObjectInUse        = "55006"
	codeInvalidCatalogName = "3D000"
	codeDuplicateDatabase  = "42P04"
	codeDuplicateObject    = "42710"
)

// Connector keeps one small pool per DatabaseServer. A pool is replaced (and the old
// one closed) when the server's host, port, sslMode or admin credentials change, so
// that no connections made with old credentials linger on the server.
type Connector struct {
	mu    sync.Mutex
	pools map[string]*pool
	// closed is set by Close: no pool is made after it.
	closed bool
	// closing counts the pools being closed in the background, which Close waits for.
	closing sync.WaitGroup
	// MaxConns bounds each pool; default 8.
	MaxConns int32
}

// errClosed is returned by Connect after Close.
var errClosed = errors.New("the database connector is closed")

// pool is one server's pool and the connection string it was made with.
type pool struct {
	*pgxpool.Pool
	connString string
}

// NewConnector returns a Connector with no pools yet.
func NewConnector() *Connector { return &Connector{pools: map[string]*pool{}} }

// Close closes every pool, those replaced or forgotten before included, and returns
// once all their connections are closed (a connection in use is closed when it is
// returned). Connect fails afterwards. Closing twice is harmless.
func (c *Connector) Close() {
	c.mu.Lock()
	c.closed = true
	for _, p := range c.pools {
		c.closeLater(p)
	}
	c.pools = nil
	c.mu.Unlock()
	c.closing.Wait()
}

// Forget closes the pool of the server called name, if there is one.
func (c *Connector) Forget(name string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.pools[name]; ok {
		delete(c.pools, name)
		c.closeLater(p)
	}
}

// closeLater closes p without waiting: a pool's Close blocks until the connections
// in use are returned, and a reconcile still using the old pool must not hold up
// the caller. Called with c.mu held, so that Close, which sets closed under the same
// lock, waits for every pool closed before it.
func (c *Connector) closeLater(p *pool) { c.closing.Go(p.Close) }

// ConnString builds a libpq keyword/value connection string; values are quoted.
func ConnString(s engine.Server, database string) string {
	q := func(v string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `\'`) + "'"
	}
	sslMode := s.SSLMode
	if sslMode == "" {
		sslMode = "prefer"
	}
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s sslmode=%s connect_timeout=5 application_name=orderly",
		q(s.Host), s.Port, q(database), q(s.Username), q(s.Password), q(sslMode))
}

// Connect returns the engine for s, reusing its pool while s is unchanged.
func (c *Connector) Connect(ctx context.Context, kind string, s engine.Server) (engine.Engine, error) {
	if kind != "" && kind != "postgres" {
		return nil, fmt.Errorf("engine %q is not supported", kind)
	}
	connString := ConnString(s, "postgres")
	key := s.Name
	if key == "" {
		key = connString
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errClosed
	}
	if p, ok := c.pools[key]; ok {
		if p.connString == connString {
			return &Postgres{pool: p.Pool, server: s}, nil
		}
		delete(c.pools, key)
		c.closeLater(p)
	}
	cfg, err := pgxpool.ParseConfig(connString)
	if err != nil {
		// The error could quote the connection string, and so the password.
		return nil, errors.New("invalid connection settings for the database server")
	}
	cfg.MaxConns = c.MaxConns
	if cfg.MaxConns == 0 {
		cfg.MaxConns = 8
	}
	cfg.MaxConnIdleTime = time.Minute
	p, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: %s", engine.ErrUnreachable, safeError(err))
	}
	if c.pools == nil {
		c.pools = map[string]*pool{}
	}
	c.pools[key] = &pool{Pool: p, connString: connString}
	return &Postgres{pool: p, server: s}, nil
}

// Postgres is the engine for one PostgreSQL server.
type Postgres struct {
	pool   *pgxpool.Pool
	server engine.Server
}

var _ engine.Engine = (*Postgres)(nil)

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

// safeError describes err without anything that could carry a password.
func safeError(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return netErr.Error()
	}
	var connErr *pgconn.ConnectError
	if errors.As(err, &connErr) {
		return connErr.Error()
	}
	return err.Error()
}

// classify wraps connection-level failures in ErrUnreachable.
func classify(err error, what string) error {
	if err == nil {
		return nil
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		// Authentication and connection-exception classes mean the admin cannot work.
		if strings.HasPrefix(pgErr.Code, "28") || strings.HasPrefix(pgErr.Code, "08") || pgErr.Code == "57P03" {
			return fmt.Errorf("%w: %s: %s", engine.ErrUnreachable, what, safeError(err))
		}
		return fmt.Errorf("%s: %s", what, safeError(err))
	}
	if pgconn.SafeToRetry(err) || pgconn.Timeout(err) || errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: %s: %s", engine.ErrUnreachable, what, safeError(err))
	}
	var connErr *pgconn.ConnectError
	var netErr net.Error
	if errors.As(err, &connErr) || errors.As(err, &netErr) {
		return fmt.Errorf("%w: %s: %s", engine.ErrUnreachable, what, safeError(err))
	}
	return fmt.Errorf("%s: %s", what, safeError(err))
}

// Info reports the server's version and how many databases Orderly owns there.
func (p *Postgres) Info(ctx context.Context) (engine.Info, error) {
	var info engine.Info
	var n int64
	err := p.pool.QueryRow(ctx, `SELECT current_setting('server_version'),
		(SELECT count(*) FROM pg_database d WHERE starts_with(coalesce(shobj_description(d.oid, 'pg_database'), ''), $1))`,
		markerPrefix).Scan(&info.Version, &n)
	if err != nil {
		return info, classify(err, "querying the server")
	}
	info.OwnedDatabases = int(n)
	return info, nil
}

type roleState struct {
	exists  bool
	comment string
}

func (p *Postgres) role(ctx context.Context, name string) (roleState, error) {
	var st roleState
	var comment *string
	err := p.pool.QueryRow(ctx, `SELECT shobj_description(oid, 'pg_authid') FROM pg_roles WHERE rolname = $1`, name).Scan(&comment)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, classify(err, "looking up role")
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
	var st databaseState
	var comment *string
	err := p.pool.QueryRow(ctx, `SELECT shobj_description(d.oid, 'pg_database'), pg_get_userbyid(d.datdba)
		FROM pg_database d WHERE d.datname = $1`, name).Scan(&comment, &st.owner)
	if errors.Is(err, pgx.ErrNoRows) {
		return st, nil
	}
	if err != nil {
		return st, classify(err, "looking up database")
	}
	st.exists = true
	if comment != nil {
		st.comment = *comment
	}
	return st, nil
}

// ownsDatabase says whether the database is this owner's: marked with its UID, or
// (after a crash between CREATE DATABASE and COMMENT, which cannot share a
// transaction) unmarked and owned by the owner's marked role.
func ownsDatabase(st databaseState, role roleState, db engine.Database) bool {
	if st.comment == Marker(db.OwnerUID) {
		return true
	}
	return st.comment == "" && st.owner == db.Role && role.exists && role.comment == Marker(db.OwnerUID)
}

// Ensure creates what is missing of db's role, database, privileges and extensions.
func (p *Postgres) Ensure(ctx context.Context, db engine.Database) (engine.EnsureResult, error) {
	var res engine.EnsureResult
	role, err := p.role(ctx, db.Role)
	if err != nil {
		return res, err
	}
	switch {
	case !role.exists:
		// Role and marker in one transaction: a role with Orderly's name and no
		// marker can only be someone else's.
		tx, err := p.pool.Begin(ctx)
		if err != nil {
			return res, classify(err, "creating role")
		}
		defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
		if _, err := tx.Exec(ctx, "CREATE ROLE "+ident(db.Role)+" LOGIN PASSWORD "+literal(db.Password)); err != nil {
			return res, classify(err, "creating role")
		}
		if _, err := tx.Exec(ctx, "COMMENT ON ROLE "+ident(db.Role)+" IS "+literal(Marker(db.OwnerUID))); err != nil {
			return res, classify(err, "marking role")
		}
		if err := tx.Commit(ctx); err != nil {
			return res, classify(err, "creating role")
		}
		role = roleState{exists: true, comment: Marker(db.OwnerUID)}
	case role.comment != Marker(db.OwnerUID):
		return res, fmt.Errorf("role %s %w", db.Role, engine.ErrNotOwned)
	case db.SetPassword:
		if _, err := p.pool.Exec(ctx, "ALTER ROLE "+ident(db.Role)+" PASSWORD "+literal(db.Password)); err != nil {
			return res, classify(err, "setting the role's password")
		}
	}

	dbState, err := p.database(ctx, db.Name)
	if err != nil {
		return res, err
	}
	if dbState.exists && !ownsDatabase(dbState, role, db) {
		return res, fmt.Errorf("database %s %w", db.Name, engine.ErrNotOwned)
	}
	if !dbState.exists {
		if err := p.createDatabase(ctx, db); err != nil {
			return res, err
		}
		res.Created = true
	}
	if dbState.comment == "" {
		if _, err := p.pool.Exec(ctx, "COMMENT ON DATABASE "+ident(db.Name)+" IS "+literal(Marker(db.OwnerUID))); err != nil {
			return res, classify(err, "marking database")
		}
	}
	if res.Created || len(db.Extensions) > 0 {
		if err := p.prepareInside(ctx, db, res.Created); err != nil {
			return res, err
		}
	}
	return res, nil
}

func (p *Postgres) createDatabase(ctx context.Context, db engine.Database) error {
	stmt := "CREATE DATABASE " + ident(db.Name) + " OWNER " + ident(db.Role)
	if db.Template != "" {
		stmt += " TEMPLATE " + ident(db.Template)
	}
	_, err := p.pool.Exec(ctx, stmt)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		switch pgErr.Code {
		case codeObjectInUse:
			return fmt.Errorf("%w: %s", engine.ErrTemplateInUse, pgErr.Message)
		case codeInvalidCatalogName:
			return fmt.Errorf("%w: %s", engine.ErrTemplateMissing, pgErr.Message)
		case codeDuplicateDatabase:
			// Created meanwhile by another reconcile of the same DevDatabase.
			err = nil
		}
	}
	if err != nil {
		return classify(err, "creating database")
	}
	// Nobody but the owner (and superusers) may connect or make temporary tables.
	if _, err := p.pool.Exec(ctx, "REVOKE ALL ON DATABASE "+ident(db.Name)+" FROM PUBLIC"); err != nil {
		return classify(err, "revoking public access")
	}
	return nil
}

// prepareInside connects to the new database as the admin: grants the role what a
// cloned template's objects need, and creates extensions.
func (p *Postgres) prepareInside(ctx context.Context, db engine.Database, created bool) error {
	cfg, err := pgx.ParseConfig(ConnString(p.server, db.Name))
	if err != nil {
		return errors.New("invalid connection settings for the database server")
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return classify(err, "connecting to the new database")
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	if created && db.Template != "" {
		// Objects cloned from the template keep the template's owners; give the role
		// full use of every table, sequence and schema in its own database.
		rows, err := conn.Query(ctx, `SELECT nspname FROM pg_namespace
			WHERE nspname NOT LIKE 'pg\_%' AND nspname <> 'information_schema'`)
		if err != nil {
			return classify(err, "listing schemas")
		}
		schemas, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return classify(err, "listing schemas")
		}
		r := ident(db.Role)
		for _, s := range schemas {
			n := ident(s)
			for _, stmt := range []string{
				"GRANT USAGE, CREATE ON SCHEMA " + n + " TO " + r,
				"GRANT ALL ON ALL TABLES IN SCHEMA " + n + " TO " + r,
				"GRANT ALL ON ALL SEQUENCES IN SCHEMA " + n + " TO " + r,
				"GRANT ALL ON ALL FUNCTIONS IN SCHEMA " + n + " TO " + r,
			} {
				if _, err := conn.Exec(ctx, stmt); err != nil {
					return classify(err, "granting privileges on the cloned objects")
				}
			}
		}
	}
	for _, ext := range db.Extensions {
		if _, err := conn.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS "+ident(ext)); err != nil {
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code != codeDuplicateObject {
				return fmt.Errorf("%w: %s: %s", engine.ErrExtension, ext, pgErr.Message)
			}
			if !errors.As(err, &pgErr) {
				return classify(err, "creating extension "+ext)
			}
		}
	}
	return nil
}

// Drop terminates connections, then drops db and its role, or with retain hands the
// database to the admin and drops only the role. What is not marked as this
// DevDatabase's is never dropped or altered.
func (p *Postgres) Drop(ctx context.Context, db engine.Database, retain bool) error {
	role, err := p.role(ctx, db.Role)
	if err != nil {
		return err
	}
	if role.exists && role.comment != Marker(db.OwnerUID) {
		return fmt.Errorf("role %s %w", db.Role, engine.ErrNotOwned)
	}
	dbState, err := p.database(ctx, db.Name)
	if err != nil {
		return err
	}
	if dbState.exists && !strings.HasPrefix(dbState.comment, retainedPrefix) {
		if !ownsDatabase(dbState, role, db) {
			return fmt.Errorf("database %s %w", db.Name, engine.ErrNotOwned)
		}
		if retain {
			if err := p.release(ctx, db); err != nil {
				return err
			}
		} else {
			if _, err := p.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()`, db.Name); err != nil {
				return classify(err, "terminating connections")
			}
			if _, err := p.pool.Exec(ctx, "DROP DATABASE IF EXISTS "+ident(db.Name)+" WITH (FORCE)"); err != nil {
				return classify(err, "dropping database")
			}
		}
	}
	if role.exists {
		if _, err := p.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1`, db.Role); err != nil {
			return classify(err, "terminating the role's connections")
		}
		if _, err := p.pool.Exec(ctx, "DROP ROLE IF EXISTS "+ident(db.Role)); err != nil {
			return classify(err, "dropping role")
		}
	}
	return nil
}

// release hands a retained database and everything in it to the admin, and marks it
// as no longer Orderly's.
func (p *Postgres) release(ctx context.Context, db engine.Database) error {
	if _, err := p.pool.Exec(ctx, `SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1 AND usename = $2`, db.Name, db.Role); err != nil {
		return classify(err, "terminating connections")
	}
	cfg, err := pgx.ParseConfig(ConnString(p.server, db.Name))
	if err != nil {
		return errors.New("invalid connection settings for the database server")
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return classify(err, "connecting to the retained database")
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	// Run inside the database: REASSIGN covers its objects and the database itself,
	// the only shared object the role owns.
	for _, stmt := range []string{
		"REASSIGN OWNED BY " + ident(db.Role) + " TO CURRENT_USER",
		"DROP OWNED BY " + ident(db.Role),
		"COMMENT ON DATABASE " + ident(db.Name) + " IS " + literal(retainedPrefix+db.OwnerUID),
	} {
		if _, err := conn.Exec(ctx, stmt); err != nil {
			return classify(err, "releasing the retained database")
		}
	}
	return nil
}

// Port formats a port for connection strings.
func Port(p int32) string { return strconv.Itoa(int(p)) }
