//go:build integration

package backupverification

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

func checkResult(bv *datav1alpha1.BackupVerification, name string) *datav1alpha1.BackupCheckResult {
	for i, c := range bv.Status.LastRun.Checks {
		if c.Name == name {
			return &bv.Status.LastRun.Checks[i]
		}
	}
	return nil
}

func expectRun(t *testing.T, got *datav1alpha1.BackupVerification, result datav1alpha1.BackupRunResult, reason string) {
	t.Helper()
	r := got.Status.LastRun
	if r.Result != result || r.Reason != reason {
		t.Fatalf("run %d: %s/%s (%s); want %s/%s", r.Number, r.Result, r.Reason, r.Message, result, reason)
	}
}

// A good backup, gzip-compressed custom format with its .sha256, passes with the
// evidence in status; the throwaway database and role are gone afterwards.
func TestGoodBackupPassesWithEvidence(t *testing.T) {
	server := newServer(t)
	body := gzipped(dumps.custom)
	prefix := upload(t, "shop-20260301T030000Z.dump.gz", body, true)
	bv := newBV(t, suiteNamespace, server, prefix, nil)
	got := waitRun(t, bv, 1)
	expectRun(t, got, datav1alpha1.RunPassed, ReasonPassed)
	r := got.Status.LastRun
	b := r.Backup
	if b.Key != prefix+"shop-20260301T030000Z.dump.gz" || b.SizeBytes != int64(len(body)) || b.SHA256 != sha(body) || !b.ChecksumVerified || b.Format != "custom+gzip" || b.Age == nil {
		t.Errorf("backup evidence: %+v", b)
	}
	if r.RestoreDuration == nil || r.RestoreDuration.Duration <= 0 {
		t.Errorf("restore duration: %v", r.RestoreDuration)
	}
	if c := checkResult(got, "table/sales.orders"); c == nil || !c.Passed || c.Value != "1500" {
		t.Errorf("table check: %+v", c)
	}
	if c := checkResult(got, "revenue"); c == nil || !c.Passed || c.Value == "" {
		t.Errorf("revenue check: %+v", c)
	}
	if c := checkResult(got, "schema/sales"); c == nil || !c.Passed {
		t.Errorf("schema check: %+v", c)
	}
	if len(r.Checks) != 5 {
		t.Errorf("%d check results, want 5", len(r.Checks))
	}
	if got.Status.LastSuccessTime == nil || got.Status.ConsecutiveFailures != 0 || len(got.Status.History) != 1 {
		t.Errorf("status: %+v", got.Status)
	}
	if c := meta.FindStatusCondition(got.Status.Conditions, "Ready"); c == nil || c.Status != "True" {
		t.Errorf("Ready: %+v", c)
	}
	expectNoThrowaway(t, bv)
}

// A plain-format dump is restored with psql, as the throwaway role.
func TestPlainDumpPasses(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "shop.sql", dumps.plain, false)
	got := waitRun(t, newBV(t, suiteNamespace, server, prefix, nil), 1)
	expectRun(t, got, datav1alpha1.RunPassed, ReasonPassed)
	if got.Status.LastRun.Backup.Format != "plain" || got.Status.LastRun.Backup.ChecksumVerified {
		t.Errorf("backup: %+v", got.Status.LastRun.Backup)
	}
	expectNoThrowaway(t, got)
}

// A plain dump is untrusted: its psql meta-commands (\! runs a shell command on
// the manager's machine) never run.
func TestPlainDumpCannotRunShellCommands(t *testing.T) {
	server := newServer(t)
	marker := filepath.Join(t.TempDir(), "pwned")
	evil := []byte("CREATE TABLE t (a int);\n\\! touch " + marker + "\n")
	prefix := upload(t, "evil.sql", evil, false)
	got := waitRun(t, newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) { s.Checks = datav1alpha1.BackupChecks{} }), 1)
	expectRun(t, got, datav1alpha1.RunFailed, ReasonRestoreFailed)
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the dump ran a shell command on the manager's machine")
	}
	expectNoThrowaway(t, got)
}

// Damaged backups fail with the reason, never pass.
func TestDamagedBackupsFail(t *testing.T) {
	server := newServer(t)
	good := gzipped(dumps.custom)
	corrupt := append([]byte(nil), dumps.custom...)
	for i := len(corrupt) / 3; i < len(corrupt)/3+200; i++ {
		corrupt[i] ^= 0x5a
	}
	tests := []struct {
		name       string
		body       []byte
		sum        string // the published .sha256; "" for none
		wantReason string
		wantInMsg  string
	}{
		{"truncated gzip", good[:len(good)/2], "", ReasonCorrupt, "truncated or corrupt"},
		{"truncated custom", dumps.custom[:len(dumps.custom)/2], "", ReasonRestoreFailed, "pg_restore failed"},
		{"corrupted custom", corrupt, "", ReasonRestoreFailed, "pg_restore failed"},
		{"checksum mismatch", good, sha([]byte("something else")), ReasonChecksumMismatch, "damaged or incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			prefix := upload(t, "shop.dump", tt.body, false)
			if tt.sum != "" {
				if err := s3s.Put(context.Background(), bucket, prefix+"shop.dump.sha256", []byte(tt.sum+"  shop.dump\n")); err != nil {
					t.Fatal(err)
				}
			}
			got := waitRun(t, newBV(t, suiteNamespace, server, prefix, nil), 1)
			expectRun(t, got, datav1alpha1.RunFailed, tt.wantReason)
			if !strings.Contains(got.Status.LastRun.Message, tt.wantInMsg) {
				t.Errorf("message %q does not say %q", got.Status.LastRun.Message, tt.wantInMsg)
			}
			if got.Status.LastSuccessTime != nil || got.Status.ConsecutiveFailures != 1 {
				t.Errorf("status: %+v", got.Status)
			}
			if c := meta.FindStatusCondition(got.Status.Conditions, "Ready"); c == nil || c.Status != "False" || c.Reason != tt.wantReason {
				t.Errorf("Ready: %+v", c)
			}
			expectNoThrowaway(t, got)
		})
	}
}

