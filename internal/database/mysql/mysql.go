// Package mysql is the MySQL / MariaDB engine of the data controllers, using
// github.com/go-sql-driver/mysql.
//
// MySQL has no owner of a database and no comment on a user, so what Orderly trusts
// lives where no DevDatabase's user can write:
//
//   - Each user is granted ALL PRIVILEGES on its own database only (no global
//     privilege, no GRANT OPTION), with the database's name escaped in the grant: in
//     GRANT ... ON `db`.* an unescaped _ is a wildcard, and orderly_abc would also
//     match orderlyXabc.
//   - Ownership is recorded in the table orderly.owners, in the admin's schema
//     orderly, which no DevDatabase user may read or write: a database or user with
//     Orderly's name and no record (or another owner's) is never altered or dropped.
//     A database's record says "creating" from before CREATE DATABASE until its user
//     is granted it, so a database left half-made by a crash is known to be Orderly's
//     and is made again.
//   - The server's identity is MySQL's @@server_uuid, or on MariaDB (which has none)
//     a UUID recorded in orderly.server on first use.
//   - Every admin session has lock_wait_timeout and innodb_lock_wait_timeout (and,
//     on MariaDB, max_statement_time) set when it is opened, and every call has a
//     deadline in Orderly, so a hung server or a lock held elsewhere never holds a
//     worker for long. The session's sql_mode is fixed too, so that the quoting of
//     literals (backslashes) means what Orderly intends whatever the server's default.
//   - On MariaDB passwords are sent only as their mysql_native_password hash
//     (IDENTIFIED BY PASSWORD '*...'), never in clear. MySQL 8 takes no hash for its
//     default plugin (caching_sha2_password): there the password is sent in the
//     statement over the admin's connection, and MySQL rewrites it out of its logs.
//   - MySQL has no VALID UNTIL: PASSWORD EXPIRE counts whole days from the last
//     change and lets the user set a new password itself. The expiry is Orderly's
//     drop, which locks the account (ACCOUNT LOCK) before killing its connections.
//   - Extra users (spec.users) are recorded and granted on the database only
//     (users.go); the init SQL runs as the database's own user (init.go).
package mysql

import (
	"context"
	"crypto/sha1" //nolint:gosec // mysql_native_password is SHA-1 by definition.
	"crypto/tls"
	"crypto/x509"
	"database/sql"
	"database/sql/driver"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	gomysql "github.com/go-sql-driver/mysql"

	"orderly.dev/orderly/internal/database"
)

// Kind is the DatabaseServer spec.engine this package serves.
const Kind = "mysql"

// Schema is the admin-only schema on each server where Orderly records what it owns
// (table owners) and, on MariaDB, the server's identity (table server).
const Schema = "orderly"

// Record states of a database in orderly.owners.
const (
	stateCreating = "creating"
	stateReady    = "ready"
	stateRetained = "retained"
)

// Record kinds in orderly.owners.
const (
	kindDatabase = "database"
	kindUser     = "user"
)

// MySQL and MariaDB error numbers Orderly reacts to.
const (
	errDBCreateExists     = 1007
	errAccessDenied       = 1045
	errUnknownThread      = 1094
	errLockWaitTimeout    = 1205
	errDupEntry           = 1062
	errHostNotPrivileged  = 1130
	errTooManyConnections = 1040
	errUserLimitReached   = 1226
	errQueryInterrupted   = 1317
	errUnknownSystemVar   = 1193
	errStatementTimeout   = 1969 // MariaDB: max_statement_time exceeded
	errExecutionTimeout   = 3024 // MySQL: max_execution_time exceeded
	errAccountLocked      = 3118
	errMustChangePassword = 1862
)

// Connector keeps one small pool per DatabaseServer (database.Pools: replaced when
// the server's settings change, closed by Forget and Close). Its Timeouts and Limits
// are database.Pools'.
type Connector struct {
	database.Pools[*pool]
}

// pool is one server's connections, and whether Orderly's schema is there.
type pool struct {
	db *sql.DB
	// prepared is set once the schema orderly exists on the server.
	prepared bool
	mu       sync.Mutex
}

// Close closes the pool without waiting for the queries in flight.
func (p *pool) Close() { _ = p.db.Close() }

// NewConnector returns a Connector with no pools yet.
func NewConnector() *Connector { return &Connector{} }

