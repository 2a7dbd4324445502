package sleepschedule

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// horizonDays bounds the search for the next transition: a schedule whose state does
// not change within a year (no windows, or every day a holiday) reports none.
const horizonDays = 400

// Schedule is a parsed SleepSchedule spec: when its namespaces are awake.
type Schedule struct {
	loc       *time.Location
	windows   []window
	holidays  map[civilDate]bool
	wakeUntil time.Time
}

// window is one weekly awake window: it opens on each of days at from and closes at
// to, on the same day or, when to <= from, on the next day. Times are minutes since
// local midnight; to may be 1440 (24:00).
type window struct {
	days     [7]bool // indexed by time.Weekday
	from, to int
}

type civilDate struct {
	y int
	m time.Month
	d int
}

func dateOf(t time.Time) civilDate {
	y, m, d := t.Date()
	return civilDate{y, m, d}
}

func (c civilDate) addDays(n int) civilDate {
	return dateOf(time.Date(c.y, c.m, c.d+n, 12, 0, 0, 0, time.UTC))
}

func (c civilDate) weekday() time.Weekday {
	return time.Date(c.y, c.m, c.d, 12, 0, 0, 0, time.UTC).Weekday()
}

var dayNames = map[string]time.Weekday{
	"Sun": time.Sunday, "Mon": time.Monday, "Tue": time.Tuesday, "Wed": time.Wednesday,
	"Thu": time.Thursday, "Fri": time.Friday, "Sat": time.Saturday,
}

// parseDays reads "Mon-Fri", "Sat,Sun", "Fri-Mon" (wrapping) or "Mon,Wed-Fri".
func parseDays(s string) ([7]bool, error) {
	var days [7]bool
	for part := range strings.SplitSeq(s, ",") {
		first, last, isRange := strings.Cut(strings.TrimSpace(part), "-")
		a, ok := dayNames[first]
		if !ok {
			return days, fmt.Errorf("unknown day %q in %q: use Mon, Tue, Wed, Thu, Fri, Sat or Sun", first, s)
		}
		b := a
		if isRange {
			if b, ok = dayNames[last]; !ok {
				return days, fmt.Errorf("unknown day %q in %q: use Mon, Tue, Wed, Thu, Fri, Sat or Sun", last, s)
			}
		}
		for d := a; ; d = (d + 1) % 7 {
			days[d] = true
			if d == b {
				break
			}
		}
	}
	return days, nil
}

// parseClock reads HH:MM into minutes since midnight; 24:00 only when allow24.
func parseClock(s string, allow24 bool) (int, error) {
	hh, mm, ok := strings.Cut(s, ":")
	h, errH := strconv.Atoi(hh)
	m, errM := strconv.Atoi(mm)
	if !ok || len(hh) != 2 || len(mm) != 2 || errH != nil || errM != nil || m < 0 || m > 59 || h < 0 || h > 24 ||
		(h == 24 && (m != 0 || !allow24)) {
		return 0, fmt.Errorf("malformed time %q: use HH:MM on a 24-hour clock", s)
	}
	return h*60 + m, nil
}

// Parse reads a SleepSchedule's spec. The API server validates the same rules; Parse
// checks them again because the time zone database of the API server and Orderly's
// may differ.
func Parse(spec *powerv1alpha1.SleepScheduleSpec) (*Schedule, error) {
	loc, err := kit.LoadLocation(spec.TimeZone)
	if err != nil {
		return nil, err
	}
	s := &Schedule{loc: loc, holidays: map[civilDate]bool{}}
	for i, w := range spec.Awake {
		days, err := parseDays(w.Days)
		if err != nil {
			return nil, fmt.Errorf("awake[%d]: %w", i, err)
		}
		from, err := parseClock(w.From, false)
		if err != nil {
			return nil, fmt.Errorf("awake[%d].from: %w", i, err)
		}
		to, err := parseClock(w.To, true)
		if err != nil {
			return nil, fmt.Errorf("awake[%d].to: %w", i, err)
		}
		if from == to {
			return nil, fmt.Errorf("awake[%d]: window %s-%s is empty", i, w.From, w.To)
		}
		s.windows = append(s.windows, window{days: days, from: from, to: to})
	}
	for _, h := range spec.Holidays {
		d, err := time.Parse(time.DateOnly, h)
		if err != nil {
			return nil, fmt.Errorf("holiday %q is not a date YYYY-MM-DD", h)
		}
		s.holidays[dateOf(d)] = true
	}
	if spec.WakeUntil != nil {
		s.wakeUntil = spec.WakeUntil.Time
	}
	return s, nil
}

