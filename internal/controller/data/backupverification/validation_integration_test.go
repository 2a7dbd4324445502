//go:build integration

package backupverification

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/testenv"
)

// Bad specs are refused by the API server, with a message that says what to fix.
func TestInvalidSpecsRefused(t *testing.T) {
	valid := func() datav1alpha1.BackupVerificationSpec {
		return datav1alpha1.BackupVerificationSpec{
			Source: datav1alpha1.BackupSource{S3: &datav1alpha1.S3BackupSource{Endpoint: "https://s3.example.com", Bucket: "dumps",
				CredentialsSecretRef: datav1alpha1.LocalSecretKeyReference{Name: "creds"}}},
			Target: datav1alpha1.BackupTarget{ServerRef: "pg"},
		}
	}
	tests := []struct {
		name    string
		mutate  func(*datav1alpha1.BackupVerificationSpec)
		wantMsg string
	}{
		{"no source", func(s *datav1alpha1.BackupVerificationSpec) { s.Source.S3 = nil }, "source needs exactly one kind"},
		{"http without insecure", func(s *datav1alpha1.BackupVerificationSpec) { s.Source.S3.Endpoint = "http://s3.example.com" }, "endpoint must be https://"},
		{"endpoint with a path", func(s *datav1alpha1.BackupVerificationSpec) { s.Source.S3.Endpoint = "https://s3.example.com/dumps" }, "spec.source.s3.endpoint"},
		{"expect and min", func(s *datav1alpha1.BackupVerificationSpec) {
			s.Checks.SQL = []datav1alpha1.SQLCheck{{Name: "c", Query: "SELECT 1", Expect: ptrTo("1"), Min: ptrTo("0")}}
		}, "either expect, or min and/or max"},
		{"neither expect nor min/max", func(s *datav1alpha1.BackupVerificationSpec) {
			s.Checks.SQL = []datav1alpha1.SQLCheck{{Name: "c", Query: "SELECT 1"}}
		}, "either expect, or min and/or max"},
		{"min not a number", func(s *datav1alpha1.BackupVerificationSpec) {
			s.Checks.SQL = []datav1alpha1.SQLCheck{{Name: "c", Query: "SELECT 1", Min: ptrTo("ten")}}
		}, "min"},
		{"bad selection", func(s *datav1alpha1.BackupVerificationSpec) { s.Selection = "oldest" }, "selection"},
		{"negative minRows", func(s *datav1alpha1.BackupVerificationSpec) {
			s.Checks.Tables = []datav1alpha1.TableCheck{{Name: "orders", MinRows: -1}}
		}, "minRows"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := valid()
			tt.mutate(&s)
			bv := &datav1alpha1.BackupVerification{ObjectMeta: metav1.ObjectMeta{Namespace: suiteNamespace, Name: uniq("invalid")}, Spec: s}
			err := k.Create(context.Background(), bv, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), tt.wantMsg) {
				t.Fatalf("got %v; want a refusal that says %q", err, tt.wantMsg)
			}
		})
	}
	bv := &datav1alpha1.BackupVerification{ObjectMeta: metav1.ObjectMeta{Namespace: suiteNamespace, Name: uniq("valid")}, Spec: valid()}
	if err := k.Create(context.Background(), bv, client.DryRunAll); err != nil {
		t.Fatalf("a valid spec was refused: %v", err)
	}
}

// The sample is accepted as it is.
func TestSampleIsValid(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "data_v1alpha1_backupverification.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	doc, _, _ := strings.Cut(string(data), "\n---\n")
	var bv datav1alpha1.BackupVerification
	if err := yaml.Unmarshal([]byte(doc), &bv); err != nil {
		t.Fatal(err)
	}
	bv.Namespace = suiteNamespace
	if err := k.Create(context.Background(), &bv, client.DryRunAll); err != nil {
		t.Fatalf("the sample is refused: %v", err)
	}
}

// The metrics an alert reads follow the runs.
func TestMetrics(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	good := waitRun(t, newBV(t, suiteNamespace, server, prefix, nil), 1)
	key := client.ObjectKeyFromObject(good)
	want := float64(good.Status.LastSuccessTime.Unix())
	if got := metricSettles(lastSuccess.WithLabelValues(series.Values(key)...), func(v float64) bool { return v == want }); got != want {
		t.Errorf("last success timestamp %v, want %v", got, want)
	}
	if got := metricSettles(restoreSeconds.WithLabelValues(series.Values(key)...), func(v float64) bool { return v > 0 }); got <= 0 {
		t.Errorf("restore duration %v", got)
	}
	bad := waitRun(t, newBV(t, suiteNamespace, server, "nothing/", nil), 1)
	bkey := client.ObjectKeyFromObject(bad)
	if got := metricSettles(failures.WithLabelValues(series.Values(bkey, "Error", ReasonNoBackup)...), func(v float64) bool { return v == 1 }); got != 1 {
		t.Errorf("failures_total{result=Error,reason=NoBackup} = %v, want 1", got)
	}
	if got := testutil.ToFloat64(lastSuccess.WithLabelValues(series.Values(bkey)...)); got != 0 {
		t.Errorf("last success of one that never passed: %v", got)
	}
}

// Secrets never reach status or Events: not the store's secret key, not the
// throwaway role's password, not the admin's.
func TestSecretsNeverInStatusOrEvents(t *testing.T) {
	ctx := context.Background()
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	const wrong = "notTheSecretKeyButSecretAnyway"
	bad := waitRun(t, newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) {
		s.Source.S3.CredentialsSecretRef.Name = credentials(t, suiteNamespace, s3s.AccessKey, wrong)
	}), 1)
	good := waitRun(t, newBV(t, suiteNamespace, server, prefix, nil), 1)
	for _, bv := range []*datav1alpha1.BackupVerification{bad, good} {
		var notes []string
		deadline := time.Now().Add(timeout)
		for len(notes) == 0 {
			var events eventsv1.EventList
			if err := k.List(ctx, &events, client.InNamespace(suiteNamespace)); err != nil {
				t.Fatal(err)
			}
			for _, e := range events.Items {
				if e.Regarding.UID == bv.UID {
					notes = append(notes, e.Reason+": "+e.Note)
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no Event about %s", bv.Name)
			}
			time.Sleep(poll)
		}
		status, _ := yaml.Marshal(bv.Status)
		for _, secret := range []string{wrong, s3s.SecretKey, pg.Password} {
			for _, text := range append(notes, string(status)) {
				if strings.Contains(text, secret) {
					t.Errorf("a secret is in %q", text)
				}
			}
		}
	}
}

// metricSettles reads m until ok says its value is the expected one, or until the
// timeout, and returns the last value read. The controller sets its metrics just after
// the status write that waitRun sees, so the test can read them a moment too early.
func metricSettles(m prometheus.Collector, ok func(float64) bool) float64 {
	deadline := time.Now().Add(timeout)
	for {
		v := testutil.ToFloat64(m)
		if ok(v) || time.Now().After(deadline) {
			return v
		}
		time.Sleep(poll)
	}
}
