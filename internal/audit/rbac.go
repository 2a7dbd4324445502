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

// source names where one match comes from.
func (m match) source() string {
	s := m.g.via + " " + m.g.scope()
	if m.limited {
		s += " limited to " + namesText(m.g.rule.ResourceNames)
	}
	return s
}

// namesText lists resourceNames, the first five of a longer list.
func namesText(names []string) string {
	if len(names) > 5 {
		return strings.Join(names[:5], ", ") + fmt.Sprintf(" and %d more", len(names)-5)
	}
	return strings.Join(names, ", ")
}

// sources names where the matches come from, the first three of them.
func sources(ms []match) string {
	seen := []string{}
	for _, m := range ms {
		if s := m.source(); !slices.Contains(seen, s) {
			seen = append(seen, s)
		}
	}
	if len(seen) > 3 {
		return strings.Join(seen[:3], "; ") + fmt.Sprintf("; and %d more", len(seen)-3)
	}
	return strings.Join(seen, "; ")
}

// ruleText writes a rule as RBAC reads: "create, patch on pods, deployments in
// groups "", apps".
func ruleText(r rbacv1.PolicyRule) string {
	groups := make([]string, len(r.APIGroups))
	for i, g := range r.APIGroups {
		groups[i] = fmt.Sprintf("%q", g)
	}
	s := strings.Join(r.Verbs, ", ") + " on " + strings.Join(r.Resources, ", ") + " in " + strings.Join(groups, ", ")
	if len(r.ResourceNames) > 0 {
		s += " named " + namesText(r.ResourceNames)
	}
	return s
}

// evidenceOf lists each match's source and rule, the costliest first, at most five.
func evidenceOf(ms []match) []string {
	var out []string
	for _, m := range ms {
		e := m.source() + ": " + ruleText(m.g.rule)
		if !slices.Contains(out, e) {
			out = append(out, e)
		}
		if len(out) == 5 {
			break
		}
	}
	return out
}

// resultFor is the result a penalty gives: fail from 10, warn below, pass at 0.
func resultFor(penalty int) string {
	switch {
	case penalty == 0:
		return Pass
	case penalty < 10:
		return Warn
	}
	return Fail
}

// isClusterAdminGrant reports whether a grant is cluster-admin: every verb on every
// resource of every API group, cluster-wide.
func isClusterAdminGrant(g grant) bool {
	r := g.rule
	return g.namespace == "" && len(r.ResourceNames) == 0 && slices.Contains(r.Verbs, rbacv1.VerbAll) &&
		slices.Contains(r.Resources, rbacv1.ResourceAll) && slices.Contains(r.APIGroups, rbacv1.APIGroupAll)
}

// workloadResources are the kinds whose writing runs code: a pod may run as any
// ServiceAccount of its namespace, and so may the pods of a workload's template
// (writing a template is as good as creating the pod). Patching a pod changes its
// image; ephemeral containers add one.
var workloadResources = []struct{ group, resource string }{
	{"", "pods"}, {"", "pods/ephemeralcontainers"}, {"", "replicationcontrollers"},
	{"apps", "deployments"}, {"apps", "statefulsets"}, {"apps", "daemonsets"}, {"apps", "replicasets"},
	{"batch", "jobs"}, {"batch", "cronjobs"},
}

// workloadWrites names the workload resources a rule may create or change.
func workloadWrites(r rbacv1.PolicyRule) []string {
	var out []string
	for _, wr := range workloadResources {
		verbs := []string{"create", "update", "patch"}
		if wr.resource == "pods/ephemeralcontainers" {
			verbs = []string{"update", "patch"}
		}
		if allows(r, wr.group, wr.resource, verbs...) {
			out = append(out, wr.resource)
		}
	}
	return out
}

// reach says what a rule with a wildcard lets its holder do that matters for an
// adoption review: the dangers it really reaches, rather than every verb's name.
func reach(r rbacv1.PolicyRule) string {
	var out []string
	if w := workloadWrites(r); len(w) > 0 {
		out = append(out, "writes "+strings.Join(w, ", ")+" (runs code as any ServiceAccount of the namespace)")
	}
	if allows(r, "", "secrets", readVerbs...) {
		out = append(out, "reads Secrets")
	}
	for _, v := range []string{"escalate", "bind"} {
		if allows(r, rbacv1.GroupName, "clusterroles", v) || allows(r, rbacv1.GroupName, "roles", v) {
			out = append(out, v+" on roles")
		}
	}
	if allows(r, rbacv1.GroupName, "clusterrolebindings", "create", "update", "patch") {
		out = append(out, "writes ClusterRoleBindings")
	}
	if allows(r, "", "users", "impersonate") || allows(r, "", "serviceaccounts", "impersonate") || allows(r, "", "groups", "impersonate") {
		out = append(out, "impersonate")
	}
	if allows(r, "", "pods/exec", "create") {
		out = append(out, "pods/exec")
	}
	if allows(r, "", "nodes/proxy", "get", "create") {
		out = append(out, "nodes/proxy")
	}
	if allows(r, "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "create", "update", "patch") {
		out = append(out, "writes admission webhooks (sees and changes every write)")
	}
	if len(out) == 0 {
		return "reaches " + ruleText(r) + ", including what is added to them later; none of the dangers checked below"
	}
	return "reaches: " + strings.Join(out, "; ")
}