// Connect returns the engine for s, reusing its pool while s is unchanged.
func (c *Connector) Connect(_ context.Context, kind string, s database.Server) (database.Engine, error) {
	if kind != Kind {
		return nil, fmt.Errorf("%w: the mysql connector was asked for engine %q", database.ErrEngineUnsupported, kind)
	}
	p, t, err := c.Get(s, func(t database.Timeouts, l database.Limits) (*pool, error) {
		db, err := open(s, session{timeouts: t, statement: t.Statement})
		if err != nil {
			return nil, err
		}
		db.SetMaxOpenConns(l.MaxConns)
		db.SetMaxIdleConns(l.MaxConns)
		db.SetConnMaxIdleTime(l.MaxIdle)
		return &pool{db: db}, nil
	})
	if err != nil {
		return nil, err
	}
	return &MySQL{pool: p, server: s, timeouts: t}, nil
}

// session says how the connections Orderly makes are set up, beyond what every
// connection gets (config: TLS as the server's sslMode says, verified against its
// CA; the connect timeout; no cleartext password; lock timeouts and, on MariaDB,
// max_statement_time, set when each is opened). The pools, the clone's session and
// the init SQL's are all made by open.
type session struct {
	// dbname is the database to connect to; none when empty.
	dbname   string
	timeouts database.Timeouts
	// statement is max_statement_time on MariaDB.
	statement time.Duration
	// tenant: a session for the tenant's SQL (spec.init), which keeps the server's
	// sql_mode and time zone, as the tenant's own sessions have them, and may send
	// several statements in one query.
	tenant bool
}

// open makes a pool (it connects lazily) of connections to s set up as sess says.
func open(s database.Server, sess session) (*sql.DB, error) {
	cfg, err := config(s, sess.dbname, sess.timeouts)
	if err != nil {
		return nil, err
	}
	if sess.tenant {
		cfg.MultiStatements = true
	}
	inner, err := gomysql.NewConnector(cfg)
	if err != nil {
		// The error could quote the settings, and so the password.
		return nil, errors.New("invalid connection settings for the database server")
	}
	return sql.OpenDB(&tuned{Connector: inner, timeouts: sess.timeouts, statement: sess.statement, tenant: sess.tenant}), nil
}

// config is the driver's configuration of a connection to s, logged in as
// s.Username: TLS as EffectiveSSLMode says, t.Connect to connect, no cleartext
// password to a server that asks for one, no local file for LOAD DATA LOCAL INFILE,
// and no driver logging.
func config(s database.Server, dbname string, t database.Timeouts) (*gomysql.Config, error) {
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd = s.Username, s.Password
	cfg.Net, cfg.Addr, cfg.DBName = "tcp", net.JoinHostPort(s.Host, strconv.Itoa(int(s.Port))), dbname
	cfg.Timeout = t.WithDefaults().Connect
	cfg.Logger = &gomysql.NopLogger{}
	cfg.AllowCleartextPasswords = false
	cfg.AllowAllFiles = false
	cfg.ConnectionAttributes = "program_name:orderly"
	tc, fallback, err := tlsConfig(s)
	if err != nil {
		return nil, err
	}
	cfg.TLS, cfg.AllowFallbackToPlaintext = tc, fallback
	return cfg, nil
}

// tlsConfig maps libpq's sslmode onto the driver's TLS: disable none; allow and
// prefer TLS when offered, unchecked, else plaintext; require TLS, unchecked;
// verify-ca the certificate's chain; verify-full also the host name. The CA, when
// given, is the only root trusted.
func tlsConfig(s database.Server) (*tls.Config, bool, error) {
	roots, err := database.RootCAs(s.CACert)
	if err != nil {
		return nil, false, err
	}
	switch s.EffectiveSSLMode() {
	case "disable":
		return nil, false, nil
	case "allow", "prefer":
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, true, nil //nolint:gosec // prefer checks nothing, as libpq's; TLSVerified says so.
	case "require":
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, false, nil //nolint:gosec // as libpq's require; TLSVerified says so.
	case "verify-ca":
		// The chain is checked, the host name is not (libpq's verify-ca).
		return &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12, //nolint:gosec // VerifyConnection checks the chain.
			VerifyConnection: func(cs tls.ConnectionState) error {
				if len(cs.PeerCertificates) == 0 {
					return errors.New("the server sent no certificate")
				}
				inter := x509.NewCertPool()
				for _, c := range cs.PeerCertificates[1:] {
					inter.AddCert(c)
				}
				_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter})
				return err
			}}, false, nil
	}
	return &tls.Config{RootCAs: roots, ServerName: s.Host, MinVersion: tls.VersionTLS12}, false, nil
}

