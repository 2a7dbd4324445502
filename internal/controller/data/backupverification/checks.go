package backupverification

import (
	"context"
	"fmt"
	"math/big"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
)

// ReasonCheckFailed: a check did not hold.
const ReasonCheckFailed = "CheckFailed"

// checkTimeout is each check's statement_timeout; the whole of the checks get
// checksTimeout.
const (
	checkTimeout  = 30 * time.Second
	checksTimeout = 5 * time.Minute
)

// connectTimeout bounds connecting to the restored database, as pg_restore's does
// (PGCONNECT_TIMEOUT).
const connectTimeout = 10 * time.Second

// runChecks runs spec.checks in the restored database as the throwaway role, in
// read-only transactions with a statement timeout.
func runChecks(ctx context.Context, t target, checks datav1alpha1.BackupChecks) ([]datav1alpha1.BackupCheckResult, error) {
	if len(checks.SQL) == 0 && len(checks.Tables) == 0 && len(checks.RequiredSchemas) == 0 {
		return nil, nil
	}
	ctx, cancel := context.WithTimeout(ctx, checksTimeout)
	defer cancel()
	// As the throwaway role, in its database as the tenant's own sessions see it,
	// every transaction read-only; a query's value is read as the server prints it.
	role := t.server
	role.Username, role.Password = t.role, t.password
	conn, err := postgres.Open(ctx, role, postgres.Session{Database: t.database,
		Timeouts:       database.Timeouts{Statement: checkTimeout, Connect: connectTimeout},
		KeepSearchPath: true, ReadOnly: true, SimpleProtocol: true, Application: "orderly-backupverification"})
	if err != nil {
		return nil, fmt.Errorf("connecting to the restored database to check it: %s", t.scrub(err.Error()))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var out []datav1alpha1.BackupCheckResult
	for _, s := range checks.RequiredSchemas {
		r := datav1alpha1.BackupCheckResult{Name: "schema/" + s}
		var n int
		if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_catalog.pg_namespace WHERE nspname = $1`, s).Scan(&n); err != nil {
			r.Message = kit.Truncate("could not check: "+t.scrub(err.Error()), 512)
		} else if n == 0 {
			r.Message = "the schema does not exist"
		} else {
			r.Passed, r.Value = true, "exists"
		}
		out = append(out, r)
	}
	for _, tc := range checks.Tables {
		out = append(out, tableCheck(ctx, conn, tc, t))
	}
	for _, sc := range checks.SQL {
		r := datav1alpha1.BackupCheckResult{Name: sc.Name}
		value, ok, err := queryValue(ctx, conn, sc.Query)
		switch {
		case err != nil:
			r.Message = kit.Truncate("the query failed: "+t.scrub(err.Error()), 512)
		case !ok:
			r.Message = "the query returned no row"
		default:
			r.Value = kit.Truncate(value, 256)
			r.Passed, r.Message = evaluate(sc, value)
		}
		out = append(out, r)
	}
	return out, nil
}

func tableCheck(ctx context.Context, conn *pgx.Conn, tc datav1alpha1.TableCheck, t target) datav1alpha1.BackupCheckResult {
	r := datav1alpha1.BackupCheckResult{Name: "table/" + tc.Name}
	schema, table, found := strings.Cut(tc.Name, ".")
	if !found {
		schema, table = "public", tc.Name
	}
	var exists bool
	if err := conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_tables WHERE schemaname = $1 AND tablename = $2)`, schema, table).Scan(&exists); err != nil {
		r.Message = kit.Truncate("could not check: "+t.scrub(err.Error()), 512)
		return r
	}
	if !exists {
		r.Message = "the table does not exist"
		return r
	}
	var n int64
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM `+pgx.Identifier{schema, table}.Sanitize()).Scan(&n); err != nil {
		r.Message = kit.Truncate("could not count its rows: "+t.scrub(err.Error()), 512)
		return r
	}
	r.Value = fmt.Sprint(n)
	if n < tc.MinRows {
		r.Message = fmt.Sprintf("%d rows, fewer than minRows %d", n, tc.MinRows)
		return r
	}
	r.Passed = true
	return r
}

// queryValue runs q in a read-only transaction and returns the first column of the
// first row as PostgreSQL prints it (NULL is "").
func queryValue(ctx context.Context, conn *pgx.Conn, q string) (string, bool, error) {
	tx, err := conn.BeginTx(ctx, pgx.TxOptions{AccessMode: pgx.ReadOnly})
	if err != nil {
		return "", false, err
	}
	defer func() { _ = tx.Rollback(context.WithoutCancel(ctx)) }()
	rows, err := tx.Query(ctx, q)
	if err != nil {
		return "", false, err
	}
	defer rows.Close()
	if !rows.Next() {
		return "", false, rows.Err()
	}
	raw := rows.RawValues()
	if len(raw) == 0 {
		return "", false, fmt.Errorf("the query returned no column")
	}
	v := string(raw[0])
	rows.Close()
	return v, true, rows.Err()
}

// evaluate compares a SQL check's value with what it expects.
func evaluate(c datav1alpha1.SQLCheck, value string) (bool, string) {
	if c.Expect != nil {
		if value == *c.Expect {
			return true, ""
		}
		return false, kit.Truncate(fmt.Sprintf("expected %q, got %q", *c.Expect, value), 512)
	}
	v, ok := new(big.Rat).SetString(strings.TrimSpace(value))
	if !ok {
		return false, kit.Truncate(fmt.Sprintf("expected a number, got %q", value), 512)
	}
	if c.Min != nil {
		if m, ok := new(big.Rat).SetString(*c.Min); ok && v.Cmp(m) < 0 {
			return false, fmt.Sprintf("%s is less than min %s", value, *c.Min)
		}
	}
	if c.Max != nil {
		if m, ok := new(big.Rat).SetString(*c.Max); ok && v.Cmp(m) > 0 {
			return false, fmt.Sprintf("%s is more than max %s", value, *c.Max)
		}
	}
	return true, ""
}
