package mysql

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"

	gomysql "github.com/go-sql-driver/mysql"

	"orderly.dev/orderly/internal/database"
)

// DDLNote is added to the message of a failed init run: what MySQL committed
// implicitly is not rolled back with the rest.
const DDLNote = "MySQL and MariaDB commit implicitly at each DDL or account statement (CREATE TABLE, ALTER, DROP, CREATE USER, GRANT, ...), so what ran up to the last of them before the failure stays applied; the rest was rolled back"

// Init runs a DevDatabase's init SQL in its database, logged in as its own user
// with its password (the SQL is the tenant's: it gets the tenant's rights, never
// the admin's), with autocommit off and one COMMIT at the end, sent as one
// multi-statement query. Unlike PostgreSQL, MySQL commits each DDL statement at once, so a failure
// after a CREATE TABLE leaves that table: the error says so (DDLNote).
//
// The transaction's identifier handed to begun is the session's CONNECTION_ID(),
// which InitOutcome looks for in the server's process list. The session keeps the
// server's sql_mode and time zone; on MariaDB its max_statement_time is
// Timeouts.Init. Should the SQL lift it (or on MySQL, which has no such limit for
// anything but SELECT), Orderly kills the session at Init plus Grace from the
// admin's connection. The driver never reads a local file for LOAD DATA LOCAL
// INFILE (no file is registered and AllowAllFiles is off), so the SQL cannot make
// the manager send its own files.
func (m *MySQL) Init(ctx context.Context, db database.Database, initSQL string, begun func(txn string) error) error {
	if err := checkNames(db); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, m.timeouts.Init+m.timeouts.Grace)
	defer cancel()
	s := m.server
	s.Username, s.Password = db.Role, db.Password
	sdb, err := open(s, session{dbname: db.Name, timeouts: m.timeouts, statement: m.timeouts.Init, tenant: true})
	if err != nil {
		return err
	}
	defer func() { _ = sdb.Close() }()
	sdb.SetMaxOpenConns(1)
	conn, err := sdb.Conn(ctx)
	if err != nil {
		if n := errNumber(err); loginRefused(n) {
			return fmt.Errorf("%w: the server refused the database user's login (error %d); Orderly logs in as the user to run its init SQL", database.ErrUnreachable, n)
		}
		return m.classify(err, "connecting as the database's user")
	}
	defer func() { _ = conn.Close() }()
	var id uint64
	if err := conn.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return m.classify(err, "beginning the init transaction")
	}
	// autocommit off rather than START TRANSACTION: a transaction begun that way
	// ends at the first DDL's implicit commit, and what follows would commit
	// statement by statement; with autocommit off the next one begins at once, so
	// only the DDL is kept when the run fails.
	if _, err := conn.ExecContext(ctx, "SET SESSION autocommit = 0"); err != nil {
		return m.classify(err, "beginning the init transaction")
	}
	if err := begun(strconv.FormatUint(id, 10)); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, initSQL); err != nil {
		m.killAfterDeadline(ctx, err, id)
		if ctx.Err() == nil {
			// Also done by the server when the session ends; said here so that the
			// session is not handed back with work open.
			_, _ = conn.ExecContext(ctx, "ROLLBACK")
		}
		return m.initError(ctx, err)
	}
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		m.killAfterDeadline(ctx, err, id)
		return m.initError(ctx, err)
	}
	return nil
}

// killAfterDeadline kills the init session id from the admin's pool when Orderly
// stopped waiting for it: closing the client's socket does not stop a statement
// the server is running.
func (m *MySQL) killAfterDeadline(ctx context.Context, err error, id uint64) {
	if ctx.Err() == nil && !errors.Is(err, context.DeadlineExceeded) {
		return
	}
	kctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.timeouts.Statement)
	defer cancel()
	_, _ = m.pool.db.ExecContext(kctx, "KILL CONNECTION "+strconv.FormatUint(id, 10))
}

// initError tells the SQL's own failure (ErrInit: the server refused it, or it ran
// out of time) from a lost connection (ErrUnreachable, its outcome asked later
// with InitOutcome). The server's message names objects of the tenant's SQL,
// never a password Orderly knows.
func (m *MySQL) initError(ctx context.Context, err error) error {
	var myErr *gomysql.MySQLError
	if errors.As(err, &myErr) {
		switch myErr.Number {
		case errStatementTimeout, errExecutionTimeout, errQueryInterrupted:
			return fmt.Errorf("%w: it ran longer than %s and was cancelled (error %d); %s", database.ErrInit, m.timeouts.Init, myErr.Number, DDLNote)
		}
		return fmt.Errorf("%w: %s; %s", database.ErrInit, database.ScrubberFor(m.server).Describe(err, describe), DDLNote)
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return fmt.Errorf("%w: it ran longer than %s and was cancelled; %s", database.ErrInit, m.timeouts.Init, DDLNote)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, gomysql.ErrInvalidConn) || errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return m.classify(err, "running the init SQL")
	}
	// Anything else the driver refused before the server saw it (LOAD DATA LOCAL
	// INFILE of a file it may not read): the SQL's failure.
	return fmt.Errorf("%w: %s; %s", database.ErrInit, database.ScrubberFor(m.server).Describe(err, describe), DDLNote)
}

// InitOutcome says whether the init session txn (its CONNECTION_ID()) still runs.
// Once it has ended the server cannot say whether it committed: MySQL keeps no
// record of past transactions, so the answer is TxnUnknown.
func (m *MySQL) InitOutcome(ctx context.Context, txn string) (database.TxnState, error) {
	id, err := strconv.ParseUint(txn, 10, 64)
	if err != nil {
		return database.TxnUnknown, nil
	}
	// A session of the same number but another user (the server restarted and
	// numbers its sessions from 1 again) is not the init's.
	running, err := m.count(ctx, "asking the outcome of the init transaction",
		`SELECT COUNT(*) FROM information_schema.PROCESSLIST WHERE ID = ? AND USER LIKE 'orderly\_%'`, id)
	if err != nil {
		return database.TxnUnknown, err
	}
	if running {
		return database.TxnInProgress, nil
	}
	return database.TxnUnknown, nil
}