// tuned opens the driver's connections and gives each its safe session: fixed
// sql_mode and time zone, lock timeouts, and on MariaDB max_statement_time.
type tuned struct {
	driver.Connector
	timeouts  database.Timeouts
	statement time.Duration
	// tenant: a session for the tenant's SQL (spec.init), which keeps the server's
	// sql_mode and time zone, as the tenant's own sessions have them; only the
	// timeouts are set.
	tenant bool
}

func (c *tuned) Connect(ctx context.Context) (driver.Conn, error) {
	conn, err := c.Connector.Connect(ctx)
	if err != nil {
		return nil, err
	}
	if err := tune(ctx, conn, c.timeouts, c.statement, c.tenant); err != nil {
		_ = conn.Close()
		return nil, err
	}
	return conn, nil
}

// seconds is d in whole seconds, at least 1.
func seconds(d time.Duration) int64 { return max(1, int64((d+time.Second-1)/time.Second)) }

func tune(ctx context.Context, conn driver.Conn, t database.Timeouts, statement time.Duration, tenant bool) error {
	q, ok1 := conn.(driver.QueryerContext)
	x, ok2 := conn.(driver.ExecerContext)
	if !ok1 || !ok2 {
		return errors.New("the MySQL driver's connection cannot run statements")
	}
	rows, err := q.QueryContext(ctx, "SELECT VERSION()", nil)
	if err != nil {
		return err
	}
	v := make([]driver.Value, 1)
	err = rows.Next(v)
	_ = rows.Close()
	if err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	version := fmt.Sprint(asString(v[0]))
	set := fmt.Sprintf("SET SESSION lock_wait_timeout = %d, innodb_lock_wait_timeout = %d", seconds(t.Lock), seconds(t.Lock))
	if !tenant {
		set += ", sql_mode = 'NO_ENGINE_SUBSTITUTION,NO_AUTO_VALUE_ON_ZERO', time_zone = '+00:00'"
	}
	if isMariaDB(version) {
		set += fmt.Sprintf(", max_statement_time = %.3f", statement.Seconds())
	}
	_, err = x.ExecContext(ctx, set, nil)
	return err
}

func asString(v driver.Value) string {
	switch v := v.(type) {
	case []byte:
		return string(v)
	case string:
		return v
	}
	return fmt.Sprint(v)
}

func isMariaDB(version string) bool { return strings.Contains(strings.ToLower(version), "mariadb") }

// MySQL is the engine for one MySQL or MariaDB server.
type MySQL struct {
	pool     *pool
	server   database.Server
	timeouts database.Timeouts
}

var _ database.Engine = (*MySQL)(nil)

func (m *MySQL) exec(ctx context.Context, what, stmt string, args ...any) error {
	ctx, cancel := m.timeouts.Deadline(ctx, 1)
	defer cancel()
	_, err := m.pool.db.ExecContext(ctx, stmt, args...)
	return m.classify(err, what)
}

func (m *MySQL) queryRow(ctx context.Context, what, q string, args []any, dest ...any) error {
	ctx, cancel := m.timeouts.Deadline(ctx, 1)
	defer cancel()
	return m.classify(m.pool.db.QueryRowContext(ctx, q, args...).Scan(dest...), what)
}

func (m *MySQL) classify(err error, what string) error {
	return classify(err, what, m.timeouts, database.ScrubberFor(m.server))
}

// loginRefused are the errors of a login the server refused: their messages name
// the admin user.
func loginRefused(n uint16) bool {
	return n == errAccessDenied || n == errHostNotPrivileged || n == errAccountLocked || n == errMustChangePassword
}

// describe says what went wrong in the driver's errors it knows, for
// database.Scrubber.Describe: a refused login by its error number alone (its message
// names the user), other server errors by their message and number, a broken
// connection as such. Other errors are "".
func describe(err error) string {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		if loginRefused(myErr.Number) {
			return fmt.Sprintf("the server refused the admin's login (error %d)", myErr.Number)
		}
		return fmt.Sprintf("%s (error %d)", myErr.Message, myErr.Number)
	}
	var netErr net.Error
	if !errors.As(err, &netErr) && !errors.Is(err, context.DeadlineExceeded) &&
		(errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn)) {
		return "the connection to the server broke"
	}
	return ""
}

