package sleepschedule

import (
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// series holds every per-schedule metric, so that a deleted schedule's series all go
// with it (series.Forget).
var series = kit.ClusterSeries("schedule")

var (
	sleepingWorkloads = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_sleeping_workloads",
		Help: "Workloads a SleepSchedule holds asleep.",
	})
	leftAloneWorkloads = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_left_alone_workloads",
		Help: "Workloads changed by their owner while asleep, which a SleepSchedule leaves alone.",
	})
	savedCPU = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_saved_cpu_cores",
		Help: "CPU requests (cores) of the pods not running because of a SleepSchedule.",
	})
	savedMemory = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_saved_memory_bytes",
		Help: "Memory requests (bytes) of the pods not running because of a SleepSchedule.",
	})
	asleep = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_asleep",
		Help: "1 when a SleepSchedule's state is Asleep, 0 when Awake.",
	})
	transitions = series.Counter(prometheus.CounterOpts{
		Name: "orderly_sleepschedule_transitions_total",
		Help: "State changes of a SleepSchedule, by action (Sleep or Wake).",
	}, "action")
	asleepHoursThisWeek = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_asleep_hours_this_week",
		Help: "Hours a SleepSchedule held workloads asleep this week (from Monday 00:00 in its time zone).",
	})
	savedCoreHoursThisWeek = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_saved_cpu_core_hours_this_week",
		Help: "Core-hours of CPU requests of the pods not running because of a SleepSchedule this week.",
	})
	savedGiBHoursThisWeek = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_saved_memory_gib_hours_this_week",
		Help: "GiB-hours of memory requests of the pods not running because of a SleepSchedule this week.",
	})
	// One series per namespace a schedule saves in: bounded by the namespaces the
	// schedules select (one schedule owns a namespace).
	namespaceSavedCPU = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_namespace_saved_cpu_cores",
		Help: "CPU requests (cores) of the pods of one namespace not running because of a SleepSchedule.",
	}, "namespace")
	namespaceSavedMemory = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_namespace_saved_memory_bytes",
		Help: "Memory requests (bytes) of the pods of one namespace not running because of a SleepSchedule.",
	}, "namespace")
	gitOpsManaged = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_gitops_managed_workloads",
		Help: "Targeted workloads of a SleepSchedule that Argo CD or Flux manages.",
	})
	skippedWorkloads = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_skipped_workloads",
		Help: "Workloads a SleepSchedule would sleep and leaves awake: another operator controls them, a GitOps tool manages them under gitOpsManaged Skip, or they could not be restored.",
	})
	stillRunningWorkloads = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_still_running_workloads",
		Help: "Objects a SleepSchedule holds asleep that still run more replicas than they were scaled to, by their own status (the WorkloadsStillRunning condition).",
	})
	unavailableKinds = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_sleepschedule_unavailable_kinds",
		Help: "Kinds of a SleepSchedule's targets.kinds that cannot sleep now (not served, no way to sleep, or not permitted).",
	})
	writeFailures = series.Counter(prometheus.CounterOpts{
		Name: "orderly_sleepschedule_write_failures_total",
		Help: "Workload writes a SleepSchedule could not make.",
	})
)

// recordMetrics sets the schedule's series from the status st that replaced prev.
func recordMetrics(key client.ObjectKey, prev, st powerv1alpha1.SleepScheduleStatus, obs *observation) {
	if obs.invalid != nil || obs.listFailed != nil {
		return
	}
	of := series.Values(key)
	sleepingWorkloads.WithLabelValues(of...).Set(float64(st.SleepingWorkloads))
	leftAloneWorkloads.WithLabelValues(of...).Set(float64(st.LeftAloneCount))
	cpu, mem := st.SavedRequests[corev1.ResourceCPU], st.SavedRequests[corev1.ResourceMemory]
	savedCPU.WithLabelValues(of...).Set(cpu.AsApproximateFloat64())
	savedMemory.WithLabelValues(of...).Set(mem.AsApproximateFloat64())
	// The namespaces the schedule no longer saves in lose their series.
	namespaceSavedCPU.DeletePartialMatch(prometheus.Labels{"schedule": key.Name})
	namespaceSavedMemory.DeletePartialMatch(prometheus.Labels{"schedule": key.Name})
	for _, ns := range savingsByNamespace(key.Name, obs) {
		cpu, mem := ns.SavedRequests[corev1.ResourceCPU], ns.SavedRequests[corev1.ResourceMemory]
		namespaceSavedCPU.WithLabelValues(series.Values(key, ns.Namespace)...).Set(cpu.AsApproximateFloat64())
		namespaceSavedMemory.WithLabelValues(series.Values(key, ns.Namespace)...).Set(mem.AsApproximateFloat64())
	}
	v := 0.0
	if st.State == powerv1alpha1.StateAsleep {
		v = 1
	}
	asleep.WithLabelValues(of...).Set(v)
	gitOpsManaged.WithLabelValues(of...).Set(float64(st.GitOpsManagedCount))
	skippedWorkloads.WithLabelValues(of...).Set(float64(skippedCount(obs)))
	stillRunning, _ := stillRunningSummary(obs)
	stillRunningWorkloads.WithLabelValues(of...).Set(float64(stillRunning))
	if sv := st.Savings; sv != nil {
		asleepHoursThisWeek.WithLabelValues(of...).Set(float64(sv.AsleepSeconds) / 3600)
		savedCoreHoursThisWeek.WithLabelValues(of...).Set(float64(sv.CPUMilliCoreSeconds) / 1000 / 3600)
		savedGiBHoursThisWeek.WithLabelValues(of...).Set(float64(sv.MemoryMiBSeconds) / 1024 / 3600)
	}
	unavailable := map[string]bool{}
	for _, p := range obs.kindProblems {
		unavailable[p.kind] = true
	}
	unavailableKinds.WithLabelValues(of...).Set(float64(len(unavailable)))
	if len(st.History) > 0 && (len(prev.History) == 0 || !st.History[0].Time.Equal(&prev.History[0].Time) || st.History[0].Action != prev.History[0].Action) {
		transitions.WithLabelValues(series.Values(key, string(st.History[0].Action))...).Inc()
	}
	if obs.failures > 0 {
		writeFailures.WithLabelValues(of...).Add(float64(obs.failures))
	}
}
