package audit

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
)

// match is a grant a check found, with what it costs.
type match struct {
	g       grant
	penalty int
	limited bool // by resourceNames
}

// matches runs fn over the grants; fn returns the penalty of a grant and whether the
// check concerns it. A namespaced grant costs half of a cluster-wide one: what it
// allows is confined to one namespace.
func matches(grants []grant, fn func(g grant) (int, bool)) []match {
	var out []match
	for _, g := range grants {
		if p, ok := fn(g); ok {
			if g.namespace != "" {
				p /= 2
			}
			out = append(out, match{g: g, penalty: p, limited: len(g.rule.ResourceNames) > 0})
		}
	}
	// The costliest first, so the finding names it.
	slices.SortStableFunc(out, func(a, b match) int { return b.penalty - a.penalty })
	return out
}

func worst(ms []match) int {
	if len(ms) == 0 {
		return 0
	}
	return ms[0].penalty
}

// sources names where the matches come from, the first three of them.
func sources(ms []match) string {
	seen := []string{}
	for _, m := range ms {
		s := m.g.via + " " + m.g.scope()
		if m.limited {
			s += " limited to " + strings.Join(m.g.rule.ResourceNames, ", ")
		}
		if !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	if len(seen) > 3 {
		return strings.Join(seen[:3], "; ") + fmt.Sprintf("; and %d more", len(seen)-3)
	}
	return strings.Join(seen, "; ")
}

func result(penalty int, ms []match) string {
	switch {
	case len(ms) == 0 || penalty == 0:
		return Pass
	case penalty < 10:
		return Warn
	}
	return Fail
}

// rbacFindings grades the breadth of a workload's RBAC; own are the API groups it
// controls, where a wildcard costs less (it reaches only the operator's own kinds).
func rbacFindings(w workload, own []string) []Finding {
	f := func(check string, ms []match, passMsg, failMsg string) Finding {
		p := worst(ms)
		r := result(p, ms)
		msg := passMsg
		if r != Pass {
			msg = failMsg + ": " + sources(ms)
		} else if len(ms) > 0 {
			msg = passMsg + ": " + sources(ms)
		}
		return Finding{Category: CategoryRBAC, Check: check, Result: r, Penalty: p, Message: msg}
	}
	onlyOwn := func(r rbacv1.PolicyRule) bool {
		return !slices.Contains(r.APIGroups, "*") && len(r.APIGroups) > 0 &&
			!slices.ContainsFunc(r.APIGroups, func(g string) bool { return !slices.Contains(own, g) })
	}
	wildcard := func(field func(rbacv1.PolicyRule) []string, full int) func(grant) (int, bool) {
		return func(g grant) (int, bool) {
			if len(g.rule.Resources) == 0 || !slices.Contains(field(g.rule), "*") {
				return 0, false
			}
			if onlyOwn(g.rule) {
				return 5, true
			}
			return full, true
		}
	}
	// clusterWide keeps only grants without resourceNames that apply everywhere: a
	// namespaced or name-limited grant is reported, not penalized.
	clusterWide := func(full int, ok func(rbacv1.PolicyRule) bool) func(grant) (int, bool) {
		return func(g grant) (int, bool) {
			if !ok(g.rule) {
				return 0, false
			}
			if g.namespace != "" || len(g.rule.ResourceNames) > 0 {
				return 0, true
			}
			return full, true
		}
	}
	// byNames costs full unless limited by resourceNames.
	byNames := func(full, limited int, ok func(rbacv1.PolicyRule) bool) func(grant) (int, bool) {
		return func(g grant) (int, bool) {
			if !ok(g.rule) {
				return 0, false
			}
			if len(g.rule.ResourceNames) > 0 {
				return limited, true
			}
			return full, true
		}
	}
	onRoles := func(verb string) func(rbacv1.PolicyRule) bool {
		return func(r rbacv1.PolicyRule) bool {
			return allows(r, rbacv1.GroupName, "roles", verb) || allows(r, rbacv1.GroupName, "clusterroles", verb)
		}
	}
	grants := w.grants
	return []Finding{
		f("rbac.wildcard-verbs", matches(grants, wildcard(func(r rbacv1.PolicyRule) []string { return r.Verbs }, 20)),
			"no wildcard verbs", "wildcard verbs (\"*\": every verb, including escalate, bind and impersonate where they apply)"),
		f("rbac.wildcard-resources", matches(grants, wildcard(func(r rbacv1.PolicyRule) []string { return r.Resources }, 20)),
			"no wildcard resources", "wildcard resources (\"*\": every resource and subresource of the groups, including ones added later)"),
		f("rbac.wildcard-groups", matches(grants, wildcard(func(r rbacv1.PolicyRule) []string { return r.APIGroups }, 15)),
			"no wildcard API groups", "wildcard API groups (\"*\": every group, including ones installed later)"),
		f("rbac.secrets-read", matches(grants, clusterWide(15, func(r rbacv1.PolicyRule) bool { return allows(r, "", "secrets", readVerbs...) })),
			"no cluster-wide read of Secrets", "reads every Secret in the cluster"),
		f("rbac.secrets-write", matches(grants, clusterWide(10, func(r rbacv1.PolicyRule) bool { return allows(r, "", "secrets", writeVerbs...) })),
			"no cluster-wide write of Secrets", "writes Secrets in every namespace"),
		f("rbac.escalate", matches(grants, byNames(20, 5, onRoles("escalate"))),
			"no escalate on Roles or ClusterRoles", "escalate on Roles or ClusterRoles (may grant permissions it does not hold)"),
		f("rbac.bind", matches(grants, byNames(20, 5, onRoles("bind"))),
			"no bind on Roles or ClusterRoles", "bind on Roles or ClusterRoles (may bind roles with permissions it does not hold)"),
		f("rbac.impersonate", matches(grants, byNames(20, 10, func(r rbacv1.PolicyRule) bool {
			return slices.ContainsFunc([]string{"users", "groups", "serviceaccounts", "uids"}, func(res string) bool {
				return allows(r, "", res, "impersonate") || allows(r, "authentication.k8s.io", res, "impersonate")
			})
		})), "no impersonate", "impersonate (may act as other users, groups or ServiceAccounts)"),
		f("rbac.pods-exec", matches(grants, byNames(15, 10, func(r rbacv1.PolicyRule) bool {
			// create is the verb the API server authorizes exec and attach with (over
			// WebSocket too, since Kubernetes 1.35).
			return allows(r, "", "pods/exec", "create") || allows(r, "", "pods/attach", "create")
		})), "no pods/exec or pods/attach", "pods/exec or pods/attach (may run commands in other workloads' containers)"),
		f("rbac.nodes", matches(grants, byNames(15, 10, func(r rbacv1.PolicyRule) bool {
			return allows(r, "", "nodes", writeVerbs...) || allows(r, "", "nodes/proxy", append(slices.Clone(readVerbs), writeVerbs...)...)
		})), "no write to Nodes and no nodes/proxy", "writes Nodes or reaches kubelets through nodes/proxy"),
	}
}