// classify wraps connection-level failures in ErrUnreachable and the server's own
// timeouts in ErrTimeout, in a message without the admin's credentials that still
// unwraps to the driver's error, so that callers can react to the server's error
// number.
func classify(err error, what string, t database.Timeouts, sc database.Scrubber) error {
	if err == nil || errors.Is(err, sql.ErrNoRows) || database.IsSafe(err) {
		return err
	}
	wrap := func(class error, format string, args ...any) error {
		return database.SafeError(fmt.Sprintf(format, args...), class, err)
	}
	safe := func() string { return sc.Describe(err, describe) }
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch n := myErr.Number; {
		case loginRefused(n) || n == errTooManyConnections || n == errUserLimitReached:
			return wrap(database.ErrUnreachable, "%v: %s: %s", database.ErrUnreachable, what, safe())
		case n == errLockWaitTimeout:
			return wrap(database.ErrTimeout, "%v: %s: another session holds a lock it needs (waited %s): %s", database.ErrTimeout, what, t.Lock, safe())
		case n == errStatementTimeout || n == errExecutionTimeout || n == errQueryInterrupted:
			return wrap(database.ErrTimeout, "%v: %s: %s", database.ErrTimeout, what, safe())
		}
		return wrap(nil, "%s: %s", what, safe())
	}
	if errors.Is(err, context.DeadlineExceeded) || database.IsTimeout(err) {
		return wrap(database.ErrUnreachable, "%v: %s: the server did not answer in time", database.ErrUnreachable, what)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return wrap(database.ErrUnreachable, "%v: %s: %s", database.ErrUnreachable, what, safe())
	}
	return wrap(nil, "%s: %s", what, safe())
}

func errNumber(err error) uint16 {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		return myErr.Number
	}
	return 0
}

// prepare creates the schema orderly and its tables once per pool (and again
// after a failure). The identity row is made with the server's own UUID().
func (m *MySQL) prepare(ctx context.Context) error {
	m.pool.mu.Lock()
	defer m.pool.mu.Unlock()
	if m.pool.prepared {
		return nil
	}
	s := Ident(Schema)
	for _, stmt := range []string{
		"CREATE DATABASE IF NOT EXISTS " + s + " CHARACTER SET ascii COLLATE ascii_bin",
		"CREATE TABLE IF NOT EXISTS " + s + ".owners (kind VARCHAR(16) NOT NULL, name VARCHAR(80) NOT NULL, owner_uid VARCHAR(64) NOT NULL, " +
			"state VARCHAR(16) NOT NULL, changed_at TIMESTAMP NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP, " +
			"PRIMARY KEY (kind, name)) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS " + s + ".server (id TINYINT NOT NULL PRIMARY KEY, uuid VARCHAR(64) NOT NULL) ENGINE=InnoDB",
		"INSERT IGNORE INTO " + s + ".server (id, uuid) VALUES (1, UUID())",
	} {
		if err := m.exec(ctx, "preparing Orderly's schema "+Schema, stmt); err != nil {
			return err
		}
	}
	m.pool.prepared = true
	return nil
}

// identity is @@server_uuid, or on MariaDB the UUID recorded in orderly.server.
func (m *MySQL) identity(ctx context.Context) (string, error) {
	var id string
	err := m.queryRow(ctx, "reading the server's identity", "SELECT @@server_uuid", nil, &id)
	if errNumber(err) == errUnknownSystemVar {
		err = m.queryRow(ctx, "reading the server's identity", "SELECT uuid FROM "+Ident(Schema)+".server WHERE id = 1", nil, &id)
	}
	return id, err
}

// Info reports the server's version, identity and how many databases Orderly owns there.
func (m *MySQL) Info(ctx context.Context) (database.Info, error) {
	var info database.Info
	if err := m.queryRow(ctx, "querying the server", "SELECT VERSION()", nil, &info.Version); err != nil {
		return info, err
	}
	if err := m.prepare(ctx); err != nil {
		return info, err
	}
	qctx, cancel := m.timeouts.Deadline(ctx, 2)
	defer cancel()
	owned, err := m.names(qctx, "SELECT name FROM "+Ident(Schema)+".owners WHERE kind = ? AND state <> ?", kindDatabase, stateRetained)
	if err != nil {
		return info, err
	}
	existing, err := m.names(qctx, "SELECT SCHEMA_NAME FROM information_schema.SCHEMATA")
	if err != nil {
		return info, err
	}
	exists := map[string]bool{}
	for _, n := range existing {
		exists[n] = true
	}
	for _, n := range owned {
		if exists[n] {
			info.OwnedDatabases++
		}
	}
	info.SystemIdentifier, err = m.identity(ctx)
	return info, err
}

