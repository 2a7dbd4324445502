package sleepschedule

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// WakeFor wakes the namespaces of the SleepSchedule name on demand, from now for d,
// whatever its windows and holidays say: it sets spec.wakeUntil to now + d in whole
// seconds, and returns that instant. The schedule resumes by itself afterwards.
func WakeFor(ctx context.Context, c client.Client, name string, now time.Time, d time.Duration) (time.Time, error) {
	if d <= 0 {
		return time.Time{}, fmt.Errorf("a wake must last a positive duration such as 30m or 2h, not %s", d)
	}
	until := now.Add(d).UTC().Truncate(time.Second)
	return until, setWakeUntil(ctx, c, name, &until)
}

// Resume ends an on-demand wake of the SleepSchedule name: it removes
// spec.wakeUntil, and the schedule follows its windows again.
func Resume(ctx context.Context, c client.Client, name string) error {
	return setWakeUntil(ctx, c, name, nil)
}

// setWakeUntil patches spec.wakeUntil (nil removes it) and nothing else, so that the
// rest of the spec, which others may be changing, is left as it is.
func setWakeUntil(ctx context.Context, c client.Client, name string, until *time.Time) error {
	var value any
	if until != nil {
		value = metav1.NewTime(*until)
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"wakeUntil": value}})
	if err != nil {
		return err
	}
	s := &powerv1alpha1.SleepSchedule{}
	s.Name = name
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("setting spec.wakeUntil of SleepSchedule %q: %w", name, err)
	}
	return nil
}
