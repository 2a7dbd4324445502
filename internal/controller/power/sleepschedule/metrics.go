package sleepschedule

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

var (
	sleepingWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_sleeping_workloads",
		Help: "Workloads a SleepSchedule holds asleep.",
	}, []string{"schedule"})
	leftAloneWorkloads = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_left_alone_workloads",
		Help: "Workloads changed by their owner while asleep, which a SleepSchedule leaves alone.",
	}, []string{"schedule"})
	savedCPU = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_saved_cpu_cores",
		Help: "CPU requests (cores) of the pods not running because of a SleepSchedule.",
	}, []string{"schedule"})
	savedMemory = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_saved_memory_bytes",
		Help: "Memory requests (bytes) of the pods not running because of a SleepSchedule.",
	}, []string{"schedule"})
	asleep = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_asleep",
		Help: "1 when a SleepSchedule's state is Asleep, 0 when Awake.",
	}, []string{"schedule"})
	transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_sleepschedule_transitions_total",
		Help: "State changes of a SleepSchedule, by action (Sleep or Wake).",
	}, []string{"schedule", "action"})
	writeFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_sleepschedule_write_failures_total",
		Help: "Workload writes a SleepSchedule could not make.",
	}, []string{"schedule"})
)

func init() {
	metrics.Registry.MustRegister(sleepingWorkloads, leftAloneWorkloads, savedCPU, savedMemory, asleep, transitions, writeFailures)
}

func recordMetrics(schedule string, prev, st powerv1alpha1.SleepScheduleStatus, obs *observation) {
	if obs.invalid != nil {
		return
	}
	sleepingWorkloads.WithLabelValues(schedule).Set(float64(st.SleepingWorkloads))
	leftAloneWorkloads.WithLabelValues(schedule).Set(float64(st.LeftAloneCount))
	cpu, mem := st.SavedRequests[corev1.ResourceCPU], st.SavedRequests[corev1.ResourceMemory]
	savedCPU.WithLabelValues(schedule).Set(cpu.AsApproximateFloat64())
	savedMemory.WithLabelValues(schedule).Set(mem.AsApproximateFloat64())
	v := 0.0
	if st.State == powerv1alpha1.StateAsleep {
		v = 1
	}
	asleep.WithLabelValues(schedule).Set(v)
	if len(st.History) > 0 && (len(prev.History) == 0 || !st.History[0].Time.Equal(&prev.History[0].Time) || st.History[0].Action != prev.History[0].Action) {
		transitions.WithLabelValues(schedule, string(st.History[0].Action)).Inc()
	}
	if obs.failures > 0 {
		writeFailures.WithLabelValues(schedule).Add(float64(obs.failures))
	}
}

func forgetMetrics(schedule string) {
	for _, g := range []*prometheus.GaugeVec{sleepingWorkloads, leftAloneWorkloads, savedCPU, savedMemory, asleep} {
		g.DeleteLabelValues(schedule)
	}
	transitions.DeletePartialMatch(prometheus.Labels{"schedule": schedule})
	writeFailures.DeleteLabelValues(schedule)
}