// Owned lists the databases and users named prefix... that Orderly's records give
// to a DevDatabase (a database being created included, a retained one not).
func (m *MySQL) Owned(ctx context.Context, prefix string) (database.Owned, error) {
	var owned database.Owned
	if err := m.prepare(ctx); err != nil {
		return owned, err
	}
	qctx, cancel := m.timeouts.Deadline(ctx, 2)
	defer cancel()
	q := "SELECT name FROM " + Ident(Schema) + ".owners WHERE kind = ? AND LEFT(name, CHAR_LENGTH(?)) = ? AND state <> ? ORDER BY name"
	var err error
	if owned.Databases, err = m.names(qctx, q, kindDatabase, prefix, prefix, stateRetained); err != nil {
		return owned, err
	}
	owned.Roles, err = m.names(qctx, q, kindUser, prefix, prefix, stateRetained)
	return owned, err
}

func (m *MySQL) names(ctx context.Context, q string, args ...any) ([]string, error) {
	rows, err := m.pool.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, m.classify(err, "listing databases")
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			return nil, m.classify(err, "listing databases")
		}
		out = append(out, n)
	}
	return out, m.classify(rows.Err(), "listing databases")
}

// record is a row of orderly.owners.
type record struct {
	exists bool
	owner  string
	state  string
}

func (m *MySQL) record(ctx context.Context, kind, name string) (record, error) {
	var r record
	err := m.queryRow(ctx, "reading Orderly's records", "SELECT owner_uid, state FROM "+Ident(Schema)+".owners WHERE kind = ? AND name = ?",
		[]any{kind, name}, &r.owner, &r.state)
	if errors.Is(err, sql.ErrNoRows) {
		return record{}, nil
	}
	r.exists = err == nil
	return r, err
}

// claim records name as uid's, unless a record is there already; it returns the
// record as it stands.
func (m *MySQL) claim(ctx context.Context, kind, name, uid, state string) (record, error) {
	err := m.exec(ctx, "recording ownership", "INSERT INTO "+Ident(Schema)+".owners (kind, name, owner_uid, state) VALUES (?, ?, ?, ?)", kind, name, uid, state)
	if err != nil && errNumber(err) != errDupEntry {
		return record{}, err
	}
	return m.record(ctx, kind, name)
}

func (m *MySQL) setState(ctx context.Context, name, uid, state string) error {
	return m.setRecordState(ctx, kindDatabase, name, uid, state)
}

func (m *MySQL) setRecordState(ctx context.Context, kind, name, uid, state string) error {
	return m.exec(ctx, "recording the "+kind+"'s state", "UPDATE "+Ident(Schema)+".owners SET state = ? WHERE kind = ? AND name = ? AND owner_uid = ?",
		state, kind, name, uid)
}

func (m *MySQL) forget(ctx context.Context, kind, name, uid string) error {
	return m.exec(ctx, "removing Orderly's record", "DELETE FROM "+Ident(Schema)+".owners WHERE kind = ? AND name = ? AND owner_uid = ?", kind, name, uid)
}

func (m *MySQL) count(ctx context.Context, what, q string, args ...any) (bool, error) {
	var n int
	err := m.queryRow(ctx, what, q, args, &n)
	return n > 0, err
}

func (m *MySQL) userExists(ctx context.Context, user string) (bool, error) {
	return m.count(ctx, "looking up user", "SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'", user)
}

