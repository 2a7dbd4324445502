package sleepschedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func win(days, from, to string) powerv1alpha1.AwakeWindow {
	return powerv1alpha1.AwakeWindow{Days: days, From: from, To: to}
}

func utc(s string) time.Time {
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		panic(err)
	}
	return t
}

var businessHours = []powerv1alpha1.AwakeWindow{win("Mon-Fri", "08:00", "18:00")}

func TestScheduleStateAndNext(t *testing.T) {
	tests := []struct {
		name      string
		tz        string
		awake     []powerv1alpha1.AwakeWindow
		holidays  []string
		wakeUntil string
		now       string
		wantAwake bool
		wantNext  string // empty: no transition within the horizon
	}{
		// 2026-12-02 is a Wednesday.
		{name: "business hours, midday", awake: businessHours, now: "2026-12-02T12:00:00Z", wantAwake: true, wantNext: "2026-12-02T18:00:00Z"},
		{name: "business hours, evening", awake: businessHours, now: "2026-12-02T20:00:00Z", wantNext: "2026-12-03T08:00:00Z"},
		{name: "business hours, at opening", awake: businessHours, now: "2026-12-02T08:00:00Z", wantAwake: true, wantNext: "2026-12-02T18:00:00Z"},
		{name: "business hours, at closing", awake: businessHours, now: "2026-12-02T18:00:00Z", wantNext: "2026-12-03T08:00:00Z"},
		{name: "Friday evening sleeps over the weekend", awake: businessHours, now: "2026-12-04T18:30:00Z", wantNext: "2026-12-07T08:00:00Z"},
		{name: "Saturday", awake: businessHours, now: "2026-12-05T12:00:00Z", wantNext: "2026-12-07T08:00:00Z"},
		{name: "window crossing midnight, before midnight", awake: []powerv1alpha1.AwakeWindow{win("Fri", "22:00", "02:00")}, now: "2026-12-04T23:00:00Z", wantAwake: true, wantNext: "2026-12-05T02:00:00Z"},
		{name: "window crossing midnight, after midnight", awake: []powerv1alpha1.AwakeWindow{win("Fri", "22:00", "02:00")}, now: "2026-12-05T01:00:00Z", wantAwake: true, wantNext: "2026-12-05T02:00:00Z"},
		{name: "window crossing midnight, after it closed", awake: []powerv1alpha1.AwakeWindow{win("Fri", "22:00", "02:00")}, now: "2026-12-05T03:00:00Z", wantNext: "2026-12-11T22:00:00Z"},
		{name: "night shift every weekday", awake: []powerv1alpha1.AwakeWindow{win("Mon-Fri", "20:00", "06:00")}, now: "2026-12-05T05:00:00Z", wantAwake: true, wantNext: "2026-12-05T06:00:00Z"},
		{name: "to 24:00", awake: []powerv1alpha1.AwakeWindow{win("Sat,Sun", "10:00", "24:00")}, now: "2026-12-05T23:00:00Z", wantAwake: true, wantNext: "2026-12-06T00:00:00Z"},
		{name: "adjacent windows do not make a transition", awake: []powerv1alpha1.AwakeWindow{win("Sat", "10:00", "24:00"), win("Sun", "00:00", "12:00")}, now: "2026-12-05T23:00:00Z", wantAwake: true, wantNext: "2026-12-06T12:00:00Z"},
		{name: "wrapping day range", awake: []powerv1alpha1.AwakeWindow{win("Fri-Mon", "09:00", "10:00")}, now: "2026-12-06T09:30:00Z", wantAwake: true, wantNext: "2026-12-06T10:00:00Z"},
		{name: "wrapping day range skips midweek", awake: []powerv1alpha1.AwakeWindow{win("Fri-Mon", "09:00", "10:00")}, now: "2026-12-07T11:00:00Z", wantNext: "2026-12-11T09:00:00Z"},
		{name: "always awake", awake: []powerv1alpha1.AwakeWindow{win("Mon-Sun", "00:00", "24:00")}, now: "2026-12-02T12:00:00Z", wantAwake: true},
		{name: "no windows: always asleep", now: "2026-12-02T12:00:00Z"},
		// 2026-12-25 is a Friday.
		{name: "holiday sleeps all day", awake: businessHours, holidays: []string{"2026-12-25"}, now: "2026-12-25T12:00:00Z", wantNext: "2026-12-28T08:00:00Z"},
		{name: "day before a holiday", awake: businessHours, holidays: []string{"2026-12-25"}, now: "2026-12-24T12:00:00Z", wantAwake: true, wantNext: "2026-12-24T18:00:00Z"},
		{name: "Thursday evening before a holiday skips Friday", awake: businessHours, holidays: []string{"2026-12-25"}, now: "2026-12-24T19:00:00Z", wantNext: "2026-12-28T08:00:00Z"},
		{name: "holiday cuts a window crossing midnight", awake: []powerv1alpha1.AwakeWindow{win("Thu", "22:00", "02:00")}, holidays: []string{"2026-12-25"}, now: "2026-12-24T23:00:00Z", wantAwake: true, wantNext: "2026-12-25T00:00:00Z"},
		{name: "holiday in the schedule's time zone", tz: "Asia/Tokyo", awake: []powerv1alpha1.AwakeWindow{win("Mon-Sun", "00:00", "24:00")}, holidays: []string{"2026-12-25"}, now: "2026-12-24T14:00:00Z", wantAwake: true, wantNext: "2026-12-24T15:00:00Z"},
		{name: "wakeUntil wakes a sleeping schedule", awake: businessHours, wakeUntil: "2026-12-05T14:00:00Z", now: "2026-12-05T12:00:00Z", wantAwake: true, wantNext: "2026-12-05T14:00:00Z"},
		{name: "wakeUntil overrides a holiday", awake: businessHours, holidays: []string{"2026-12-25"}, wakeUntil: "2026-12-25T14:00:00Z", now: "2026-12-25T12:00:00Z", wantAwake: true, wantNext: "2026-12-25T14:00:00Z"},
		{name: "wakeUntil inside a window changes nothing", awake: businessHours, wakeUntil: "2026-12-02T14:00:00Z", now: "2026-12-02T12:00:00Z", wantAwake: true, wantNext: "2026-12-02T18:00:00Z"},
		{name: "wakeUntil across the window's end extends it", awake: businessHours, wakeUntil: "2026-12-02T20:00:00Z", now: "2026-12-02T12:00:00Z", wantAwake: true, wantNext: "2026-12-02T20:00:00Z"},
		{name: "expired wakeUntil", awake: businessHours, wakeUntil: "2026-12-02T06:00:00Z", now: "2026-12-02T07:00:00Z", wantNext: "2026-12-02T08:00:00Z"},
		{name: "no windows, wakeUntil", wakeUntil: "2026-12-02T14:00:00Z", now: "2026-12-02T12:00:00Z", wantAwake: true, wantNext: "2026-12-02T14:00:00Z"},
		// Europe/Berlin: clocks go forward on 2026-03-29 at 02:00 CET (01:00 UTC) and
		// back on 2026-10-25 at 03:00 CEST (01:00 UTC).
		{name: "Berlin winter time", tz: "Europe/Berlin", awake: businessHours, now: "2026-03-27T12:00:00Z", wantAwake: true, wantNext: "2026-03-27T17:00:00Z"},
		{name: "Berlin over the spring-forward weekend", tz: "Europe/Berlin", awake: businessHours, now: "2026-03-27T18:00:00Z", wantNext: "2026-03-30T06:00:00Z"},
		{name: "Berlin summer time", tz: "Europe/Berlin", awake: businessHours, now: "2026-03-30T12:00:00Z", wantAwake: true, wantNext: "2026-03-30T16:00:00Z"},
		{name: "Berlin over the fall-back weekend", tz: "Europe/Berlin", awake: businessHours, now: "2026-10-23T17:00:00Z", wantNext: "2026-10-26T07:00:00Z"},
		{name: "window opening in the spring-forward gap opens when clocks jump", tz: "Europe/Berlin", awake: []powerv1alpha1.AwakeWindow{win("Sun", "02:30", "05:00")}, now: "2026-03-29T00:30:00Z", wantNext: "2026-03-29T01:00:00Z"},
		{name: "window closing in the spring-forward gap closes when clocks jump", tz: "Europe/Berlin", awake: []powerv1alpha1.AwakeWindow{win("Sat", "22:00", "02:30")}, now: "2026-03-28T23:00:00Z", wantAwake: true, wantNext: "2026-03-29T01:00:00Z"},
		{name: "window in the repeated hour opens at the first occurrence", tz: "Europe/Berlin", awake: []powerv1alpha1.AwakeWindow{win("Sun", "02:30", "04:00")}, now: "2026-10-25T00:00:00Z", wantNext: "2026-10-25T00:30:00Z"},
		{name: "window in the repeated hour stays open through it", tz: "Europe/Berlin", awake: []powerv1alpha1.AwakeWindow{win("Sun", "02:30", "04:00")}, now: "2026-10-25T01:15:00Z", wantAwake: true, wantNext: "2026-10-25T03:00:00Z"},
		{name: "New York night window over fall-back", tz: "America/New_York", awake: []powerv1alpha1.AwakeWindow{win("Sat", "20:00", "08:00")}, now: "2026-10-31T23:00:00Z", wantNext: "2026-11-01T00:00:00Z"},
		{name: "New York night window closes in EST", tz: "America/New_York", awake: []powerv1alpha1.AwakeWindow{win("Sat", "20:00", "08:00")}, now: "2026-11-01T05:00:00Z", wantAwake: true, wantNext: "2026-11-01T13:00:00Z"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spec := &powerv1alpha1.SleepScheduleSpec{TimeZone: tt.tz, Awake: tt.awake, Holidays: tt.holidays}
			if tt.wakeUntil != "" {
				spec.WakeUntil = &metav1.Time{Time: utc(tt.wakeUntil)}
			}
			s, err := Parse(spec)
			if err != nil {
				t.Fatal(err)
			}
			now := utc(tt.now)
			if got := s.Awake(now); got != tt.wantAwake {
				t.Errorf("Awake(%s) = %v, want %v", tt.now, got, tt.wantAwake)
			}
			next, ok := s.Next(now)
			switch {
			case tt.wantNext == "" && ok:
				t.Errorf("Next(%s) = %s, want none", tt.now, next.UTC().Format(time.RFC3339))
			case tt.wantNext != "" && !ok:
				t.Errorf("Next(%s) = none, want %s", tt.now, tt.wantNext)
			case tt.wantNext != "" && !next.Equal(utc(tt.wantNext)):
				t.Errorf("Next(%s) = %s, want %s", tt.now, next.UTC().Format(time.RFC3339), tt.wantNext)
			}
			if ok && s.Awake(next) == tt.wantAwake {
				t.Errorf("state at Next(%s) = %v, want a change", tt.now, s.Awake(next))
			}
		})
	}
}

