package kit

import (
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zones below, whatever the machine has
)

// fuzzZones are the zones a fuzzed schedule runs in: UTC, ordinary DST, and the
// awkward ones (clocks that jump over midnight, half-hour shifts, a skipped day).
var fuzzZones = []string{
	"UTC", "Europe/Berlin", "America/New_York", "America/Sao_Paulo", "Asia/Beirut",
	"America/Havana", "America/Santiago", "Australia/Lord_Howe", "Asia/Kolkata", "Pacific/Apia",
	"Pacific/Chatham", "America/Asuncion",
}

// fuzzTimeout bounds one call: a schedule that makes Next loop must fail the target,
// not hang it.
const fuzzTimeout = 30 * time.Second

// FuzzCron parses any expression and, when it parses, asks for the next time after
// any instant of 2000-2090 in any of fuzzZones. Properties: a refusal is an error
// that names the expression; Next returns in bounded time a minute-aligned instant
// strictly after the one given that matches every field; when it is less than two
// days away no earlier minute matches; and it returns the zero time only for an
// expression that can never match (a day of the month no listed month has).
func FuzzCron(f *testing.F) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC).Unix()
	for _, expr := range []string{
		"0 3 * * *", "*/15 * * * *", "0 0 1 * *", "30 8 * * 1-5", "0 0 * * 7", "0 12 15 * 1", "30 2 * * *",
		"* * * *", "61 * * * *", "* * * * 8", "*/0 * * * *", "a * * * *", "5-1 * * * *",
		"0 0 31 2 *", "0 0 29 2 *", "0,30 8-18/2 * * Mon", "0 0 10 * *", "1/9223372036854775807 * * * *",
	} {
		for z := range fuzzZones {
			f.Add(expr, at, uint8(z))
		}
	}
	// America/Sao_Paulo's clocks jumped from 23:59 to 01:00 on 2018-11-04: there was
	// no midnight, and Next looped on the day before it.
	f.Add("0 12 10 * *", time.Date(2018, 10, 13, 3, 0, 0, 0, time.UTC).Unix(), uint8(3))
	f.Add("0 0 1 * *", time.Date(2018, 10, 13, 3, 0, 0, 0, time.UTC).Unix(), uint8(3))
	f.Fuzz(func(t *testing.T, expr string, unix int64, zone uint8) {
		c, err := ParseCron(expr)
		if err != nil {
			if !strings.Contains(err.Error(), "cron ") || len(err.Error()) < len("cron : x") {
				t.Fatalf("ParseCron(%q): the error %q does not say what is wrong with which expression", expr, err)
			}
			return
		}
		loc, err := time.LoadLocation(fuzzZones[int(zone)%len(fuzzZones)])
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := time.Date(2000, 1, 1, 0, 0, 0, 0, time.UTC).Unix(), time.Date(2090, 1, 1, 0, 0, 0, 0, time.UTC).Unix()
		after := time.Unix(lo+mod(unix-lo, hi-lo), 0).In(loc)

		done := make(chan time.Time, 1)
		go func() { done <- c.Next(after, loc) }()
		var next time.Time
		select {
		case next = <-done:
		case <-time.After(fuzzTimeout):
			t.Fatalf("Next(%q, %s in %s) did not return within %s", expr, after, loc, fuzzTimeout)
		}

		if next.IsZero() {
			if feasible(c) {
				t.Fatalf("Next(%q, %s in %s) found no time, but the expression can match", expr, after, loc)
			}
			return
		}
		if !next.After(after) {
			t.Fatalf("Next(%q, %s) = %s, not after it", expr, after, next)
		}
		if !c.matches(next.In(loc)) {
			t.Fatalf("Next(%q, %s) = %s, which the expression does not name", expr, after, next.In(loc))
		}
		if next.Sub(after) < 48*time.Hour {
			for m := after.Truncate(time.Minute).Add(time.Minute); m.Before(next); m = m.Add(time.Minute) {
				if c.matches(m.In(loc)) {
					t.Fatalf("Next(%q, %s) = %s, but %s matches earlier", expr, after, next.In(loc), m.In(loc))
				}
			}
		}
	})
}

func mod(a, n int64) int64 { return ((a % n) + n) % n }

// matches says whether the local time t (whole minutes only) is one the expression
// names.
func (c *Cron) matches(t time.Time) bool {
	return t.Second() == 0 && t.Nanosecond() == 0 && c.minute[t.Minute()] && c.hour[t.Hour()] &&
		c.month[int(t.Month())] && c.dayMatches(t)
}

// feasible says whether some date has a month and a day the expression names (with
// a leap year in any five years before 2090).
func feasible(c *Cron) bool {
	if !c.dowStar || c.domStar {
		return true // every week has every weekday, every month a 1st
	}
	days := [13]int{0, 31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31}
	for m := 1; m <= 12; m++ {
		for d := 1; d <= days[m]; d++ {
			if c.month[m] && c.dom[d] {
				return true
			}
		}
	}
	return false
}
