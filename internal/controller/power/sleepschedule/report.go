package sleepschedule

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"slices"
	"text/tabwriter"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// Savings writes, for every SleepSchedule, what it saves now and saved this week, as
// `orderly sleep savings` shows it.
func Savings(ctx context.Context, c client.Client, out io.Writer) error {
	var list powerv1alpha1.SleepScheduleList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing SleepSchedules: %w", err)
	}
	return writeSavings(out, list.Items)
}

// writeSavings writes the table of Savings. Pure.
func writeSavings(out io.Writer, schedules []powerv1alpha1.SleepSchedule) error {
	slices.SortFunc(schedules, func(a, b powerv1alpha1.SleepSchedule) int { return cmp.Compare(a.Name, b.Name) })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "SCHEDULE\tSTATE\tSLEEPING\tSAVED CPU\tSAVED MEMORY\tASLEEP THIS WEEK (h)\tCORE-HOURS SAVED\tGIB-HOURS SAVED")
	for _, s := range schedules {
		st := s.Status
		cpu, mem := "0", "0"
		if q, ok := st.SavedRequests[corev1.ResourceCPU]; ok {
			cpu = q.String()
		}
		if q, ok := st.SavedRequests[corev1.ResourceMemory]; ok {
			mem = q.String()
		}
		hours, core, gib := "-", "-", "-"
		if sv := st.Savings; sv != nil {
			hours, core, gib = sv.AsleepHours, sv.CPUCoreHours, sv.MemoryGiBHours
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\n", s.Name, cmp.Or(string(st.State), "-"), st.SleepingWorkloads, cpu, mem, hours, core, gib)
	}
	return w.Flush()
}

// SavingsByNamespace writes what every SleepSchedule saves now in each namespace, as
// `orderly sleep savings --by-namespace` shows it (status.savedByNamespace: the 50
// namespaces of each schedule that save the most).
func SavingsByNamespace(ctx context.Context, c client.Client, out io.Writer) error {
	var list powerv1alpha1.SleepScheduleList
	if err := c.List(ctx, &list); err != nil {
		return fmt.Errorf("listing SleepSchedules: %w", err)
	}
	return writeNamespaceSavings(out, list.Items)
}

// writeNamespaceSavings writes the table of SavingsByNamespace, by namespace. Pure.
func writeNamespaceSavings(out io.Writer, schedules []powerv1alpha1.SleepSchedule) error {
	type row struct {
		ns, schedule string
		saved        powerv1alpha1.NamespaceSavings
	}
	var rows []row
	for _, s := range schedules {
		for _, ns := range s.Status.SavedByNamespace {
			rows = append(rows, row{ns.Namespace, s.Name, ns})
		}
	}
	slices.SortFunc(rows, func(a, b row) int { return cmp.Or(cmp.Compare(a.ns, b.ns), cmp.Compare(a.schedule, b.schedule)) })
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tSCHEDULE\tSLEEPING\tSAVED CPU\tSAVED MEMORY")
	for _, r := range rows {
		cpu, mem := "0", "0"
		if q, ok := r.saved.SavedRequests[corev1.ResourceCPU]; ok {
			cpu = q.String()
		}
		if q, ok := r.saved.SavedRequests[corev1.ResourceMemory]; ok {
			mem = q.String()
		}
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%s\n", r.ns, r.schedule, r.saved.SleepingWorkloads, cpu, mem)
	}
	return w.Flush()
}