func (m *MySQL) databaseExists(ctx context.Context, name string) (bool, error) {
	return m.count(ctx, "looking up database", "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name)
}

// state is what Orderly knows about a DevDatabase's user and database.
type state struct {
	user, db             record
	userExists, dbExists bool
}

func (m *MySQL) observe(ctx context.Context, db database.Database) (state, error) {
	var st state
	var err error
	if st.user, err = m.record(ctx, kindUser, db.Role); err != nil {
		return st, err
	}
	if st.db, err = m.record(ctx, kindDatabase, db.Name); err != nil {
		return st, err
	}
	if st.userExists, err = m.userExists(ctx, db.Role); err != nil {
		return st, err
	}
	st.dbExists, err = m.databaseExists(ctx, db.Name)
	return st, err
}

// validNames refuses names Orderly would not make: the engine quotes everything,
// but a name outside its form means a caller's mistake.
var validName = regexp.MustCompile(`^[a-z0-9_]+$`)

func checkNames(db database.Database) error {
	if !validName.MatchString(db.Name) || len(db.Name) > 64 {
		return fmt.Errorf("database name %q is not one Orderly makes for MySQL (a-z, 0-9, _, at most 64 characters)", db.Name)
	}
	if !validName.MatchString(db.Role) || len(db.Role) > database.MySQLUserMax {
		return fmt.Errorf("user name %q is not one Orderly makes for MySQL (a-z, 0-9, _, at most %d characters)", db.Role, database.MySQLUserMax)
	}
	for _, u := range db.Users {
		if !validName.MatchString(u.Role) || len(u.Role) > database.MySQLUserMax || !strings.HasPrefix(u.Role, database.MySQLUserPrefix) {
			return fmt.Errorf("user name %q is not one Orderly makes for MySQL (%s, then a-z, 0-9, _, at most %d characters)", u.Role, database.MySQLUserPrefix, database.MySQLUserMax)
		}
		switch u.Access {
		case database.ReadOnly, database.ReadWrite:
		default:
			return fmt.Errorf("user %s: access %q is neither ReadOnly nor ReadWrite", u.Name, u.Access)
		}
	}
	return nil
}

// Ensure creates what is missing of db's user and database and grants the user
// its database. It refuses (ErrNotOwned) a user or database with Orderly's name
// that Orderly's records do not give to db's owner.
func (m *MySQL) Ensure(ctx context.Context, db database.Database) (database.EnsureResult, error) {
	var res database.EnsureResult
	if err := checkNames(db); err != nil {
		return res, err
	}
	if len(db.Extensions) > 0 {
		return res, fmt.Errorf("%w: %s: MySQL and MariaDB have no extensions", database.ErrExtension, strings.Join(db.Extensions, ", "))
	}
	if err := m.prepare(ctx); err != nil {
		return res, err
	}
	id, err := m.identity(ctx)
	if err != nil {
		return res, err
	}
	res.ServerID = id
	if err := database.SameServer(db.ServerID, id); err != nil {
		return res, err
	}
	st, err := m.observe(ctx, db)
	if err != nil {
		return res, err
	}
	if err := owned(st, db); err != nil {
		return res, err
	}

	// The user: recorded first, so that a user with Orderly's name and no record is
	// known to be someone else's.
	if !st.user.exists {
		if st.user, err = m.claim(ctx, kindUser, db.Role, db.OwnerUID, stateReady); err != nil {
			return res, err
		}
		if st.user.owner != db.OwnerUID {
			return res, fmt.Errorf("user %s %w", db.Role, database.ErrNotOwned)
		}
	}
	u := userSpec(db.Role)
	if !st.userExists || db.SetPassword {
		// The password's form depends on the server (a hash on MariaDB).
		flavor, err := m.flavor(ctx)
		if err != nil {
			return res, err
		}
		stmt, what := "CREATE USER ", "creating user"
		if st.userExists {
			stmt, what = "ALTER USER ", "setting the user's password"
		}
		if err := m.exec(ctx, what, stmt+u+" "+identifiedBy(flavor, db.Password)); err != nil {
			return res, err
		}
	}

	// The database: recorded as being created before it is, ready once granted.
	if !st.db.exists {
		if st.db, err = m.claim(ctx, kindDatabase, db.Name, db.OwnerUID, stateCreating); err != nil {
			return res, err
		}
		if st.db.owner != db.OwnerUID {
			return res, fmt.Errorf("database %s %w", db.Name, database.ErrNotOwned)
		}
	}
	if st.db.state == stateRetained {
		return res, fmt.Errorf("database %s %w: it was retained and handed to the admin", db.Name, database.ErrNotOwned)
	}
	if st.dbExists && st.db.state == stateCreating {
		// Made by Orderly and left unfinished (no user was granted it yet, so it
		// holds nothing of anyone's): made again from the start.
		if err := m.exec(ctx, "dropping an unfinished database", "DROP DATABASE IF EXISTS "+Ident(db.Name)); err != nil {
			return res, err
		}
		st.dbExists = false
	}
	if !st.dbExists {
		if st.db.state != stateCreating {
			if err := m.setState(ctx, db.Name, db.OwnerUID, stateCreating); err != nil {
				return res, err
			}
			st.db.state = stateCreating
		}
		if err := m.createDatabase(ctx, db); err != nil {
			return res, err
		}
		res.Created = true
	}
	if st.db.state != stateReady {
		if err := m.exec(ctx, "granting the user its database", "GRANT ALL PRIVILEGES ON "+GrantTarget(db.Name)+".* TO "+u); err != nil {
			return res, err
		}
		if err := m.setState(ctx, db.Name, db.OwnerUID, stateReady); err != nil {
			return res, err
		}
	}
	res.UsersDropped, err = m.ensureUsers(ctx, db)
	return res, err
}

// owned refuses a user or database with db's names that is not db's: one that
// exists unrecorded, or recorded for another owner.
func owned(st state, db database.Database) error {
	switch {
	case st.user.exists && st.user.owner != db.OwnerUID, !st.user.exists && st.userExists:
		return fmt.Errorf("user %s %w", db.Role, database.ErrNotOwned)
	case st.db.exists && st.db.owner != db.OwnerUID, !st.db.exists && st.dbExists:
		return fmt.Errorf("database %s %w", db.Name, database.ErrNotOwned)
	}
	return nil
}

// flavor is the server's VERSION().
func (m *MySQL) flavor(ctx context.Context) (string, error) {
	var v string
	err := m.queryRow(ctx, "querying the server", "SELECT VERSION()", nil, &v)
	return v, err
}

// createDatabase creates db, empty or with a copy of its template's tables.
func (m *MySQL) createDatabase(ctx context.Context, db database.Database) error {
	if db.Template != "" {
		ok, err := m.databaseExists(ctx, db.Template)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("%w: %s", database.ErrTemplateMissing, db.Template)
		}
	}
	err := m.exec(ctx, "creating database", "CREATE DATABASE "+Ident(db.Name)+" CHARACTER SET utf8mb4")
	if err != nil && errNumber(err) != errDBCreateExists {
		return err
	}
	if db.Template == "" {
		return nil
	}
	return m.clone(ctx, db.Template, db.Name)
}

