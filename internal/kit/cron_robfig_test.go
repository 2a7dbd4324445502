package kit

import (
	"testing"
	"time"

	"github.com/robfig/cron/v3"
)

// TestCronAgainstRobfig compares ParseCron with github.com/robfig/cron/v3, the parser
// of Kubernetes' CronJob controller, and shows why the kit keeps its own (cron.go):
// the same next times everywhere but for the two differences below.
func TestCronAgainstRobfig(t *testing.T) {
	exprs := []string{"30 2 * * *", "30 1 * * *", "0 0 * * *", "*/15 * * * *", "0 9 * * 1-5", "0 9 * * mon-fri",
		"0 0 1 * 0", "0 0 31 2 *", "0 0 29 2 *", "0 12 1,15 * *", "5 4 * jan,jul sun", "0 8-18/2 * * *"}
	zones := []string{"UTC", "America/New_York", "Europe/Berlin", "America/Havana", "Asia/Beirut", "America/Sao_Paulo", "Asia/Kolkata"}
	for _, expr := range exprs {
		ours, err := ParseCron(expr)
		if err != nil {
			t.Fatalf("%q: %v", expr, err)
		}
		theirs, err := cron.ParseStandard(expr)
		if err != nil {
			t.Fatalf("robfig %q: %v", expr, err)
		}
		for _, z := range zones {
			loc, err := time.LoadLocation(z)
			if err != nil {
				t.Fatal(err)
			}
			// From a day before each of five years' clock changes in the zone (Havana's
			// and Beirut's midnight jumps, Sao Paulo's last ones among them), the next
			// runs agree.
			for _, start := range clockChanges(loc, 2018, 2023) {
				a := start.Add(-24 * time.Hour)
				b := a
				for i := 0; i < 120 && !a.IsZero(); i++ {
					na, nb := ours.Next(a, loc), theirs.Next(b.In(loc))
					if !na.Equal(nb) {
						t.Fatalf("%q in %s after %s: ours %s, robfig %s", expr, z, a.In(loc), na, nb)
					}
					a, b = na, nb
				}
			}
		}
	}

	// Difference 1: day-of-week 7 is Sunday in cron(5) and here; robfig refuses it.
	if _, err := cron.ParseStandard("0 0 * * 7"); err == nil {
		t.Error("robfig now takes day-of-week 7: cron.go's comment is out of date")
	}
	if _, err := ParseCron("0 0 * * 7"); err != nil {
		t.Error(err)
	}

	// Difference 2: where DST moves clocks by half an hour, robfig skips a day at the
	// autumn change and fires twice at the spring one.
	lordHowe, err := time.LoadLocation("Australia/Lord_Howe")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		expr        string
		after       time.Time
		want, their time.Time
	}{
		// Clocks go back from 02:00 +11 to 01:30 +1030 on 2018-04-01.
		{"0 0 * * *", time.Date(2018, 4, 1, 0, 0, 0, 0, lordHowe),
			time.Date(2018, 4, 2, 0, 0, 0, 0, lordHowe), time.Date(2018, 4, 3, 0, 0, 0, 0, lordHowe)},
		// Clocks jump from 02:00 +1030 to 02:30 +11 on 2018-10-07: 01:30 was that day's run.
		{"30 1 * * *", time.Date(2018, 10, 7, 1, 30, 0, 0, lordHowe),
			time.Date(2018, 10, 8, 1, 30, 0, 0, lordHowe), time.Date(2018, 10, 7, 2, 30, 0, 0, lordHowe)},
	} {
		ours, _ := ParseCron(tc.expr)
		theirs, _ := cron.ParseStandard(tc.expr)
		if got := ours.Next(tc.after, lordHowe); !got.Equal(tc.want) {
			t.Errorf("%q after %s: ours %s, want %s", tc.expr, tc.after, got, tc.want)
		}
		if got := theirs.Next(tc.after); !got.Equal(tc.their) {
			t.Errorf("%q after %s: robfig now says %s (was %s): cron.go's comment may be out of date", tc.expr, tc.after, got, tc.their)
		}
	}
}

// clockChanges are the instants loc's offset changes between the years from and to,
// and the first instant of from (for a zone without changes).
func clockChanges(loc *time.Location, from, to int) []time.Time {
	t := time.Date(from, 1, 1, 0, 0, 0, 0, loc)
	out := []time.Time{t}
	end := time.Date(to, 1, 1, 0, 0, 0, 0, loc)
	for {
		_, next := t.ZoneBounds()
		if next.IsZero() || next.After(end) {
			return out
		}
		out = append(out, next)
		t = next
	}
}
