package backupverification

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

// leftoverRuns lists the runs of bv whose throwaway database or role is still on
// the server, marked as Orderly's: those status.currentRun cannot name any more (its
// record was lost, e.g. a finalizer removed by hand and the object made again, or
// written by an older version). The engine's Drop still checks each one's marker
// before dropping it, so a name alone never decides a deletion.
func leftoverRuns(ctx context.Context, e database.Engine, bv *datav1alpha1.BackupVerification) ([]int64, error) {
	prefix := runPrefix(bv)
	owned, err := e.Owned(ctx, prefix)
	if err != nil {
		return nil, fmt.Errorf("listing leftover throwaway databases: %w", err)
	}
	var runs []int64
	for _, name := range append(owned.Databases, owned.Roles...) {
		if n, ok := runOf(prefix, name); ok && !slices.Contains(runs, n) {
			runs = append(runs, n)
		}
	}
	slices.Sort(runs)
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
