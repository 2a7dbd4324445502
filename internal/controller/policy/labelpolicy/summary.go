package labelpolicy

import (
	"cmp"
	"slices"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// The compliance summary answers finance's question (how much of each namespace and
// tenant is labelled) without one report object, status entry or metric series per
// workload or per namespace: a cluster with thousands of namespaces gets the summaryTopN
// with the most violations by name and one "(other)" entry that sums the rest, in
// status and in the metrics alike, so sums over a policy stay exact.

// summaryTopN bounds the namespaces and tenants named in status and in metric labels.
const summaryTopN = 20

const (
	// otherName sums what is not among the top summaryTopN.
	otherName = "(other)"
	// noTenant groups the namespaces without a tenancy.orderly.dev/tenant label.
	noTenant = "(none)"
)

// tally is what the audit counted in one namespace.
type tally struct{ workloads, violations int }

// tenantOf is the tenant a namespace belongs to by its label; noTenant without one.
// The label is only read to group the report: it decides nothing else.
func tenantOf(nsLabels map[string]string) string {
	if t := nsLabels[tenancyv1alpha1.TenantLabel]; t != "" {
		return t
	}
	return noTenant
}

// summarize orders the groups by violations, then workloads (both descending), then
// name, and returns the first n and, when there are more, the sum of the rest. counted
// is how many namespaces each group holds (nil: one each). Pure.
func summarize(groups map[string]tally, counted map[string]int, n int) ([]policyv1alpha1.ComplianceSummary, *policyv1alpha1.ComplianceSummary) {
	all := make([]policyv1alpha1.ComplianceSummary, 0, len(groups))
	for name, t := range groups {
		s := policyv1alpha1.ComplianceSummary{Name: name, Workloads: int32(t.workloads), Violations: int32(t.violations)}
		if counted != nil {
			s.Namespaces = int32(counted[name])
		}
		all = append(all, s)
	}
	slices.SortFunc(all, func(a, b policyv1alpha1.ComplianceSummary) int {
		return cmp.Or(cmp.Compare(b.Violations, a.Violations), cmp.Compare(b.Workloads, a.Workloads), cmp.Compare(a.Name, b.Name))
	})
	if len(all) <= n {
		if len(all) == 0 {
			return nil, nil
		}
		return all, nil
	}
	other := &policyv1alpha1.ComplianceSummary{Name: otherName}
	for _, s := range all[n:] {
		other.Workloads += s.Workloads
		other.Violations += s.Violations
		other.Namespaces += max(s.Namespaces, 1)
	}
	return all[:n], other
}

// byTenant groups namespace tallies by tenant, with the namespaces each holds.
func byTenant(namespaces map[string]tally, tenants map[string]string) (map[string]tally, map[string]int) {
	groups, counted := map[string]tally{}, map[string]int{}
	for ns, t := range namespaces {
		name := tenants[ns]
		if name == "" {
			name = noTenant
		}
		g := groups[name]
		g.workloads += t.workloads
		g.violations += t.violations
		groups[name] = g
		counted[name]++
	}
	return groups, counted
}
