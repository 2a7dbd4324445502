package kit

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Cron schedules are shared by the controllers that run on a schedule: the same
// five-field syntax, and the same rules for day fields and DST gaps, everywhere.
//
// Orderly keeps its own parser rather than github.com/robfig/cron/v3 (what Kubernetes'
// CronJob controller uses) because that library gets two things wrong that schedules
// rely on, shown by TestCronAgainstRobfig: where DST moves clocks by half an hour
// (Australia/Lord_Howe) its Next skips a whole day at the autumn change and fires twice
// at the spring one, and it refuses day-of-week 7 (Sunday), which cron(5) and existing
// SecretRotation and BackupVerification schedules use. Everything else — fields,
// names, lists, ranges, steps, the either-day rule, a DST gap's times not happening —
// matches it.

// Cron is a parsed five-field cron expression: the allowed values of each field.
type Cron struct {
	minute, hour, dom, month, dow [64]bool
	// domStar and dowStar: when both day fields are restricted, a day matches either
	// (cron's traditional rule).
	domStar, dowStar bool
}

// Names of months and days of the week, as cron(5) takes them (any case).
var (
	monthNames = map[string]int{"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12}
	dayNames   = map[string]int{"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6}
)

// ParseCron parses "minute hour day-of-month month day-of-week" with *, lists,
// ranges and steps (*/15, 1-5, 0,30, 8-18/2), and names of months and days (jan,
// mon-fri). Day-of-week 7 is Sunday, like 0.
func ParseCron(expr string) (*Cron, error) {
	fields := strings.Fields(expr)
	if len(fields) != 5 {
		return nil, fmt.Errorf("cron %q: want 5 fields (minute hour day-of-month month day-of-week), got %d", expr, len(fields))
	}
	var c Cron
	bounds := []struct {
		set      *[64]bool
		min, max int
		name     string
		names    map[string]int
	}{{&c.minute, 0, 59, "minute", nil}, {&c.hour, 0, 23, "hour", nil}, {&c.dom, 1, 31, "day-of-month", nil}, {&c.month, 1, 12, "month", monthNames}, {&c.dow, 0, 7, "day-of-week", dayNames}}
	for i, b := range bounds {
		if err := parseField(fields[i], b.min, b.max, b.set, b.names); err != nil {
			return nil, fmt.Errorf("cron %q: %s: %w", expr, b.name, err)
		}
	}
	if c.dow[7] {
		c.dow[0] = true
	}
	c.domStar, c.dowStar = fields[2] == "*", fields[4] == "*"
	return &c, nil
}

// fieldValue is a number, or one of names.
func fieldValue(s string, names map[string]int) (int, error) {
	if v, ok := names[strings.ToLower(s)]; ok {
		return v, nil
	}
	return strconv.Atoi(s)
}

func parseField(f string, min, max int, set *[64]bool, names map[string]int) error {
	for part := range strings.SplitSeq(f, ",") {
		rng, stepS, hasStep := strings.Cut(part, "/")
		step := 1
		if hasStep {
			s, err := strconv.Atoi(stepS)
			if err != nil || s <= 0 {
				return fmt.Errorf("bad step %q", stepS)
			}
			// A step past the field's range names its first value only; bounded, it
			// cannot overflow the loop below.
			step = s
			if step > max {
				step = max + 1
			}
		}
		lo, hi := min, max
		switch {
		case rng == "*":
		case strings.Contains(rng, "-"):
			a, b, _ := strings.Cut(rng, "-")
			var err1, err2 error
			lo, err1 = fieldValue(a, names)
			hi, err2 = fieldValue(b, names)
			if err1 != nil || err2 != nil {
				return fmt.Errorf("bad range %q", rng)
			}
		default:
			v, err := fieldValue(rng, names)
			if err != nil {
				return fmt.Errorf("bad value %q", rng)
			}
			lo, hi = v, v
			if hasStep {
				hi = max
			}
		}
		if lo < min || hi > max || lo > hi {
			return fmt.Errorf("%q is outside %d-%d", part, min, max)
		}
		for v := lo; v <= hi; v += step {
			set[v] = true
		}
	}
	return nil
}

func (c *Cron) dayMatches(t time.Time) bool {
	dom, dow := c.dom[t.Day()], c.dow[int(t.Weekday())]
	switch {
	case c.domStar && c.dowStar:
		return true
	case c.domStar:
		return dow
	case c.dowStar:
		return dom
	}
	return dom || dow
}

// Next returns the first time strictly after t that the expression names, in loc.
// Wall-clock times that a DST change skips do not happen; the zero time when none
// comes within five years (e.g. "0 0 31 2 *").
func (c *Cron) Next(t time.Time, loc *time.Location) time.Time {
	t = t.In(loc).Truncate(time.Minute).Add(time.Minute)
	limit := t.AddDate(5, 0, 0)
	for t.Before(limit) {
		if !c.month[int(t.Month())] {
			t = startOfDay(t.Year(), t.Month()+1, 1, loc)
			continue
		}
		if !c.dayMatches(t) {
			t = startOfDay(t.Year(), t.Month(), t.Day()+1, loc)
			continue
		}
		if !c.hour[t.Hour()] {
			t = t.Truncate(time.Minute).Add(time.Duration(60-t.Minute()) * time.Minute)
			continue
		}
		if !c.minute[t.Minute()] {
			t = t.Add(time.Minute)
			continue
		}
		return t
	}
	return time.Time{}
}

// startOfDay is the first instant of the local date y-m-d (normalized: day 32 is the
// next month's first) in loc. Where clocks jump over midnight (Cuba, Lebanon, Brazil
// until 2019) the day has no 00:00, and time.Date may resolve it to the evening
// before, which would send Next back to a day it has passed: the day then begins at
// the jump.
func startOfDay(y int, m time.Month, d int, loc *time.Location) time.Time {
	y, m, d = time.Date(y, m, d, 12, 0, 0, 0, time.UTC).Date()
	t := time.Date(y, m, d, 0, 0, 0, 0, loc)
	if ty, tm, td := t.Date(); ty != y || tm != m || td != d {
		_, end := t.ZoneBounds()
		return end
	}
	return t
}
