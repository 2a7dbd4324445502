package audit

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The checklist's questions, in the order the field guide asks them.
const (
	QuestionAPI           = "Is its API mature?"
	QuestionClusterAdmin  = "Does it need cluster-admin?"
	QuestionAvailability  = "Does it run highly available?"
	QuestionObservability = "Can it be observed?"
	QuestionMaintenance   = "Is it maintained?"
)

// Answers.
const (
	Yes      = "yes"
	No       = "no"
	Partly   = "partly"
	InEffect = "in effect"
)

// checklist answers the adoption checklist for an operator from its findings, each
// answer with the evidence (rules and objects) it rests on.
func checklist(op Operator, w workload, groups map[string]Group) []Answer {
	return []Answer{apiAnswer(op, groups), clusterAdminAnswer(op), availabilityAnswer(op), observabilityAnswer(op, w), maintenanceAnswer(op)}
}

func findingOf(op Operator, check string) Finding {
	for _, f := range op.Findings {
		if f.Check == check {
			return f
		}
	}
	return Finding{}
}

func apiAnswer(op Operator, groups map[string]Group) Answer {
	a := Answer{ID: "api", Question: QuestionAPI, Evidence: []string{}}
	if len(op.Groups) == 0 {
		a.Answer, a.Summary = Unknown, "nothing ties it to an API group, so which kinds it serves, and how mature they are, is not known"
		return a
	}
	stable, graded := 0, 0
	var parts []string
	for _, g := range op.Groups {
		kinds := gradedKinds(groups[g].CRDs)
		counts := map[string][]string{}
		for _, c := range kinds {
			counts[c.Maturity] = append(counts[c.Maturity], c.Kind)
		}
		stable += len(counts[Stable])
		graded += len(kinds)
		var mix []string
		for _, m := range []string{Stable, Beta, Alpha, Other} {
			switch n := len(counts[m]); {
			case n == len(kinds):
				mix = []string{"all " + m}
			case n > 0 && m == Stable:
				mix = append(mix, fmt.Sprintf("%d %s", n, m))
			case n > 0:
				mix = append(mix, fmt.Sprintf("%d %s (%s)", n, m, strings.Join(counts[m], ", ")))
			}
		}
		parts = append(parts, fmt.Sprintf("%s: %s users write, %s", g, plural(len(kinds), "kind"), strings.Join(mix, ", ")))
		for _, f := range groups[g].Findings {
			if f.Check == "api.maturity" {
				a.Evidence = append(a.Evidence, f.Evidence...)
			}
		}
	}
	switch stable {
	case graded:
		a.Answer = Yes
	case 0:
		a.Answer = No
	default:
		a.Answer = Partly
	}
	a.Summary = strings.Join(parts, "; ")
	return a
}

// inEffect are the RBAC checks that make an operator cluster-admin in all but name
// when they cost their full, cluster-wide penalty.
var inEffect = map[string]struct {
	penalty int
	what    string
}{
	"rbac.workloads":   {40, "writes pods or workloads in every namespace"},
	"rbac.escalate":    {20, "escalate on roles"},
	"rbac.bind":        {20, "bind on roles"},
	"rbac.impersonate": {20, "impersonate"},
}

// plural writes a count of things: "1 kind", "3 kinds".
func plural(n int, thing string) string {
	if n == 1 {
		return "1 " + thing
	}
	return fmt.Sprintf("%d %ss", n, thing)
}

// broadRights name what the other RBAC checks found, for the cluster-admin answer.
var broadRights = map[string]string{
	"rbac.wildcard-verbs": "wildcard verbs", "rbac.wildcard-resources": "wildcard resources", "rbac.wildcard-groups": "wildcard API groups",
	"rbac.secrets-read": "reads every Secret", "rbac.secrets-write": "writes Secrets in every namespace",
	"rbac.role-bindings": "writes ClusterRoleBindings or RoleBindings everywhere", "rbac.escalate": "escalate (limited by name)",
	"rbac.bind": "bind (limited by name)", "rbac.impersonate": "impersonate (limited by name)", "rbac.pods-exec": "pods/exec or pods/attach",
	"rbac.nodes": "writes Nodes or reaches nodes/proxy",
}

func clusterAdminAnswer(op Operator) Answer {
	a := Answer{ID: "cluster-admin", Question: QuestionClusterAdmin, Evidence: []string{}}
	if f := findingOf(op, "rbac.cluster-admin"); f.Result != Pass {
		a.Answer, a.Summary, a.Evidence = Yes, f.Message, append(a.Evidence, f.Evidence...)
		return a
	}
	var effect, broad []string
	for _, f := range op.Findings {
		if f.Category != CategoryRBAC || f.Result == Pass {
			continue
		}
		if e, ok := inEffect[f.Check]; ok && f.Penalty >= e.penalty {
			effect = append(effect, e.what+" ("+f.Check+")")
		} else {
			broad = append(broad, broadRights[f.Check]+" ("+f.Check+")")
		}
		a.Evidence = append(a.Evidence, f.Evidence...)
	}
	switch {
	case len(effect) > 0:
		a.Answer = InEffect
		a.Summary = "not by name, but in effect: " + strings.Join(effect, "; ")
		if len(broad) > 0 {
			a.Summary += "; also " + strings.Join(broad, "; ")
		}
	case len(broad) > 0:
		a.Answer = No
		a.Summary = "no, but: " + strings.Join(broad, "; ")
	default:
		a.Answer, a.Summary = No, "no: every RBAC check passed"
	}
	return a
}

