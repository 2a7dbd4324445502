package sleepschedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// fuzzTimeout bounds one call of a schedule's Next: a spec that makes it loop must
// fail the target, not hang it.
const fuzzTimeout = 30 * time.Second

// fuzzZones are time zones a fuzzed schedule may name by number (besides any string):
// ordinary DST, clocks that jump over midnight, half-hour and 45-minute offsets, a
// skipped day.
var fuzzZones = []string{"", "UTC", "Europe/Berlin", "America/New_York", "Asia/Tokyo", "America/Havana",
	"Asia/Beirut", "America/Sao_Paulo", "Australia/Lord_Howe", "Pacific/Chatham", "Pacific/Apia", "Asia/Kathmandu"}

// FuzzParseSchedule reads a SleepSchedule spec of up to two awake windows, a holiday
// and a wakeUntil, and asks for its state and next transition at any instant of
// 2000-2090. Properties: a refusal says which field is wrong; Next returns in
// bounded time an instant strictly after now at which the state differs from now's,
// and the state does not change before it (every minute when it is less than two
// days away, else at a sample of instants); with no transition, the state stays as
// it is over the next two weeks.
func FuzzParseSchedule(f *testing.F) {
	now := utc("2026-12-02T12:00:00Z").Unix()
	for _, s := range []struct {
		tz                  string
		d1, f1, t1          string
		d2, f2, t2, holiday string
		wakeUntil           int64
		now                 int64
	}{
		{"", "Mon-Fri", "08:00", "18:00", "", "", "", "", 0, now},
		{"", "Fri", "22:00", "02:00", "", "", "", "", 0, utc("2026-12-04T23:00:00Z").Unix()},
		{"", "Sat,Sun", "10:00", "24:00", "", "", "", "", 0, utc("2026-12-05T23:00:00Z").Unix()},
		{"", "Sat", "10:00", "24:00", "Sun", "00:00", "12:00", "", 0, utc("2026-12-05T23:00:00Z").Unix()},
		{"", "Fri-Mon", "09:00", "10:00", "", "", "", "", 0, utc("2026-12-06T09:30:00Z").Unix()},
		{"", "Mon-Sun", "00:00", "24:00", "", "", "", "", 0, now},
		{"", "Mon-Fri", "08:00", "18:00", "", "", "", "2026-12-25", 0, utc("2026-12-24T19:00:00Z").Unix()},
		{"", "Thu", "22:00", "02:00", "", "", "", "2026-12-25", 0, utc("2026-12-24T23:00:00Z").Unix()},
		{"Asia/Tokyo", "Mon-Sun", "00:00", "24:00", "", "", "", "2026-12-25", 0, utc("2026-12-24T14:00:00Z").Unix()},
		{"", "Mon-Fri", "08:00", "18:00", "", "", "", "", 2 * 3600, utc("2026-12-05T12:00:00Z").Unix()},
		{"Europe/Berlin", "Mon-Fri", "08:00", "18:00", "", "", "", "", 0, utc("2026-03-27T18:00:00Z").Unix()},
		{"Europe/Berlin", "Sun", "02:30", "05:00", "", "", "", "", 0, utc("2026-03-29T00:30:00Z").Unix()},
		{"Europe/Berlin", "Sat", "22:00", "02:30", "", "", "", "", 0, utc("2026-03-28T23:00:00Z").Unix()},
		{"Europe/Berlin", "Sun", "02:30", "04:00", "", "", "", "", 0, utc("2026-10-25T00:00:00Z").Unix()},
		{"America/New_York", "Sat", "20:00", "08:00", "", "", "", "", 0, utc("2026-10-31T23:00:00Z").Unix()},
		{"America/Havana", "Sat,Sun", "00:00", "02:00", "", "", "", "", 0, utc("2026-03-07T12:00:00Z").Unix()},
		// TestParseRejectsBadInput's.
		{"Mars/Olympus", "", "", "", "", "", "", "", 0, now},
		{"", "Mon-Fry", "08:00", "18:00", "", "", "", "", 0, now},
		{"", "Mon", "8:00", "18:00", "", "", "", "", 0, now},
		{"", "Mon", "24:00", "18:00", "", "", "", "", 0, now},
		{"", "Mon", "08:00", "25:00", "", "", "", "", 0, now},
		{"", "Mon", "08:60", "18:00", "", "", "", "", 0, now},
		{"", "Mon", "08:00", "08:00", "", "", "", "", 0, now},
		{"", "", "", "", "", "", "", "2026-02-30", 0, now},
	} {
		f.Add(s.tz, s.d1, s.f1, s.t1, s.d2, s.f2, s.t2, s.holiday, s.wakeUntil, s.now)
	}
	f.Fuzz(func(t *testing.T, tz, d1, f1, t1, d2, f2, t2, holiday string, wakeUntil, unix int64) {
		if len(tz) == 1 {
			tz = fuzzZones[int(tz[0])%len(fuzzZones)]
		}
		spec := &powerv1alpha1.SleepScheduleSpec{TimeZone: tz}
		if d1 != "" || f1 != "" || t1 != "" {
			spec.Awake = append(spec.Awake, win(d1, f1, t1))
		}
		if d2 != "" || f2 != "" || t2 != "" {
			spec.Awake = append(spec.Awake, win(d2, f2, t2))
		}
		if holiday != "" {
			spec.Holidays = []string{holiday}
		}
		lo, hi := utc("2000-01-01T00:00:00Z").Unix(), utc("2090-01-01T00:00:00Z").Unix()
		now := time.Unix(lo+((unix-lo)%(hi-lo)+(hi-lo))%(hi-lo), 0)
		if wakeUntil != 0 {
			spec.WakeUntil = &metav1.Time{Time: now.Add(time.Duration(wakeUntil%(30*24*3600)) * time.Second)}
		}
		s, err := Parse(spec)
		if err != nil {
			msg := err.Error()
			if !strings.Contains(msg, "time zone") && !strings.Contains(msg, "awake[") && !strings.Contains(msg, "holiday") {
				t.Fatalf("Parse(%+v): the error %q does not say which field is wrong", spec, msg)
			}
			return
		}

		type answer struct {
			next time.Time
			ok   bool
		}
		done := make(chan answer, 1)
		go func() {
			next, ok := s.Next(now)
			done <- answer{next, ok}
		}()
		var a answer
		select {
		case a = <-done:
		case <-time.After(fuzzTimeout):
			t.Fatalf("Next(%s) of %+v did not return within %s", now, spec, fuzzTimeout)
		}

		state := s.Awake(now)
		if !a.ok {
			for at := now; at.Before(now.Add(14 * 24 * time.Hour)); at = at.Add(47 * time.Minute) {
				if s.Awake(at) != state {
					t.Fatalf("Next(%s) of %+v = none, but the state changes by %s", now, spec, at)
				}
			}
			return
		}
		if !a.next.After(now) {
			t.Fatalf("Next(%s) of %+v = %s, not after now", now, spec, a.next)
		}
		if s.Awake(a.next) == state {
			t.Fatalf("Next(%s) of %+v = %s, where the state (awake %v) does not change", now, spec, a.next, state)
		}
		check := func(at time.Time) {
			if at.After(now) && at.Before(a.next) && s.Awake(at) != state {
				t.Fatalf("Next(%s) of %+v = %s, but the state changes at %s already", now, spec, a.next, at)
			}
		}
		if a.next.Sub(now) < 48*time.Hour {
			for m := now.Truncate(time.Minute).Add(time.Minute); m.Before(a.next); m = m.Add(time.Minute) {
				check(m)
			}
		} else {
			for at := now; at.Before(a.next); at = at.Add(a.next.Sub(now)/97 + time.Second) {
				check(at)
			}
		}
		check(a.next.Add(-time.Nanosecond))
		check(a.next.Add(-time.Second))
	})
}
