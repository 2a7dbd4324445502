package v1beta1_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	powerv1beta1 "orderly.dev/orderly/api/power/v1beta1"
	"orderly.dev/orderly/internal/testing/testconversion"
)

// TestSleepScheduleRoundTrip: random SleepSchedules go from v1alpha1 to v1beta1 and back, and the
// other way, unchanged.
func TestSleepScheduleRoundTrip(t *testing.T) {
	testconversion.RoundTrip(t,
		func() conversion.Hub { return &powerv1alpha1.SleepSchedule{} },
		func() conversion.Convertible { return &powerv1beta1.SleepSchedule{} })
}
