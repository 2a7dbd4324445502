package backupverification

import (
	"time"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Triggers of a run.
const (
	TriggerInitial   = "Initial"
	TriggerSchedule  = "Schedule"
	TriggerVerifyNow = "VerifyNow"
	TriggerRetry     = "Retry"
)

// Backoff after a run that could not judge the backup (RunError): doubling from
// minRetry to maxRetry, so a missing bucket or bad credentials are retried, and
// reported, without hammering the store.
const (
	minRetry = 30 * time.Second
	maxRetry = time.Hour
)

// retryAfter is the wait before retrying after failures consecutive errors.
func retryAfter(failures int32) time.Duration {
	d := minRetry
	for i := int32(1); i < failures && d < maxRetry; i++ {
		d *= 2
	}
	return min(d, maxRetry)
}

// nextScheduled is the schedule's first time after from; zero without a schedule.
func nextScheduled(s *datav1alpha1.BackupSchedule, from time.Time) (time.Time, error) {
	if s == nil {
		return time.Time{}, nil
	}
	c, err := kit.ParseCron(s.Cron)
	if err != nil {
		return time.Time{}, err
	}
	loc, err := kit.LoadLocation(s.TimeZone)
	if err != nil {
		return time.Time{}, err
	}
	return c.Next(from, loc), nil
}

// due says whether a run is due at now, with its trigger, and otherwise when the
// next one is (zero for never). Only one run is due however many slots a stopped
// manager missed: the schedule counts from the last run's start.
func due(bv *datav1alpha1.BackupVerification, now time.Time) (string, time.Time, error) {
	st := bv.Status
	if st.Runs == 0 && st.LastRun == nil {
		return TriggerInitial, time.Time{}, nil
	}
	if bv.Spec.VerifyNow != "" && bv.Spec.VerifyNow != st.LastVerifyNow {
		return TriggerVerifyNow, time.Time{}, nil
	}
	from := bv.CreationTimestamp.Time
	if st.LastRun != nil && st.LastRun.StartTime != nil {
		from = st.LastRun.StartTime.Time
	}
	next, err := nextScheduled(bv.Spec.Schedule, from)
	if err != nil {
		return "", time.Time{}, err
	}
	if st.LastRun != nil && st.LastRun.Result == datav1alpha1.RunError && st.LastRun.CompletionTime != nil {
		retry := st.LastRun.CompletionTime.Add(retryAfter(st.ConsecutiveFailures))
		if next.IsZero() || retry.Before(next) {
			if !now.Before(retry) {
				return TriggerRetry, time.Time{}, nil
			}
			next = retry
		}
	}
	if !next.IsZero() && !now.Before(next) {
		return TriggerSchedule, time.Time{}, nil
	}
	return "", next, nil
}
