package backupverification

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

func TestFinishRun(t *testing.T) {
	now := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	var st datav1alpha1.BackupVerificationStatus
	st.CurrentRun = &datav1alpha1.BackupRunInProgress{Number: 1}
	finishRun(&st, 3, datav1alpha1.BackupRun{Number: 1, Result: datav1alpha1.RunFailed, Reason: ReasonChecksumMismatch, Message: "bad"}, now)
	if st.CurrentRun != nil || st.ConsecutiveFailures != 1 || st.LastSuccessTime != nil {
		t.Fatalf("after a failure: %+v", st)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c == nil || c.Status != "False" || c.Reason != ReasonChecksumMismatch || c.ObservedGeneration != 3 {
		t.Fatalf("Ready after a failure: %+v", c)
	}
	finishRun(&st, 3, datav1alpha1.BackupRun{Number: 2, Result: datav1alpha1.RunError, Reason: ReasonBucketNotFound, Message: "no bucket"}, now)
	if c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionSourceAvailable); c == nil || c.Status != "False" || c.Reason != ReasonBucketNotFound {
		t.Fatalf("SourceAvailable: %+v", c)
	}
	for i := 3; i < 20; i++ {
		finishRun(&st, 3, datav1alpha1.BackupRun{Number: int64(i), Result: datav1alpha1.RunPassed, Reason: ReasonPassed, Message: fmt.Sprint(i),
			Backup: &datav1alpha1.BackupObject{Key: "k"}}, now)
	}
	if st.ConsecutiveFailures != 0 || st.LastSuccessTime == nil || st.LastPassedBackup == nil {
		t.Fatalf("after passing: %+v", st)
	}
	if len(st.History) != datav1alpha1.MaxBackupVerificationHistory || st.History[0].Number != 19 {
		t.Fatalf("history: %d entries, first %d", len(st.History), st.History[0].Number)
	}
	if c := meta.FindStatusCondition(st.Conditions, "Ready"); c.Status != "True" {
		t.Fatalf("Ready: %+v", c)
	}
}