func availabilityAnswer(op Operator) Answer {
	a := Answer{ID: "availability", Question: QuestionAvailability, Evidence: []string{}}
	replicas, leader, pdb := findingOf(op, "availability.replicas"), findingOf(op, "availability.leader-election"), findingOf(op, "availability.pdb")
	for _, f := range []Finding{replicas, leader, pdb} {
		a.Evidence = append(a.Evidence, f.Evidence...)
	}
	le := "leader election: " + leader.Message
	switch {
	case op.Replicas < 2:
		a.Answer = No
		a.Summary = fmt.Sprintf("%d replica", op.Replicas)
		if op.Replicas != 1 {
			a.Summary += "s"
		}
		if leader.Result == Pass {
			a.Summary += "; it can be scaled out (" + le + ")"
		} else {
			a.Summary += "; " + le
		}
	case leader.Result == Pass && pdb.Result == Pass:
		a.Answer = Yes
		a.Summary = fmt.Sprintf("%d replicas; %s; %s", op.Replicas, le, pdb.Message)
	case leader.Result == Unknown || pdb.Result == Unknown:
		a.Answer = Unknown
		a.Summary = fmt.Sprintf("%d replicas; %s; %s", op.Replicas, le, pdb.Message)
	default:
		a.Answer = Partly
		a.Summary = fmt.Sprintf("%d replicas; %s; %s", op.Replicas, le, pdb.Message)
	}
	return a
}

func observabilityAnswer(op Operator, w workload) Answer {
	a := Answer{ID: "observability", Question: QuestionObservability, Evidence: []string{}}
	metrics, live, ready := findingOf(op, "observability.metrics"), findingOf(op, "observability.liveness"), findingOf(op, "observability.readiness")
	a.Evidence = append(a.Evidence, metrics.Evidence...)
	for _, c := range w.template.Spec.Containers {
		var probes []string
		for _, p := range []struct {
			name  string
			probe *corev1.Probe
		}{{"liveness", c.LivenessProbe}, {"readiness", c.ReadinessProbe}} {
			if p.probe != nil {
				probes = append(probes, p.name+" "+probeText(p.probe))
			}
		}
		if len(probes) > 0 {
			a.Evidence = append(a.Evidence, fmt.Sprintf("container %s: %s", c.Name, strings.Join(probes, ", ")))
		}
	}
	probes := "liveness and readiness probes"
	switch {
	case live.Result != Pass && ready.Result != Pass:
		probes = "no probes"
	case live.Result != Pass:
		probes = "a readiness probe, no liveness probe"
	case ready.Result != Pass:
		probes = "a liveness probe, no readiness probe"
	}
	switch {
	case metrics.Result == Unknown:
		a.Answer, a.Summary = Unknown, metrics.Message+"; "+probes
	case metrics.Result == Pass && live.Result == Pass && ready.Result == Pass:
		a.Answer, a.Summary = Yes, metrics.Message+"; "+probes
	case metrics.Result != Pass && probes == "no probes":
		a.Answer, a.Summary = No, "no metrics endpoint found; no probes"
	default:
		a.Answer = Partly
		if metrics.Result == Pass {
			a.Summary = metrics.Message + "; " + probes
		} else {
			a.Summary = "no metrics endpoint found; " + probes
		}
	}
	return a
}

func probeText(p *corev1.Probe) string {
	switch {
	case p.HTTPGet != nil:
		return "GET " + p.HTTPGet.Path + " on port " + p.HTTPGet.Port.String()
	case p.GRPC != nil:
		return fmt.Sprintf("gRPC on port %d", p.GRPC.Port)
	case p.TCPSocket != nil:
		return "TCP on port " + p.TCPSocket.Port.String()
	case p.Exec != nil:
		return "exec " + strings.Join(p.Exec.Command, " ")
	}
	return "probe"
}

func maintenanceAnswer(op Operator) Answer {
	a := Answer{ID: "maintenance", Question: QuestionMaintenance, Evidence: []string{}}
	version, tag := findingOf(op, "maintenance.version"), findingOf(op, "maintenance.image-tag")
	a.Evidence = append(append(a.Evidence, version.Evidence...), tag.Evidence...)
	a.Evidence = slices.Compact(a.Evidence)
	const caveat = " (the cluster shows which release runs and how it is pinned, not whether the project still releases)"
	switch {
	case version.Result != Pass:
		a.Answer, a.Summary = Unknown, version.Message+"; "+tag.Message
	case tag.Result == Pass:
		a.Answer, a.Summary = Yes, "release "+op.Version+", "+tag.Message+caveat
	default:
		a.Answer, a.Summary = Partly, "release "+op.Version+"; "+tag.Message+caveat
	}
	return a
}