// clone copies the tables of template into target (created empty): their
// definitions with CREATE TABLE ... LIKE (columns, indexes, not foreign keys) and
// their rows, in one transaction, on a session of its own whose
// max_statement_time is the Clone timeout.
func (m *MySQL) clone(ctx context.Context, template, target string) error {
	ctx, cancel := context.WithTimeout(ctx, m.timeouts.Clone+m.timeouts.Grace)
	defer cancel()
	sdb, err := open(m.server, session{timeouts: m.timeouts, statement: m.timeouts.Clone})
	if err != nil {
		return err
	}
	defer func() { _ = sdb.Close() }()
	sdb.SetMaxOpenConns(1)
	conn, err := sdb.Conn(ctx)
	if err != nil {
		return m.classify(err, "connecting to copy the template")
	}
	defer func() { _ = conn.Close() }()
	tables, err := queryStrings(ctx, conn, "SELECT TABLE_NAME FROM information_schema.TABLES WHERE TABLE_SCHEMA = ? AND TABLE_TYPE = 'BASE TABLE' ORDER BY TABLE_NAME", template)
	if err != nil {
		return m.classify(err, "listing the template's tables")
	}
	var inserts []string
	for _, t := range tables {
		if _, err := conn.ExecContext(ctx, "CREATE TABLE "+Ident(target)+"."+Ident(t)+" LIKE "+Ident(template)+"."+Ident(t)); err != nil {
			return m.classify(err, "copying table "+t+" of the template")
		}
		// Generated columns are computed again, not copied.
		cols, err := queryStrings(ctx, conn, "SELECT COLUMN_NAME FROM information_schema.COLUMNS WHERE TABLE_SCHEMA = ? AND TABLE_NAME = ? AND EXTRA NOT LIKE '%GENERATED%' ORDER BY ORDINAL_POSITION", template, t)
		if err != nil {
			return m.classify(err, "listing the columns of the template's table "+t)
		}
		list := make([]string, len(cols))
		for i, c := range cols {
			list[i] = Ident(c)
		}
		l := strings.Join(list, ", ")
		inserts = append(inserts, "INSERT INTO "+Ident(target)+"."+Ident(t)+" ("+l+") SELECT "+l+" FROM "+Ident(template)+"."+Ident(t))
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return m.classify(err, "copying the template's rows")
	}
	for _, ins := range inserts {
		if _, err := tx.ExecContext(ctx, ins); err != nil {
			_ = tx.Rollback()
			return m.classify(err, "copying the template's rows")
		}
	}
	return m.classify(tx.Commit(), "copying the template's rows")
}

func queryStrings(ctx context.Context, conn *sql.Conn, q string, args ...any) ([]string, error) {
	rows, err := conn.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, err
	}
	defer func() { _ = rows.Close() }()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Drop locks db's user and kills its connections, then drops db (killing every