// A check that returns the wrong value fails the run, with the value observed.
func TestFailingCheckFails(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	got := waitRun(t, newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) {
		s.Checks.SQL = append(s.Checks.SQL, datav1alpha1.SQLCheck{Name: "customers", Query: "SELECT count(*) FROM sales.customers", Expect: ptrTo("101")})
		s.Checks.Tables = append(s.Checks.Tables, datav1alpha1.TableCheck{Name: "sales.refunds"})
	}), 1)
	expectRun(t, got, datav1alpha1.RunFailed, ReasonCheckFailed)
	if c := checkResult(got, "customers"); c == nil || c.Passed || c.Value != "100" || !strings.Contains(c.Message, `expected "101"`) {
		t.Errorf("customers check: %+v", c)
	}
	if c := checkResult(got, "table/sales.refunds"); c == nil || c.Passed || c.Message != "the table does not exist" {
		t.Errorf("refunds check: %+v", c)
	}
	expectNoThrowaway(t, got)
}

// A backup older than maxAge fails without being restored.
func TestTooOldBackupFailsWithoutRestoring(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	if err := s3s.SetModTime(bucket, prefix+"shop.dump", time.Now().Add(-48*time.Hour)); err != nil {
		t.Fatal(err)
	}
	got := waitRun(t, newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) {
		s.MaxAge = &metav1.Duration{Duration: 26 * time.Hour}
	}), 1)
	expectRun(t, got, datav1alpha1.RunFailed, ReasonBackupTooOld)
	if got.Status.LastRun.RestoreDuration != nil || got.Status.LastRun.Backup.SHA256 != "" {
		t.Errorf("the backup was restored: %+v", got.Status.LastRun)
	}
	if a := got.Status.LastRun.Backup.Age; a == nil || a.Duration < 47*time.Hour {
		t.Errorf("age: %v", a)
	}
	expectNoThrowaway(t, got)
}

// A missing bucket, refused credentials and an empty prefix are reported as such,
// as errors (not verdicts on a backup), with SourceAvailable False, and retried later.
func TestSourceProblemsReported(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	tests := []struct {
		name   string
		mutate func(*datav1alpha1.BackupVerificationSpec)
		reason string
	}{
		{"missing bucket", func(s *datav1alpha1.BackupVerificationSpec) { s.Source.S3.Bucket = "no-such-bucket" }, ReasonBucketNotFound},
		{"bad credentials", func(s *datav1alpha1.BackupVerificationSpec) {
			s.Source.S3.CredentialsSecretRef.Name = credentials(t, suiteNamespace, "nobody", "wrongwrongwrong")
		}, ReasonAccessDenied},
		{"wrong secret key", func(s *datav1alpha1.BackupVerificationSpec) {
			s.Source.S3.CredentialsSecretRef.Name = credentials(t, suiteNamespace, s3s.AccessKey, "wrongwrongwrong")
		}, ReasonAccessDenied},
		{"empty prefix", func(s *datav1alpha1.BackupVerificationSpec) { s.Source.S3.Prefix = "nothing-here/" }, ReasonNoBackup},
		{"missing credentials Secret", func(s *datav1alpha1.BackupVerificationSpec) { s.Source.S3.CredentialsSecretRef.Name = "absent" }, ReasonCredentials},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := waitRun(t, newBV(t, suiteNamespace, server, prefix, tt.mutate), 1)
			expectRun(t, got, datav1alpha1.RunError, tt.reason)
			if c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionSourceAvailable); c == nil || c.Status != "False" || c.Reason != tt.reason {
				t.Errorf("SourceAvailable: %+v", c)
			}
			if strings.Contains(got.Status.LastRun.Message, s3s.SecretKey) || strings.Contains(got.Status.LastRun.Message, "wrongwrongwrong") {
				t.Error("a secret key is in status")
			}
			expectNoThrowaway(t, got)
		})
	}
}

// verifyNow runs again at once; the run number and history grow.
func TestVerifyNowRunsAgain(t *testing.T) {
	server := newServer(t)
	prefix := upload(t, "shop.dump", dumps.custom, false)
	bv := newBV(t, suiteNamespace, server, prefix, func(s *datav1alpha1.BackupVerificationSpec) { s.Checks = datav1alpha1.BackupChecks{} })
	got := waitRun(t, bv, 1)
	got.Spec.VerifyNow = "again"
	if err := k.Update(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	got = waitRun(t, bv, 2)
	if got.Status.LastRun.Trigger != TriggerVerifyNow || got.Status.LastVerifyNow != "again" || len(got.Status.History) != 2 {
		t.Errorf("status: %+v", got.Status)
	}
	expectNoThrowaway(t, got)
	// Deleting it lets it go (the finalizer has nothing left to drop).
	if err := k.Delete(context.Background(), got); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(timeout)
	for k.Get(context.Background(), client.ObjectKeyFromObject(bv), got) == nil {
		if time.Now().After(deadline) {
			t.Fatal("the BackupVerification was not deleted")
		}
		time.Sleep(poll)
	}
}
