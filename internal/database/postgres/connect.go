package postgres

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"orderly.dev/orderly/internal/database"
)

// Kind is the DatabaseServer spec.engine this package serves (also when unset).
const Kind = "postgres"

// Connector keeps one small pool per DatabaseServer (database.Pools: replaced when
// the server's settings change, closed by Forget and Close). Its Timeouts and Limits
// are database.Pools'.
type Connector struct {
	database.Pools[*pgxpool.Pool]
}

// NewConnector returns a Connector with no pools yet.
func NewConnector() *Connector { return &Connector{} }

// ConnString builds a libpq keyword/value connection string; values are quoted. The
// sslmode is the server's effective one (verify-full with a CA).
func ConnString(s database.Server, dbname string) string {
	q := func(v string) string {
		return "'" + strings.ReplaceAll(strings.ReplaceAll(v, `\`, `\\`), `'`, `\'`) + "'"
	}
	return fmt.Sprintf("host=%s port=%d dbname=%s user=%s password=%s sslmode=%s connect_timeout=5 application_name=orderly",
		q(s.Host), s.Port, q(dbname), q(s.Username), q(s.Password), q(s.EffectiveSSLMode()))
}

// Connect returns the engine for s, reusing its pool while s is unchanged.
func (c *Connector) Connect(ctx context.Context, kind string, s database.Server) (database.Engine, error) {
	if kind != "" && kind != Kind {
		return nil, fmt.Errorf("%w: the postgres connector was asked for engine %q", database.ErrEngineUnsupported, kind)
	}
	pool, t, err := c.Get(s, func(t database.Timeouts, l database.Limits) (*pgxpool.Pool, error) {
		cfg, err := pgxpool.ParseConfig(ConnString(s, "postgres"))
		if err != nil {
			return nil, errInvalidSettings
		}
		if err := configure(cfg.ConnConfig, s, Session{Timeouts: t}); err != nil {
			return nil, err
		}
		cfg.MaxConns = int32(min(l.MaxConns, math.MaxInt32))
		cfg.MaxConnIdleTime = l.MaxIdle
		p, err := pgxpool.NewWithConfig(context.WithoutCancel(ctx), cfg)
		if err != nil {
			return nil, fmt.Errorf("%w: %s", database.ErrUnreachable, database.ScrubberFor(s).Describe(err, describe))
		}
		return p, nil
	})
	if err != nil {
		return nil, err
	}
	return &Postgres{pool: pool, server: s, timeouts: t}, nil
}

// errInvalidSettings stands for an error of pgx's configuration parser, which could
// quote the connection string, and so the password.
var errInvalidSettings = errors.New("invalid connection settings for the database server")

// Session says how a connection Orderly makes is set up, beyond what every
// connection gets: TLS as the server's sslMode says, verified against its CA when it
// has one (RootCAs: a CA that is not PEM is refused), application_name, and the
// timeouts, sent at connection start where no database or role setting overrides
// them. The pools and every other connection of the engine are made this way, and so
// are BackupVerification's connections to its restored databases.
type Session struct {
	// Database to connect to; postgres when empty.
	Database string
	// Timeouts: Statement is the session's statement_timeout (unless Statement below
	// says otherwise) and its idle_in_transaction_session_timeout, Lock its
	// lock_timeout, Connect how long connecting may take. Zero fields take
	// database.DefaultTimeouts.
	Timeouts database.Timeouts
	// Statement is the session's statement_timeout when it is not
	// Timeouts.Statement: a clone's, the init SQL's.
	Statement time.Duration
	// KeepSearchPath leaves the session the search_path its database and role give
	// it, for SQL that is the tenant's (init SQL, BackupVerification's checks), which
	// must see its database as the tenant's own sessions do. Otherwise the session's
	// search_path is pg_catalog, pg_temp, so that no object a tenant's role creates
	// is picked instead of a built-in one by Orderly's statements (CVE-2018-1058).
	KeepSearchPath bool
	// ReadOnly makes every transaction of the session read-only.
	ReadOnly bool
	// SimpleProtocol sends queries as text without preparing them, and so reads
	// every value as the server prints it: for queries a tenant wrote.
	SimpleProtocol bool
	// Application is the session's application_name; orderly when empty.
	Application string
}

// Config is the pgx configuration of a connection to s, logged in as s.Username,
// set up as sess says.
func Config(s database.Server, sess Session) (*pgx.ConnConfig, error) {
	cfg, err := pgx.ParseConfig(ConnString(s, cmp.Or(sess.Database, "postgres")))
	if err != nil {
		return nil, errInvalidSettings
	}
	return cfg, configure(cfg, s, sess)
}

// Open connects to s as Config says. A configuration it refuses is an error of
// Orderly's (database.ErrCredentials for a CA that is not PEM); the errors of
// connecting are pgx's, which may name the user, the host and the database (never
// the password): callers classify or scrub them for whoever reads them.
func Open(ctx context.Context, s database.Server, sess Session) (*pgx.Conn, error) {
	cfg, err := Config(s, sess)
	if err != nil {
		return nil, err
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// configure sets up a parsed configuration (of one connection, or of a pool's) as
// sess says, with s's CA as the only roots.
func configure(cfg *pgx.ConnConfig, s database.Server, sess Session) error {
	t := sess.Timeouts.WithDefaults()
	statement := cmp.Or(sess.Statement, t.Statement)
	if cfg.RuntimeParams == nil {
		cfg.RuntimeParams = map[string]string{}
	}
	ms := func(d time.Duration) string { return strconv.FormatInt(d.Milliseconds(), 10) }
	params := cfg.RuntimeParams
	if sess.KeepSearchPath {
		delete(params, "search_path")
	} else {
		params["search_path"] = adminSearchPath
	}
	params["statement_timeout"] = ms(statement)
	params["lock_timeout"] = ms(t.Lock)
	params["idle_in_transaction_session_timeout"] = ms(t.Statement)
	if sess.ReadOnly {
		params["default_transaction_read_only"] = "on"
	}
	if sess.Application != "" {
		params["application_name"] = sess.Application
	}
	if sess.SimpleProtocol {
		cfg.DefaultQueryExecMode = pgx.QueryExecModeSimpleProtocol
	}
	cfg.ConnectTimeout = t.Connect
	roots, err := database.RootCAs(s.CACert)
	if err != nil || roots == nil {
		return err
	}
	if cfg.TLSConfig != nil {
		cfg.TLSConfig.RootCAs = roots
	}
	for _, f := range cfg.Fallbacks {
		if f.TLSConfig != nil {
			f.TLSConfig.RootCAs = roots
		}
	}
	return nil
}