// at resolves a local date and a clock time (minutes since midnight, up to 1440) to
// an instant. A time skipped by a daylight-saving jump resolves to the instant the
// clock jumps (02:30 on a spring-forward night is 03:00); a time that happens twice
// when clocks go back resolves to its first occurrence.
func (s *Schedule) at(d civilDate, minutes int) time.Time {
	if minutes >= 24*60 {
		return s.at(d.addDays(1), minutes-24*60)
	}
	h, m := minutes/60, minutes%60
	t := time.Date(d.y, d.m, d.d, h, m, 0, 0, s.loc)
	got := dateOf(t)
	wall := t.Hour()*60 + t.Minute()
	if got == d && wall == minutes {
		// When clocks went back shortly before t, the same wall-clock time also
		// happened earlier, in the previous zone: take that first occurrence.
		start, _ := t.ZoneBounds()
		if !start.IsZero() {
			_, prevOff := start.Add(-time.Second).Zone()
			if _, off := t.Zone(); prevOff > off {
				if first := t.Add(-time.Duration(prevOff-off) * time.Second); first.Before(start) {
					return first
				}
			}
		}
		return t
	}
	// In a gap: the first instant whose wall clock is at or past the time asked for is
	// the zone transition next to t, after it when t's wall clock is behind.
	start, end := t.ZoneBounds()
	if got.before(d) || got == d && wall < minutes {
		return end
	}
	return start
}

func (c civilDate) before(o civilDate) bool {
	return cmp.Or(cmp.Compare(c.y, o.y), cmp.Compare(c.m, o.m), cmp.Compare(c.d, o.d)) < 0
}

// interval returns the awake interval of window w that open on local date d.
func (s *Schedule) interval(w window, d civilDate) (time.Time, time.Time) {
	start := s.at(d, w.from)
	if w.to > w.from {
		return start, s.at(d, w.to)
	}
	return start, s.at(d.addDays(1), w.to)
}

// scheduledAwake reports whether the windows and holidays alone say t is awake.
func (s *Schedule) scheduledAwake(t time.Time) bool {
	lt := t.In(s.loc)
	today := dateOf(lt)
	if s.holidays[today] {
		return false
	}
	// A window that opened yesterday may still be open (crossing midnight).
	for _, d := range []civilDate{today.addDays(-1), today} {
		for _, w := range s.windows {
			if !w.days[d.weekday()] {
				continue
			}
			start, end := s.interval(w, d)
			if !t.Before(start) && t.Before(end) {
				return true
			}
		}
	}
	return false
}

// Awake reports whether the schedule's namespaces are awake at t, wakeUntil included.
func (s *Schedule) Awake(t time.Time) bool {
	if t.Before(s.wakeUntil) {
		return true
	}
	return s.scheduledAwake(t)
}

// State is Awake or Asleep at t.
func (s *Schedule) State(t time.Time) powerv1alpha1.SleepState {
	if s.Awake(t) {
		return powerv1alpha1.StateAwake
	}
	return powerv1alpha1.StateAsleep
}

// Next returns the first instant after now at which the state changes, and false
// when it does not change within horizonDays. The state is constant between the
// candidate instants (window edges, local midnights, zone changes and wakeUntil), so
// the answer is the first candidate whose state differs from now's.
func (s *Schedule) Next(now time.Time) (time.Time, bool) {
	current := s.Awake(now)
	today := dateOf(now.In(s.loc))
	const chunk = 7
	for lo := -1; lo < horizonDays; lo += chunk {
		// Every change in [midnight of lo, midnight of lo+chunk) is a candidate of a
		// day in [lo-1, lo+chunk): windows opened the day before may close in range.
		from, to := s.at(today.addDays(lo), 0), s.at(today.addDays(lo+chunk), 0)
		var cands []time.Time
		for day := lo - 1; day < lo+chunk; day++ {
			d := today.addDays(day)
			cands = append(cands, s.at(d, 0))
			for _, w := range s.windows {
				start, end := s.interval(w, d)
				cands = append(cands, start, end)
			}
			midday := time.Date(d.y, d.m, d.d, 12, 0, 0, 0, s.loc)
			if zs, ze := midday.ZoneBounds(); !zs.IsZero() {
				cands = append(cands, zs)
				if !ze.IsZero() {
					cands = append(cands, ze)
				}
			}
		}
		if !s.wakeUntil.IsZero() {
			cands = append(cands, s.wakeUntil)
		}
		slices.SortFunc(cands, func(a, b time.Time) int { return a.Compare(b) })
		for _, c := range cands {
			if c.Before(from) || !c.Before(to) || !c.After(now) {
				continue
			}
			if s.Awake(c) != current {
				return c, true
			}
		}
	}
	return time.Time{}, false
}
