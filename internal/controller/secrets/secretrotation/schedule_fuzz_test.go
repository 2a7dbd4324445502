package secretrotation

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

// FuzzRotationSchedule validates any interval, cron expression and time zone of a
// SecretRotation and asks when its rotations are due. Properties: a refusal is
// InvalidSpec with a message; an interval under the manager's minimum is refused;
// the next rotation comes strictly after the last one (or the creation), no later
// than interval after it, and at most one rotation is due at a time (due at now means
// next is not after now) — a schedule can never rotate in a loop.
func FuzzRotationSchedule(f *testing.F) {
	for _, s := range []struct {
		interval       int64
		cron, tz       string
		last, now, age int64
	}{
		{int64(time.Hour), "", "", 0, 3600, 0},
		{int64(59 * time.Minute), "", "", 0, 3600, 0},
		{0, "0 0 * *", "", 0, 0, 0},
		{0, "0 0 * * *", "Mars/Olympus", 0, 0, 0},
		{0, "0 3 * * *", "Europe/Berlin", 86400, 5 * 86400, 0},
		{int64(72 * time.Hour), "0 3 * * *", "", 3 * 3600, 4 * 3600, 0},
		{int64(48 * time.Hour), "", "", 0, 86400, 0},
		{0, "30 1 8 * *", "America/Havana", 0, 0, 86400},
		{0, "0 0 31 2 *", "", 0, 0, 0},
	} {
		f.Add(s.interval, s.cron, s.tz, s.last, s.now, s.age)
	}
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, interval int64, cron, tz string, last, now, age int64) {
		sr := &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: "app", Name: "x"}}
		if interval != 0 {
			sr.Spec.Interval = &metav1.Duration{Duration: time.Duration(interval)}
		}
		if cron != "" || tz != "" {
			sr.Spec.Schedule = &secretsv1alpha1.Schedule{Cron: cron, TimeZone: tz}
		}
		w, p := validate(sr, time.Hour, "orderly-system")
		if p != nil {
			if p.reason != ReasonInvalidSpec || p.message == "" {
				t.Fatalf("validate: reason %q, message %q", p.reason, p.message)
			}
			return
		}
		if sr.Spec.Interval != nil && sr.Spec.Interval.Duration < time.Hour {
			t.Fatalf("an interval of %s, under the minimum, was accepted", sr.Spec.Interval.Duration)
		}
		year := int64(365 * 24 * 3600)
		c := created.Add(time.Duration(age%year) * time.Second)
		var l time.Time
		if last != 0 {
			l = c.Add(time.Duration(last%(10*year)) * time.Second)
		}
		n := c.Add(time.Duration(now%(20*year)) * time.Second)
		type answer struct {
			due  bool
			next time.Time
		}
		done := make(chan answer, 1)
		go func() {
			due, next := w.due(l, c, n)
			done <- answer{due, next}
		}()
		var a answer
		select {
		case a = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("due(%s, %s, %s) of %+v did not return within 30s", l, c, n, sr.Spec)
		}
		from := l
		if from.IsZero() {
			from = c
		}
		if a.next.IsZero() {
			if a.due || w.interval > 0 {
				t.Fatalf("due %v with no next time, interval %s", a.due, w.interval)
			}
			return
		}
		if !a.next.After(from) {
			t.Fatalf("the rotation after %s is due at %s, not after it (%+v)", from, a.next, sr.Spec)
		}
		if w.interval > 0 && a.next.After(from.Add(w.interval)) {
			t.Fatalf("the rotation after %s is due at %s, later than its interval %s", from, a.next, w.interval)
		}
		if a.due != !n.Before(a.next) {
			t.Fatalf("due = %v at %s with next %s", a.due, n, a.next)
		}
	})
}