// TestNextIsExact walks a year of a DST zone minute by minute around every transition
// Next reports, checking that the state really changes there and nowhere before.
func TestNextIsExact(t *testing.T) {
	s, err := Parse(&powerv1alpha1.SleepScheduleSpec{TimeZone: "Europe/Berlin",
		Awake:    []powerv1alpha1.AwakeWindow{win("Mon-Fri", "07:30", "19:00"), win("Sat", "23:00", "01:30"), win("Sun", "02:15", "03:45")},
		Holidays: []string{"2026-05-01", "2026-12-24"}})
	if err != nil {
		t.Fatal(err)
	}
	now := utc("2026-01-01T00:00:00Z")
	end := utc("2027-01-01T00:00:00Z")
	for now.Before(end) {
		next, ok := s.Next(now)
		if !ok {
			t.Fatalf("no transition after %s", now)
		}
		state := s.Awake(now)
		for m := now.Add(time.Minute).Truncate(time.Minute); m.Before(next); m = m.Add(time.Minute) {
			if s.Awake(m) != state {
				t.Fatalf("state changed at %s, before Next(%s) = %s", m, now, next)
			}
		}
		if s.Awake(next) == state {
			t.Fatalf("state did not change at Next(%s) = %s", now, next)
		}
		now = next
	}
}

