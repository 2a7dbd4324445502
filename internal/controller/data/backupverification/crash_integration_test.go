//go:build integration

package backupverification

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
)

// ownNamespace makes a namespace the suite's manager does not watch, for a test
// that runs (and stops) a manager of its own.
func ownNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniq("bv-own")}}
	if err := k.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func startManager(t *testing.T, ns string) func() {
	t.Helper()
	connector := postgres.NewConnector()
	t.Cleanup(connector.Close)
	return env.StartManagerForTest(t, kit.Deps{Databases: connector, Namespace: managerNamespace}, []kit.Controller{Controller}, watchOnly(ns))
}

// What a manager killed mid-restore leaves (a throwaway database, recorded in
// status.currentRun) is dropped after the restart, and the run is recorded as
// interrupted.
func TestCrashedRunCleanedUpAfterRestart(t *testing.T) {
	ctx := context.Background()
	ns := ownNamespace(t)
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	bv := newBV(t, ns, server, prefix, nil)
	// The crash's leftovers, as the run had made them before the manager died.
	connector := postgres.NewConnector()
	defer connector.Close()
	e, err := connector.Connect(ctx, "postgres", database.Server{Name: "crash", Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password})
	if err != nil {
		t.Fatal(err)
	}
	db := throwaway(bv, 1)
	db.Password, db.SetPassword = database.Password(), true
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := k.Get(ctx, client.ObjectKeyFromObject(bv), bv); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	bv.Status.Runs = 1
	bv.Status.CurrentRun = &datav1alpha1.BackupRunInProgress{Number: 1, Trigger: TriggerInitial, ServerRef: server, Database: db.Name, StartTime: &now}
	if err := k.Status().Update(ctx, bv); err != nil {
		t.Fatal(err)
	}
	if len(throwawayDatabases(t, bv)) != 1 {
		t.Fatal("the crash's database is not there to begin with")
	}
	startManager(t, ns)
	got := waitRun(t, bv, 1)
	expectRun(t, got, datav1alpha1.RunError, ReasonInterrupted)
	expectNoThrowaway(t, got)
}

// A manager stopped while a restore runs leaves nothing once it is back.
func TestManagerStoppedMidRestoreLeavesNothing(t *testing.T) {
	ctx := context.Background()
	ns := ownNamespace(t)
	server := newServer(t)
	prefix := upload(t, "slow.sql", []byte("CREATE TABLE t (a int);\nSELECT pg_sleep(60);\n"), false)
	stop := startManager(t, ns)
	bv := newBV(t, ns, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) { s.Checks = datav1alpha1.BackupChecks{} })
	deadline := time.Now().Add(timeout)
	for {
		var cur datav1alpha1.BackupVerification
		if err := k.Get(ctx, client.ObjectKeyFromObject(bv), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.CurrentRun != nil && len(throwawayDatabases(t, bv)) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the restore did not start: %+v", cur.Status)
		}
		time.Sleep(poll)
	}
	stop()
	startManager(t, ns)
	deadline = time.Now().Add(timeout)
	for {
		var cur datav1alpha1.BackupVerification
		if err := k.Get(ctx, client.ObjectKeyFromObject(bv), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.CurrentRun == nil && cur.Status.LastRun != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("not cleaned up after the restart: %+v", cur.Status)
		}
		time.Sleep(poll)
	}
	expectNoThrowaway(t, bv)
}

// A restore past maxRestoreDuration is stopped and fails.
func TestSlowRestoreFails(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "slow.sql", []byte("CREATE TABLE t (a int);\nSELECT pg_sleep(60);\n"), false)
	got := waitRun(t, newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) {
		s.Checks = datav1alpha1.BackupChecks{}
		s.MaxRestoreDuration = metav1.Duration{Duration: 2 * time.Second}
	}), 1)
	expectRun(t, got, datav1alpha1.RunFailed, ReasonRestoreTooSlow)
	expectNoThrowaway(t, got)
}

// Deleting a BackupVerification while its run's database exists drops it.
func TestDeletionDropsTheThrowawayDatabase(t *testing.T) {
	ctx := context.Background()
	ns := ownNamespace(t)
	server := newServer(t)
	prefix := upload(t, "slow.sql", []byte("CREATE TABLE t (a int);\nSELECT pg_sleep(60);\n"), false)
	startManager(t, ns)
	bv := newBV(t, ns, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) {
		s.Checks = datav1alpha1.BackupChecks{}
		s.MaxRestoreDuration = metav1.Duration{Duration: 10 * time.Second}
	})
	deadline := time.Now().Add(timeout)
	for len(throwawayDatabases(t, bv)) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the restore did not start")
		}
		time.Sleep(poll)
	}
	if err := k.Delete(ctx, bv); err != nil {
		t.Fatal(err)
	}
	// The run in progress holds its worker until the restore's deadline (10 s); the
	// finalizer runs after it.
	deadline = time.Now().Add(timeout)
	for k.Get(ctx, client.ObjectKeyFromObject(bv), &datav1alpha1.BackupVerification{}) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the BackupVerification was not deleted")
		}
		time.Sleep(poll)
	}
	expectNoThrowaway(t, bv)
}

// Throwaway databases that no record names (of any run: here run 7, with the
// record of run 1 lost) are found by their names and markers and dropped before
// the next run; a database with such a name that Orderly did not make is left alone.
func TestLeftoversOfAnyRunDropped(t *testing.T) {
	ctx := context.Background()
	ns := ownNamespace(t)
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	bv := newBV(t, ns, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) { s.Checks = datav1alpha1.BackupChecks{} })
	connector := postgres.NewConnector()
	defer connector.Close()
	e, err := connector.Connect(ctx, "postgres", database.Server{Name: "leftovers", Host: pg.Host, Port: pg.Port, SSLMode: "disable", Username: pg.Username, Password: pg.Password})
	if err != nil {
		t.Fatal(err)
	}
	db := throwaway(bv, 7)
	db.Password, db.SetPassword = database.Password(), true
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	// Someone else's database that merely has a matching name.
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(ctx)
	foreign := throwaway(bv, 9).Name
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+foreign); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = admin.Exec(context.Background(), "DROP DATABASE IF EXISTS "+foreign) })
	startManager(t, ns)
	got := waitRun(t, bv, 1)
	expectRun(t, got, datav1alpha1.RunPassed, ReasonPassed)
	if dbs := throwawayDatabases(t, bv); len(dbs) != 1 || dbs[0] != foreign {
		t.Fatalf("databases left: %v; want only the foreign %s", dbs, foreign)
	}
}