// rbacFindings grades the breadth of a workload's RBAC; own are the API groups it
// controls, where a wildcard costs less (it reaches only the operator's own kinds).
func rbacFindings(w workload, own []string) []Finding {
	f := func(check string, ms []match, passMsg, failMsg string) Finding {
		p := worst(ms)
		r := resultFor(p)
		msg := passMsg
		if r != Pass {
			msg = failMsg + ": " + sources(ms)
		} else if len(ms) > 0 {
			msg = passMsg + ": " + sources(ms)
		}
		return Finding{Category: CategoryRBAC, Check: check, Result: r, Penalty: p, Message: msg, Evidence: evidenceOf(ms)}
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
	// wildcardFinding is a wildcard check whose message says what the worst rule
	// really reaches.
	wildcardFinding := func(check, what string, ms []match) Finding {
		fd := f(check, ms, "no wildcard "+what, "wildcard "+what)
		if fd.Result != Pass {
			fd.Message = fmt.Sprintf("wildcard %s (\"*\") in %s: %s", what, ms[0].source(), reach(ms[0].g.rule))
			if n := len(ms) - 1; n > 0 {
				fd.Message += fmt.Sprintf(" (and %d more rules)", n)
			}
		}
		return fd
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

	adminMs := matches(grants, func(g grant) (int, bool) {
		if !isClusterAdminGrant(g) {
			return 0, false
		}
		return 100, true
	})
	what := "every verb on every resource of every API group"
	if slices.ContainsFunc(grants, func(g grant) bool { return g.namespace == "" && slices.Contains(g.rule.NonResourceURLs, "*") }) {
		what += " and every non-resource URL"
	}
	admin := f("rbac.cluster-admin", adminMs, "not cluster-admin", "cluster-admin: "+what)

	workloadsMs := matches(grants, clusterWide(40, func(r rbacv1.PolicyRule) bool { return len(workloadWrites(r)) > 0 }))
	workloadsF := f("rbac.workloads", workloadsMs, "does not create or change pods or workloads in every namespace",
		"creates or changes pods or workloads in every namespace: it may run code as any ServiceAccount, kube-system's too, which is cluster-admin in effect")
	if workloadsF.Result != Pass {
		var what []string
		for _, m := range workloadsMs {
			if m.penalty > 0 {
				for _, res := range workloadWrites(m.g.rule) {
					if !slices.Contains(what, res) {
						what = append(what, res)
					}
				}
			}
		}
		workloadsF.Message = fmt.Sprintf("writes %s in every namespace: it may run code as any ServiceAccount, kube-system's too (cluster-admin in effect): %s",
			strings.Join(what, ", "), sources(workloadsMs))
	} else if len(workloadsMs) > 0 {
		workloadsF.Message = "writes pods or workloads only where a RoleBinding lets it: " + sources(workloadsMs)
	}

	bindingsMs := matches(grants, func(g grant) (int, bool) {
		crb := allows(g.rule, rbacv1.GroupName, "clusterrolebindings", "create", "update", "patch")
		rb := allows(g.rule, rbacv1.GroupName, "rolebindings", "create", "update", "patch")
		switch {
		case !crb && !rb:
			return 0, false
		case g.namespace != "" || len(g.rule.ResourceNames) > 0:
			return 0, true
		case crb:
			return 10, true
		}
		return 5, true
	})

	return []Finding{
		admin,
		workloadsF,
		wildcardFinding("rbac.wildcard-verbs", "verbs", matches(grants, wildcard(func(r rbacv1.PolicyRule) []string { return r.Verbs }, 20))),
		wildcardFinding("rbac.wildcard-resources", "resources", matches(grants, wildcard(func(r rbacv1.PolicyRule) []string { return r.Resources }, 20))),
		wildcardFinding("rbac.wildcard-groups", "API groups", matches(grants, wildcard(func(r rbacv1.PolicyRule) []string { return r.APIGroups }, 15))),
		f("rbac.secrets-read", matches(grants, clusterWide(15, func(r rbacv1.PolicyRule) bool { return allows(r, "", "secrets", readVerbs...) })),
			"no cluster-wide read of Secrets", "reads every Secret in the cluster"),
		f("rbac.secrets-write", matches(grants, clusterWide(10, func(r rbacv1.PolicyRule) bool { return allows(r, "", "secrets", writeVerbs...) })),
			"no cluster-wide write of Secrets", "writes Secrets in every namespace"),
		f("rbac.role-bindings", bindingsMs, "does not write ClusterRoleBindings, nor RoleBindings in every namespace",
			"writes ClusterRoleBindings or RoleBindings in every namespace: it may give any account the permissions it holds (the API server's escalation check limits it to those, unless it has bind)"),
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
