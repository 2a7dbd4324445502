//go:build integration

package backupverification

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
)

// A slow restore does not hold up the other BackupVerifications: while two
// restores on one server are still running (each holds a worker for its whole
// duration), a third BackupVerification on the same server is verified, and the
// slow ones are still in progress when it is.
func TestSlowRestoresDoNotBlockOthers(t *testing.T) {
	ctx := context.Background()
	ns := ownNamespace(t)
	// The controller's own default worker count, as `orderly manager` runs it (the
	// test environment would otherwise give every controller 2). Stopped at the end:
	// the slow restores are cut and their databases dropped then.
	connector := postgres.NewConnector()
	t.Cleanup(connector.Close)
	env.StartManagerForTest(t, kit.Deps{Databases: connector, Namespace: managerNamespace}.For(Controller), []kit.Controller{Controller}, watchOnly(ns))
	server := newServer(t)
	slowPrefix := upload(t, "slow.sql", []byte("CREATE TABLE t (a int);\nSELECT pg_sleep(45);\n"), false)
	fastPrefix := upload(t, "shop.dump", dumps.custom, false)
	var slow []*datav1alpha1.BackupVerification
	for range 2 {
		slow = append(slow, newBV(t, ns, server, slowPrefix, func(s *datav1alpha1.BackupVerificationSpec) {
			s.Checks = datav1alpha1.BackupChecks{}
			s.MaxRestoreDuration = metav1.Duration{Duration: 5 * time.Minute}
		}))
	}
	// Both slow restores are under way before the fast one is created.
	deadline := time.Now().Add(timeout)
	for _, bv := range slow {
		for {
			var got datav1alpha1.BackupVerification
			if err := k.Get(ctx, client.ObjectKeyFromObject(bv), &got); err != nil {
				t.Fatal(err)
			}
			if got.Status.CurrentRun != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the slow restore of %s did not start; status %+v", bv.Name, got.Status)
			}
			time.Sleep(poll)
		}
	}
	fast := newBV(t, ns, server, fastPrefix, nil)
	deadline = time.Now().Add(30 * time.Second) // well within the slow restores' 45 s
	var got datav1alpha1.BackupVerification
	for {
		if err := k.Get(ctx, client.ObjectKeyFromObject(fast), &got); err != nil {
			t.Fatal(err)
		}
		if got.Status.LastRun != nil && got.Status.CurrentRun == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s was not verified while two slow restores ran; status %+v", fast.Name, got.Status)
		}
		time.Sleep(poll)
	}
	expectRun(t, &got, datav1alpha1.RunPassed, ReasonPassed)
	for _, bv := range slow {
		var cur datav1alpha1.BackupVerification
		if err := k.Get(ctx, client.ObjectKeyFromObject(bv), &cur); err != nil {
			t.Fatal(err)
		}
		if cur.Status.CurrentRun == nil || cur.Status.LastRun != nil {
			t.Fatalf("%s: the slow restore is not in progress any more (status %+v): the test proves nothing", bv.Name, cur.Status)
		}
	}
	expectNoThrowaway(t, &got)
}