func TestParseRejectsBadInput(t *testing.T) {
	tests := []struct {
		name    string
		spec    powerv1alpha1.SleepScheduleSpec
		wantErr string
	}{
		{"unknown time zone", powerv1alpha1.SleepScheduleSpec{TimeZone: "Mars/Olympus"}, "unknown time zone"},
		{"unknown day", powerv1alpha1.SleepScheduleSpec{Awake: []powerv1alpha1.AwakeWindow{win("Mon-Fry", "08:00", "18:00")}}, "unknown day"},
		{"malformed from", powerv1alpha1.SleepScheduleSpec{Awake: []powerv1alpha1.AwakeWindow{win("Mon", "8:00", "18:00")}}, "malformed time"},
		{"from 24:00", powerv1alpha1.SleepScheduleSpec{Awake: []powerv1alpha1.AwakeWindow{win("Mon", "24:00", "18:00")}}, "malformed time"},
		{"to 25:00", powerv1alpha1.SleepScheduleSpec{Awake: []powerv1alpha1.AwakeWindow{win("Mon", "08:00", "25:00")}}, "malformed time"},
		{"minutes 60", powerv1alpha1.SleepScheduleSpec{Awake: []powerv1alpha1.AwakeWindow{win("Mon", "08:60", "18:00")}}, "malformed time"},
		{"empty window", powerv1alpha1.SleepScheduleSpec{Awake: []powerv1alpha1.AwakeWindow{win("Mon", "08:00", "08:00")}}, "is empty"},
		{"bad holiday", powerv1alpha1.SleepScheduleSpec{Holidays: []string{"2026-02-30"}}, "not a date"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse(&tt.spec)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Parse() error = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseDays(t *testing.T) {
	tests := map[string][]time.Weekday{
		"Mon-Fri":     {time.Monday, time.Tuesday, time.Wednesday, time.Thursday, time.Friday},
		"Sat,Sun":     {time.Saturday, time.Sunday},
		"Fri-Mon":     {time.Friday, time.Saturday, time.Sunday, time.Monday},
		"Mon,Wed-Thu": {time.Monday, time.Wednesday, time.Thursday},
		"Sun":         {time.Sunday},
	}
	for in, want := range tests {
		got, err := parseDays(in)
		if err != nil {
			t.Fatal(err)
		}
		var wantSet [7]bool
		for _, d := range want {
			wantSet[d] = true
		}
		if got != wantSet {
			t.Errorf("parseDays(%q) = %v, want %v", in, got, wantSet)
		}
	}
}
