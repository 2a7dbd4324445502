package backupverification

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

func TestDue(t *testing.T) {
	created := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	at := func(h, m int) *metav1.Time {
		t := metav1.NewTime(created.Add(time.Duration(h)*time.Hour + time.Duration(m)*time.Minute))
		return &t
	}
	nightly := &datav1alpha1.BackupSchedule{Cron: "0 3 * * *"}
	bv := func(sched *datav1alpha1.BackupSchedule, verifyNow string, st datav1alpha1.BackupVerificationStatus) *datav1alpha1.BackupVerification {
		b := &datav1alpha1.BackupVerification{Spec: datav1alpha1.BackupVerificationSpec{Schedule: sched, VerifyNow: verifyNow}, Status: st}
		b.CreationTimestamp = metav1.NewTime(created)
		return b
	}
	passed := &datav1alpha1.BackupRun{Number: 1, StartTime: at(0, 0), CompletionTime: at(0, 1), Result: datav1alpha1.RunPassed}
	errored := &datav1alpha1.BackupRun{Number: 1, StartTime: at(0, 0), CompletionTime: at(0, 1), Result: datav1alpha1.RunError}
	tests := []struct {
		name        string
		bv          *datav1alpha1.BackupVerification
		now         time.Time
		wantTrigger string
		wantNext    time.Time
	}{
		{"first run at once", bv(nightly, "", datav1alpha1.BackupVerificationStatus{}), created, TriggerInitial, time.Time{}},
		{"waits for the schedule", bv(nightly, "", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: passed}), created.Add(time.Hour),
			"", time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC)},
		{"schedule due", bv(nightly, "", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: passed}), time.Date(2026, 3, 2, 3, 0, 0, 0, time.UTC), TriggerSchedule, time.Time{}},
		{"missed slots: one run", bv(nightly, "", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: passed}), time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC), TriggerSchedule, time.Time{}},
		{"verifyNow token", bv(nightly, "t1", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: passed}), created.Add(time.Hour), TriggerVerifyNow, time.Time{}},
		{"verifyNow handled", bv(nil, "t1", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: passed, LastVerifyNow: "t1"}), created.Add(time.Hour), "", time.Time{}},
		{"error retried after backoff", bv(nightly, "", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: errored, ConsecutiveFailures: 1}), created.Add(time.Minute + 10*time.Second),
			"", created.Add(time.Minute + minRetry)},
		{"error retry due", bv(nil, "", datav1alpha1.BackupVerificationStatus{Runs: 1, LastRun: errored, ConsecutiveFailures: 1}), created.Add(time.Minute + minRetry), TriggerRetry, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			trig, next, err := due(tt.bv, tt.now)
			if err != nil {
				t.Fatal(err)
			}
			if trig != tt.wantTrigger || !next.Equal(tt.wantNext) {
				t.Errorf("due = %q, %s; want %q, %s", trig, next, tt.wantTrigger, tt.wantNext)
			}
		})
	}
}

func TestRetryAfterDoublesUpToAnHour(t *testing.T) {
	want := []time.Duration{minRetry, minRetry, 2 * minRetry, 4 * minRetry}
	for i, w := range want {
		if got := retryAfter(int32(i)); got != w {
			t.Errorf("retryAfter(%d) = %s, want %s", i, got, w)
		}
	}
	if got := retryAfter(100); got != maxRetry {
		t.Errorf("retryAfter(100) = %s, want %s", got, maxRetry)
	}
}
