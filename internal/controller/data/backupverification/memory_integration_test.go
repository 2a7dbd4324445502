//go:build integration

package backupverification

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/localpg"
)

// A restore streams: restoring a dump of ~96 MB raises the heap (the manager runs
// in this process) by far less than the dump's size.
func TestRestoreStreams(t *testing.T) {
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE big`); err != nil {
		t.Fatal(err)
	}
	big, err := pgx.Connect(ctx, pg.URL("big"))
	if err != nil {
		t.Fatal(err)
	}
	// Random text, so that neither the store nor gzip shrinks it.
	if _, err := big.Exec(ctx, `CREATE TABLE blobs AS SELECT g AS id, repeat(md5(random()::text), 6) AS v FROM generate_series(1, 480000) g`); err != nil {
		t.Fatal(err)
	}
	big.Close(ctx)
	bin, err := localpg.FindBinDir()
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "big.sql")
	if out, err := exec.Command(filepath.Join(bin, "pg_dump"), "--format=plain", "--no-owner", "--no-privileges", "--file="+file, "--dbname="+pg.URL("big")).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v: %s", err, out)
	}
	fi, err := os.Stat(file)
	if err != nil {
		t.Fatal(err)
	}
	prefix := uniq("big") + "/"
	if err := s3s.PutFile(ctx, bucket, prefix+"big.sql", file); err != nil {
		t.Fatal(err)
	}
	// Collect often, so that the heap shows what is live rather than garbage.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	go func() {
		var m runtime.MemStats
		for {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond):
			}
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
		}
	}()
	server := newServer(t)
	got := waitRun(t, newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) {
		s.Checks = datav1alpha1.BackupChecks{Tables: []datav1alpha1.TableCheck{{Name: "blobs", MinRows: 480000}}}
	}), 1)
	close(done)
	expectRun(t, got, datav1alpha1.RunPassed, ReasonPassed)
	growth := int64(peak.Load()) - int64(base.HeapAlloc)
	t.Logf("dump %d MB restored in %s; heap %d MB before, peak growth %d MB", fi.Size()>>20, got.Status.LastRun.RestoreDuration.Duration, base.HeapAlloc>>20, growth>>20)
	if growth > fi.Size()/4 {
		t.Errorf("the heap grew by %d MB while restoring a %d MB dump: the restore does not stream", growth>>20, fi.Size()>>20)
	}
	expectNoThrowaway(t, got)
}
