//go:build integration

package sleepschedule

import (
	"testing"

	. "github.com/onsi/gomega"
	clocktesting "k8s.io/utils/clock/testing"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// A night asleep is counted in status.savings: the hours, and the core-hours and
// GiB-hours of the requests of the pods that did not run.
func TestSavingsCountTheWeek(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "savings"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil) // 2 x 250m, 256Mi
	s := newSchedule("savings", ns).create(t)
	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	g := NewWithT(t)
	g.Expect(got.Status.Savings).NotTo(BeNil())
	g.Expect(got.Status.Savings.WeekStart.Time).To(BeTemporally("==", mustTime("2026-11-30T00:00:00Z")))
	g.Expect(got.Status.Savings.AsleepSeconds).To(BeZero())

	clk.SetTime(thuMorning) // 12 hours later
	poke(t, s.Name)
	got = waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	sv := got.Status.Savings
	g.Expect(sv.AsleepSeconds).To(BeEquivalentTo(12 * 3600))
	g.Expect(sv.AsleepHours).To(Equal("12.0"))
	g.Expect(sv.CPUCoreHours).To(Equal("6.0"))   // 0.5 cores x 12 h
	g.Expect(sv.MemoryGiBHours).To(Equal("6.0")) // 0.5 GiB x 12 h
	g.Expect(sv.CountedUntil.Time).To(BeTemporally("==", thuMorning))
}
