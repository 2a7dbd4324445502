package backupverification

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/postgres"
)

// listTimeout bounds the listing of leftovers: connecting and one query.
const listTimeout = 15 * time.Second

// leftoverRuns lists the runs of bv whose throwaway database or role is still on
// the server, by name: those status.currentRun cannot name any more (its record was
// lost, e.g. a finalizer removed by hand and the object made again, or written by an
// older version). The engine's Drop still checks each one's marker before dropping
// it, so a name alone never decides a deletion. The engine has no listing, and
// engine.go belongs to the DevDatabase capability: this is a direct admin
// connection made the way the engine makes its own (pinned search_path, statement
// and lock timeouts, a deadline, errors without the connection settings).
func leftoverRuns(ctx context.Context, srv database.Server, bv *datav1alpha1.BackupVerification) ([]int64, error) {
	ctx, cancel := context.WithTimeout(ctx, listTimeout)
	defer cancel()
	cfg, err := pgx.ParseConfig(postgres.ConnString(srv, "postgres"))
	if err != nil {
		return nil, errors.New("invalid connection settings for the database server")
	}
	cfg.RuntimeParams["search_path"] = "pg_catalog, pg_temp"
	cfg.RuntimeParams["statement_timeout"] = "10000"
	cfg.RuntimeParams["lock_timeout"] = "5000"
	if len(srv.CACert) > 0 {
		roots := x509.NewCertPool()
		roots.AppendCertsFromPEM(srv.CACert)
		if cfg.TLSConfig != nil {
			cfg.TLSConfig.RootCAs = roots
		}
		for _, f := range cfg.Fallbacks {
			if f.TLSConfig != nil {
				f.TLSConfig.RootCAs = roots
			}
		}
	}
	conn, err := pgx.ConnectConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: listing leftover throwaway databases: %w", database.ErrUnreachable, scrub(err, srv))
	}
	defer conn.Close(context.WithoutCancel(ctx))
	prefix := runPrefix(bv)
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1)
UNION SELECT rolname FROM pg_roles WHERE starts_with(rolname, $1)`, prefix)
	if err != nil {
		return nil, fmt.Errorf("listing leftover throwaway databases: %w", scrub(err, srv))
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("listing leftover throwaway databases: %w", scrub(err, srv))
	}
	var runs []int64
	for _, name := range names {
		if n, ok := runOf(prefix, name); ok {
			runs = append(runs, n)
		}
	}
	return runs, nil
}

// runPrefix starts the names of bv's throwaway databases and roles; the run number follows.
func runPrefix(bv *datav1alpha1.BackupVerification) string {
	return strings.TrimSuffix(throwaway(bv, 0).Name, "0")
}

// runOf reads the run number from a throwaway database's name.
func runOf(prefix, name string) (int64, bool) {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || rest == "" {
		return 0, false
	}
	n, err := strconv.ParseInt(rest, 10, 64)
	if err != nil || n <= 0 || strconv.FormatInt(n, 10) != rest {
		return 0, false
	}
	return n, true
}