// connection to it) and the user. With retain the database is kept, recorded as
// retained and never dropped by Orderly afterwards; only the user goes. What is not
// Orderly's is never dropped, and nothing is done on another server.
func (m *MySQL) Drop(ctx context.Context, db database.Database, retain bool) (database.DropResult, error) {
	var res database.DropResult
	if err := checkNames(db); err != nil {
		return res, err
	}
	if err := m.prepare(ctx); err != nil {
		return res, err
	}
	id, err := m.identity(ctx)
	if err != nil {
		return res, err
	}
	if err := database.SameServer(db.ServerID, id); err != nil {
		return res, err
	}
	st, err := m.observe(ctx, db)
	if err != nil {
		return res, err
	}
	if err := owned(st, db); err != nil {
		return res, err
	}
	n, err := m.dropUsers(ctx, db, nil)
	res.Terminated += n
	if err != nil {
		return res, err
	}
	u := userSpec(db.Role)
	if st.userExists {
		// Locked first, so that it cannot log in again between the kill and the drop.
		if err := m.exec(ctx, "locking the user", "ALTER USER "+u+" ACCOUNT LOCK"); err != nil {
			return res, err
		}
		n, err := m.kill(ctx, "USER = ?", db.Role)
		res.Terminated += n
		if err != nil {
			return res, err
		}
	}
	switch {
	case !st.db.exists:
	case st.db.state == stateRetained:
	case retain && st.dbExists:
		if err := m.setState(ctx, db.Name, db.OwnerUID, stateRetained); err != nil {
			return res, err
		}
	default:
		if st.dbExists {
			n, err := m.kill(ctx, "DB = ?", db.Name)
			res.Terminated += n
			if err != nil {
				return res, err
			}
			if err := m.exec(ctx, "dropping database", "DROP DATABASE IF EXISTS "+Ident(db.Name)); err != nil {
				return res, err
			}
		}
		if err := m.forget(ctx, kindDatabase, db.Name, db.OwnerUID); err != nil {
			return res, err
		}
	}
	if st.userExists {
		if err := m.exec(ctx, "dropping user", "DROP USER IF EXISTS "+u); err != nil {
			return res, err
		}
	}
	if st.user.exists {
		return res, m.forget(ctx, kindUser, db.Role, db.OwnerUID)
	}
	return res, nil
}

// kill ends the sessions that where (USER = ? or DB = ?) selects, except Orderly's
// own, and counts those it ended.
func (m *MySQL) kill(ctx context.Context, where string, arg string) (int, error) {
	qctx, cancel := m.timeouts.Deadline(ctx, 1)
	defer cancel()
	rows, err := m.pool.db.QueryContext(qctx, "SELECT ID FROM information_schema.PROCESSLIST WHERE "+where+" AND ID <> CONNECTION_ID()", arg)
	if err != nil {
		return 0, m.classify(err, "listing connections")
	}
	var ids []uint64
	for rows.Next() {
		var id uint64
		if err := rows.Scan(&id); err != nil {
			_ = rows.Close()
			return 0, m.classify(err, "listing connections")
		}
		ids = append(ids, id)
	}
	_ = rows.Close()
	if err := rows.Err(); err != nil {
		return 0, m.classify(err, "listing connections")
	}
	n := 0
	for _, id := range ids {
		err := m.exec(ctx, "killing a connection", "KILL CONNECTION "+strconv.FormatUint(id, 10))
		switch {
		case err == nil:
			n++
		case errNumber(err) != errUnknownThread:
			return n, err
		}
	}
	return n, nil
}

// Ident quotes a MySQL identifier.
func Ident(s string) string { return "`" + strings.ReplaceAll(s, "`", "``") + "`" }

// GrantTarget quotes a database name for GRANT ... ON <target>.*, where _ and %
// are wildcards: escaped, the grant covers that one database only.
func GrantTarget(database string) string {
	r := strings.NewReplacer(`\`, `\\`, `_`, `\_`, `%`, `\%`)
	return Ident(r.Replace(database))
}

// Literal quotes a string literal for the session's sql_mode, which Orderly sets
// without NO_BACKSLASH_ESCAPES.
func Literal(s string) string {
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `''`, "\x00", `\0`).Replace(s) + "'"
}

// userSpec is the account of a DevDatabase's user: from any host.
func userSpec(user string) string { return Literal(user) + "@'%'" }

// NativeHash is the mysql_native_password hash of password, as MySQL stores it:
// '*' and the upper-case hex of SHA1(SHA1(password)).
func NativeHash(password string) string {
	first := sha1.Sum([]byte(password)) //nolint:gosec // the protocol's hash
	second := sha1.Sum(first[:])        //nolint:gosec // the protocol's hash
	return "*" + strings.ToUpper(hex.EncodeToString(second[:]))
}

// identifiedBy is the IDENTIFIED clause that sets password: its hash on MariaDB, the
// password itself (rewritten out of the logs by the server) on MySQL.
func identifiedBy(version, password string) string {
	if isMariaDB(version) {
		return "IDENTIFIED BY PASSWORD " + Literal(NativeHash(password))
	}
	return "IDENTIFIED BY " + Literal(password)
}
