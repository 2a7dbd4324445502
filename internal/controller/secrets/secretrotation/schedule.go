package secretrotation

import (
	"time"

	"orderly.dev/orderly/internal/kit"
)

// when is what decides the rotations of one SecretRotation.
type when struct {
	interval time.Duration
	cron     *kit.Cron
	loc      *time.Location
}

// due says whether a rotation is due at now, given the start of the last one
// (zero when there has been none), and when the next one is due after that. Only
// one rotation is ever due, however many slots were missed (catch-up once): the
// next due time is computed from the last rotation, and after a catch-up rotation
// from that rotation's start, so the missed slots between are skipped.
func (w when) due(last, created, now time.Time) (bool, time.Time) {
	next := w.nextAfter(last, created)
	if next.IsZero() {
		return false, time.Time{}
	}
	return !now.Before(next), next
}

// nextAfter is when the first rotation after last is due: interval after it, or the
// schedule's next time after it, whichever is first. With no rotation yet, the
// schedule counts from the object's creation and the interval starts now (the
// first rotation, which creates the Secret, is not this function's business).
func (w when) nextAfter(last, created time.Time) time.Time {
	from := last
	if from.IsZero() {
		from = created
	}
	var next time.Time
	if w.interval > 0 {
		next = from.Add(w.interval)
	}
	if w.cron != nil {
		if s := w.cron.Next(from, w.loc); !s.IsZero() && (next.IsZero() || s.Before(next)) {
			next = s
		}
	}
	return next
}
