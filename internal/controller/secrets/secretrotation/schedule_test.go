package secretrotation

import (
	"testing"
	"time"

	"orderly.dev/orderly/internal/kit"
)

func mustTime(t *testing.T, s string, loc *time.Location) time.Time {
	t.Helper()
	tm, err := time.ParseInLocation("2006-01-02 15:04", s, loc)
	if err != nil {
		t.Fatal(err)
	}
	return tm
}

// A manager down for many slots catches up with one rotation, and the next one is
// due a whole period after it, not at the next missed slot.
func TestDueCatchesUpOnce(t *testing.T) {
	created := mustTime(t, "2026-01-01 00:00", time.UTC)
	daily, _ := kit.ParseCron("0 3 * * *")
	tests := []struct {
		name     string
		w        when
		last     string // empty: never rotated
		now      string
		wantDue  bool
		wantNext string
	}{
		{"interval not yet", when{interval: 24 * time.Hour}, "2026-01-10 00:00", "2026-01-10 12:00", false, "2026-01-11 00:00"},
		{"interval due", when{interval: 24 * time.Hour}, "2026-01-10 00:00", "2026-01-11 00:00", true, "2026-01-11 00:00"},
		{"interval: ten days missed, one rotation", when{interval: 24 * time.Hour}, "2026-01-10 00:00", "2026-01-20 05:00", true, "2026-01-11 00:00"},
		{"schedule: five slots missed, one rotation", when{cron: daily, loc: time.UTC}, "2026-01-10 03:00", "2026-01-15 12:00", true, "2026-01-11 03:00"},
		{"schedule: after the catch-up, the next slot", when{cron: daily, loc: time.UTC}, "2026-01-15 12:00", "2026-01-15 12:01", false, "2026-01-16 03:00"},
		{"interval and schedule: the first of the two", when{interval: 72 * time.Hour, cron: daily, loc: time.UTC}, "2026-01-10 03:00", "2026-01-10 04:00", false, "2026-01-11 03:00"},
		{"never rotated: counted from creation", when{interval: 48 * time.Hour}, "", "2026-01-02 00:00", false, "2026-01-03 00:00"},
		{"nothing scheduled", when{}, "2026-01-10 00:00", "2026-02-10 00:00", false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var last time.Time
			if tt.last != "" {
				last = mustTime(t, tt.last, time.UTC)
			}
			due, next := tt.w.due(last, created, mustTime(t, tt.now, time.UTC))
			if due != tt.wantDue {
				t.Errorf("due = %v, want %v", due, tt.wantDue)
			}
			var want time.Time
			if tt.wantNext != "" {
				want = mustTime(t, tt.wantNext, time.UTC)
			}
			if !next.Equal(want) {
				t.Errorf("next = %s, want %s", next, want)
			}
		})
	}
}
