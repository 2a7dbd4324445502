package kit

import (
	"testing"
	"time"
)

func mustCronTime(t *testing.T, s string, loc *time.Location) time.Time {
	t.Helper()
	tm, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

func TestCronNext(t *testing.T) {
	// The kit links time/tzdata: every zone resolves on any host.
	berlin, err := time.LoadLocation("Europe/Berlin")
	if err != nil {
		t.Fatal(err)
	}
	havana, err := time.LoadLocation("America/Havana")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		cron, after, want string
		loc               *time.Location
	}{
		{"0 3 * * *", "2026-03-01 12:00", "2026-03-02 03:00", time.UTC},
		{"*/15 * * * *", "2026-03-01 12:07", "2026-03-01 12:15", time.UTC},
		{"0 0 1 * *", "2026-01-31 10:00", "2026-02-01 00:00", time.UTC},
		{"30 8 * * 1-5", "2026-03-06 09:00", "2026-03-09 08:30", time.UTC}, // Friday after → Monday
		{"0 0 * * 7", "2026-03-02 00:00", "2026-03-08 00:00", time.UTC},    // 7 is Sunday
		{"0 9 * JAN-mar Mon-FRI", "2026-03-31 10:00", "2027-01-01 09:00", time.UTC},
		{"0 0 * * sun", "2026-03-02 00:00", "2026-03-08 00:00", time.UTC},
		{"0 12 15 * 1", "2026-03-10 13:00", "2026-03-15 12:00", time.UTC}, // either day field matches (15th is a Sunday; Monday 16 later)
		// 02:30 does not exist in Berlin on 2026-03-29 (DST starts): next day.
		{"30 2 * * *", "2026-03-28 03:00", "2026-03-30 02:30", berlin},
		// Havana's clocks jump from 23:59 to 01:00 on 2026-03-08: that day has no
		// midnight (Next looped on the evening before, found by FuzzCron).
		{"0 12 * * *", "2026-03-07 13:00", "2026-03-08 12:00", havana},
		{"0 0 * * *", "2026-03-07 13:00", "2026-03-09 00:00", havana},
		{"30 1 8 * *", "2026-02-10 00:00", "2026-03-08 01:30", havana},
		// A step beyond int's range overflowed the loop over the field's values
		// (found by FuzzCron): it names the first value only.
		{"1/9223372036854775807 * * * *", "2026-03-01 12:00", "2026-03-01 12:01", time.UTC},
		{"7-59/100 0 * * *", "2026-03-01 12:00", "2026-03-02 00:07", time.UTC},
	}
	for _, tt := range tests {
		c, err := ParseCron(tt.cron)
		if err != nil {
			t.Fatalf("%s: %v", tt.cron, err)
		}
		got := c.Next(mustCronTime(t, tt.after, tt.loc), tt.loc)
		if want := mustCronTime(t, tt.want, tt.loc); !got.Equal(want) {
			t.Errorf("%q after %s: got %s, want %s", tt.cron, tt.after, got.In(tt.loc), want)
		}
	}
	for _, bad := range []string{"* * * *", "61 * * * *", "* * * * 8", "*/0 * * * *", "a * * * *", "5-1 * * * *", "0 0 * jan-foo *", "0 0 * * sunday", "0 0 mon * *"} {
		if _, err := ParseCron(bad); err == nil {
			t.Errorf("%q: want an error", bad)
		}
	}
}
