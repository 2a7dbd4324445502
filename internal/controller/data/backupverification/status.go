package backupverification

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Reasons of conditions and runs not named elsewhere.
const (
	ReasonPassed           = "Passed"
	ReasonAlreadyVerified  = "AlreadyVerified"
	ReasonBackupTooOld     = "BackupTooOld"
	ReasonNeverRun         = "NeverRun"
	ReasonTargetNotAllowed = "TargetNotAllowed"
	ReasonTargetNotFound   = "TargetNotFound"
	ReasonTargetError      = "TargetUnavailable"
	ReasonInterrupted      = "Interrupted"
	ReasonRunning          = "Running"
)

// sourceReasons are the run reasons that say the source could not be read.
var sourceReasons = map[string]bool{
	ReasonNoBackup: true, ReasonBucketNotFound: true, ReasonAccessDenied: true,
	ReasonSourceUnreachable: true, ReasonCredentials: true, ReasonCertificateNotTrusted: true,
}

// finishRun folds a finished run into st: lastRun, history, counters, conditions.
// Pure: it takes the status the API server has and returns nothing but st's change.
func finishRun(st *datav1alpha1.BackupVerificationStatus, generation int64, run datav1alpha1.BackupRun, now time.Time) {
	st.LastRun = &run
	st.CurrentRun = nil
	if run.Result == datav1alpha1.RunPassed {
		t := metav1.NewTime(now)
		st.LastSuccessTime = &t
		st.ConsecutiveFailures = 0
		if run.Backup != nil {
			b := *run.Backup
			st.LastPassedBackup = &b
		}
	} else {
		st.ConsecutiveFailures++
	}
	sum := datav1alpha1.BackupRunSummary{Number: run.Number, StartTime: run.StartTime, Result: run.Result, Reason: run.Reason, RestoreDuration: run.RestoreDuration}
	if run.Backup != nil {
		sum.Key = run.Backup.Key
	}
	st.History = append([]datav1alpha1.BackupRunSummary{sum}, st.History...)
	if len(st.History) > datav1alpha1.MaxBackupVerificationHistory {
		st.History = st.History[:datav1alpha1.MaxBackupVerificationHistory]
	}
	setConditions(st, generation)
}

// setConditions derives the conditions from st's last run.
func setConditions(st *datav1alpha1.BackupVerificationStatus, generation int64) {
	st.ObservedGeneration = generation
	c := kit.ConditionsOf(&st.Conditions, generation)
	run := st.LastRun
	if run == nil {
		c.Unknown("Ready", ReasonNeverRun, "no verification has run yet")
		c.Unknown(datav1alpha1.ConditionVerified, ReasonNeverRun, "no verification has run yet")
		return
	}
	msg := fmt.Sprintf("run %d: %s", run.Number, run.Message)
	switch {
	case sourceReasons[run.Reason]:
		c.False(datav1alpha1.ConditionSourceAvailable, run.Reason, msg)
	case run.Backup != nil:
		c.True(datav1alpha1.ConditionSourceAvailable, "Listed", fmt.Sprintf("newest backup %s", run.Backup.Key))
	}
	switch run.Result {
	case datav1alpha1.RunPassed:
		c.True(datav1alpha1.ConditionVerified, run.Reason, msg)
		c.True("Ready", run.Reason, msg)
	case datav1alpha1.RunFailed:
		c.False(datav1alpha1.ConditionVerified, run.Reason, msg)
		c.False("Ready", run.Reason, msg)
	default:
		c.Unknown(datav1alpha1.ConditionVerified, run.Reason, msg)
		c.False("Ready", run.Reason, msg)
	}
}

// verdict sets a run's result, reason and message.
func verdict(run *datav1alpha1.BackupRun, result datav1alpha1.BackupRunResult, reason, msg string) {
	run.Result, run.Reason, run.Message = result, reason, kit.Truncate(msg, 1024)
}
