package postgres

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"orderly.dev/orderly/internal/database"
)

// Init runs a DevDatabase's init SQL in its database, logged in as its main role
// (the SQL is the tenant's: it gets the tenant's rights, never the admin's), in one
// transaction (unless the SQL itself commits) whose identifier is handed to begun
// before the SQL runs. statement_timeout is Timeouts.Init, sent at connection start;
// should the SQL lower or lift it, Orderly still gives up at Init plus Grace and
// cancels the statement. The session's search_path is the database's, as the
// tenant's own sessions have it.
func (p *Postgres) Init(ctx context.Context, db database.Database, sql string, begun func(txn string) error) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeouts.Init+p.timeouts.Grace)
	defer cancel()
	conn, err := p.connectAsOwner(ctx, db, p.timeouts.Init, true)
	if err != nil {
		return err
	}
	defer func() { _ = conn.Close(context.WithoutCancel(ctx)) }()
	tx, err := conn.Begin(ctx)
	if err != nil {
		return p.classify(err, "beginning the init transaction")
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	var txn string
	if err := tx.QueryRow(ctx, `SELECT pg_current_xact_id()::text`).Scan(&txn); err != nil {
		return p.classify(err, "beginning the init transaction")
	}
	if err := begun(txn); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, sql); err != nil {
		return initError(err, sql, p.timeouts, database.ScrubberFor(p.server))
	}
	if err := tx.Commit(ctx); err != nil {
		return initError(err, sql, p.timeouts, database.ScrubberFor(p.server))
	}
	return nil
}

// initError tells the SQL's own failure (ErrInit: the server refused it, or stopped
// it at its statement_timeout) from a lost connection (ErrUnreachable, its outcome
// asked later with InitOutcome). The server's message names objects of the
// tenant's SQL, never a password Orderly knows.
func initError(err error, sql string, t database.Timeouts, sc database.Scrubber) error {
	var pgErr *pgconn.PgError
	// 57P0x: the session was ended (a shutdown, a terminated backend), not refused.
	if errors.As(err, &pgErr) && !strings.HasPrefix(pgErr.Code, "57P0") {
		msg := fmt.Sprintf("%s (SQLSTATE %s)", pgErr.Message, pgErr.Code)
		if pgErr.Code == codeQueryCanceled {
			msg = fmt.Sprintf("it ran longer than %s and was cancelled (SQLSTATE %s)", t.Init, pgErr.Code)
		}
		if line := lineAt(sql, int(pgErr.Position)); line > 0 {
			msg += fmt.Sprintf(" at line %d", line)
		}
		return fmt.Errorf("%w: %s", database.ErrInit, msg)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%w: it ran longer than %s and was cancelled", database.ErrInit, t.Init)
	}
	return classify(err, "running the init SQL", t, sc)
}

// lineAt is the line of sql that the server's error position (1-based, in
// characters) points at; 0 when it points nowhere.
func lineAt(sql string, position int) int {
	if position <= 0 {
		return 0
	}
	line, n := 1, 0
	for _, c := range sql {
		n++
		if n >= position {
			return line
		}
		if c == '\n' {
			line++
		}
	}
	return 0
}

// InitOutcome asks the server what became of the init transaction txn.
func (p *Postgres) InitOutcome(ctx context.Context, txn string) (database.TxnState, error) {
	if txn == "" {
		return database.TxnUnknown, nil
	}
	qctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	var st *string
	err := p.pool.QueryRow(qctx, `SELECT pg_xact_status($1::xid8)`, txn).Scan(&st)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && !strings28or08(pgErr.Code) {
		// A transaction id from the future (another server, one restored from a
		// backup) or not one at all.
		return database.TxnUnknown, nil
	}
	if err != nil {
		return database.TxnUnknown, p.classify(err, "asking the outcome of the init transaction")
	}
	if st == nil {
		return database.TxnUnknown, nil
	}
	switch *st {
	case "committed":
		return database.TxnCommitted, nil
	case "aborted":
		return database.TxnAborted, nil
	case "in progress":
		return database.TxnInProgress, nil
	}
	return database.TxnUnknown, nil
}

// strings28or08 says whether a SQLSTATE is a login or connection failure.
func strings28or08(code string) bool {
	return len(code) >= 2 && (code[:2] == "28" || code[:2] == "08")
}
