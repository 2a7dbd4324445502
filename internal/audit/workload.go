package audit

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// Resources the reader lists in the operators' namespaces, as RBAC names them.
const (
	resLeases          = "leases.coordination.k8s.io"
	resPDBs            = "poddisruptionbudgets.policy"
	resPods            = "pods"
	resServices        = "services"
	resServiceMonitors = "servicemonitors.monitoring.coreos.com"
	resPodMonitors     = "podmonitors.monitoring.coreos.com"
)

// unread returns the lists of resource the reader could not make in namespace ns
// (or in every namespace).
func (s *Snapshot) unread(resource, ns string) []Unread {
	var out []Unread
	for _, u := range s.Unread {
		if u.Resource == resource && (u.Namespace == ns || u.Namespace == "") {
			out = append(out, u)
		}
	}
	return out
}

// unknownFinding reports a check the audit could not answer, and what would.
func unknownFinding(category, check, what string, us []Unread) Finding {
	var perms []string
	for _, u := range us {
		if p := u.Permission(); !slices.Contains(perms, p) {
			perms = append(perms, p)
		}
	}
	return Finding{Category: category, Check: check, Result: Unknown,
		Message:  fmt.Sprintf("unknown: %s could not be read (%s); %s would answer it", what, us[0].Error, strings.Join(perms, " and ")),
		Evidence: perms}
}

// podsOf returns the names of the workload's pods: pods in its namespace that its
// selector selects.
func podsOf(w workload, s *Snapshot) []string {
	sel, err := metav1.LabelSelectorAsSelector(w.selector)
	if err != nil || sel.Empty() {
		return nil
	}
	var out []string
	for _, p := range s.Pods {
		if p.Namespace == w.namespace && sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p.Name)
		}
	}
	return out
}

// selects reports whether a selector selects the workload's pods (its template's
// labels). A nil selector selects nothing.
func selects(sel *metav1.LabelSelector, w workload) bool {
	if sel == nil {
		return false
	}
	s, err := metav1.LabelSelectorAsSelector(sel)
	return err == nil && s.Matches(labels.Set(w.template.Labels))
}

// coordinationGroup is the API group of Leases.
const coordinationGroup = "coordination.k8s.io"

// leaseNamespaces returns where a workload may hold its leader election Lease: its own
// namespace (operators elect there by default), and every namespace where a
// RoleBinding lets its ServiceAccount update Leases. cert-manager, for one, elects in
// kube-system with a Role there; a ClusterRoleBinding says nothing about where.
func leaseNamespaces(w workload) []string {
	out := []string{w.namespace}
	for _, g := range w.grants {
		if g.namespace != "" && !slices.Contains(out, g.namespace) && allows(g.rule, coordinationGroup, "leases", "update") {
			out = append(out, g.namespace)
		}
	}
	return out
}

// mayUpdateLease reports whether the workload's ServiceAccount may update the Lease
// namespace/name: a rule without resourceNames, or one that names it (the least
// privilege a leader election needs, as cert-manager's Roles have).
func mayUpdateLease(w workload, namespace, name string) bool {
	return slices.ContainsFunc(w.grants, func(g grant) bool {
		return (g.namespace == "" || g.namespace == namespace) && allows(g.rule, coordinationGroup, "leases", "update") &&
			(len(g.rule.ResourceNames) == 0 || slices.Contains(g.rule.ResourceNames, name))
	})
}

// heldBy reports whether a Lease's holder is one of the pods. client-go and
// controller-runtime name the holder after the host name, which is the pod's name,
// followed by "_" and a UUID; cert-manager follows it with "-external-<lease>".
func heldBy(holder string, pods []string) bool {
	return holder != "" && slices.ContainsFunc(pods, func(p string) bool {
		return holder == p || strings.HasPrefix(holder, p+"_") || strings.HasPrefix(holder, p+"-")
	})
}

// normalized keeps only the letters of a flag's or variable's name, upper-cased.
func normalized(name string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r >= 'a' && r <= 'z':
			return r - 'a' + 'A'
		case r >= 'A' && r <= 'Z':
			return r
		}
		return -1
	}, name)
}

// leaderElectionFlags are the names (normalized) of the flags operators turn leader
// election on with: controller-runtime's scaffolds (--leader-elect, older
// --enable-leader-election), and their variants.
var leaderElectionFlags = []string{"LEADERELECT", "LEADERELECTION", "ENABLELEADERELECTION", "LEADERELECTIONENABLED", "LEADERELECTENABLED"}

// isLeaderElectionEnv reports whether an environment variable's name is a switch of
// leader election (STRIMZI_LEADER_ELECTION_ENABLED, ENABLE_LEADER_ELECTION,
// LEADER_ELECT), not one of its settings (..._LEASE_NAME, ..._NAMESPACE).
func isLeaderElectionEnv(name string) bool {
	n := normalized(name)
	return strings.HasSuffix(n, "LEADERELECT") || strings.HasSuffix(n, "LEADERELECTION") ||
		strings.HasSuffix(n, "LEADERELECTIONENABLED") || strings.HasSuffix(n, "LEADERELECTENABLED") ||
		strings.HasSuffix(n, "LEADERELECTIONENABLE")
}

// leaderElectionInSpec reads the pod template for the switch of leader election: an
// argument (--leader-elect, --leader-elect=false, --enable-leader-election) or an
// environment variable (STRIMZI_LEADER_ELECTION_ENABLED=true). found is false when
// the spec says nothing; evidence names what was read.
func leaderElectionInSpec(w workload) (on, found bool, evidence string) {
	for _, c := range w.template.Spec.Containers {
		for _, arg := range append(slices.Clone(c.Command), c.Args...) {
			if !strings.HasPrefix(arg, "-") {
				continue
			}
			name, val, hasVal := strings.Cut(strings.TrimLeft(arg, "-"), "=")
			if !slices.Contains(leaderElectionFlags, normalized(name)) {
				continue
			}
			v := true
			if hasVal {
				var err error
				if v, err = strconv.ParseBool(val); err != nil {
					continue
				}
			}
			return v, true, fmt.Sprintf("argument %s of container %s", arg, c.Name)
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil || !isLeaderElectionEnv(e.Name) {
				continue
			}
			v, err := strconv.ParseBool(e.Value)
			if err != nil {
				continue
			}
			return v, true, fmt.Sprintf("environment variable %s=%s of container %s", e.Name, e.Value, c.Name)
		}
	}
	return false, false, ""
}

// leaseFinding: leader election is recognized, in this order, by a Lease, in a
// namespace where the workload may hold one (leaseNamespaces), that (1) one of its
// pods holds, or else (2) its ServiceAccount may update; or else (3) by its spec
// asking for it (a flag or an environment variable), when its ServiceAccount may
// update Leases: a freshly installed or crash-looping operator has no Lease yet. The
// message says which evidence was used.
func leaseFinding(w workload, s *Snapshot) Finding {
	f := Finding{Category: CategoryAvailability, Check: "availability.leader-election"}
	pods := podsOf(w, s)
	where := leaseNamespaces(w)
	var candidate *coordinationv1.Lease
	for i := range s.Leases {
		l := &s.Leases[i]
		if !slices.Contains(where, l.Namespace) {
			continue
		}
		holder := ptr.Deref(l.Spec.HolderIdentity, "")
		if heldBy(holder, pods) {
			f.Result, f.Message = Pass, fmt.Sprintf("Lease %s/%s is held by its pod (holder %s)", l.Namespace, l.Name, holder)
			f.Evidence = []string{fmt.Sprintf("Lease %s/%s, holder %s", l.Namespace, l.Name, holder)}
			return f
		}
		if candidate == nil && mayUpdateLease(w, l.Namespace, l.Name) {
			candidate = l
		}
	}
	if candidate != nil {
		in := ""
		if candidate.Namespace == w.namespace {
			in = " in its namespace"
		}
		f.Result, f.Message = Pass, fmt.Sprintf("Lease %s/%s%s, which its ServiceAccount may update (its holder is not one of the workload's pods)", candidate.Namespace, candidate.Name, in)
		f.Evidence = []string{fmt.Sprintf("Lease %s/%s, holder %s", candidate.Namespace, candidate.Name, ptr.Deref(candidate.Spec.HolderIdentity, ""))}
		return f
	}
	mayUpdate := slices.ContainsFunc(where, func(ns string) bool {
		return slices.ContainsFunc(w.grants, func(g grant) bool {
			return (g.namespace == "" || g.namespace == ns) && allows(g.rule, coordinationGroup, "leases", "update")
		})
	})
	on, found, spec := leaderElectionInSpec(w)
	switch {
	case found && on && mayUpdate:
		f.Result, f.Message = Pass, "no Lease found yet; its spec asks for leader election: "+spec
		f.Evidence = []string{w.ref() + ": " + spec}
		return f
	case found && on:
		f.Result, f.Penalty = Fail, 10
		f.Message = "its spec asks for leader election (" + spec + ") but its ServiceAccount may not update Leases: no replica can lead"
		f.Evidence = []string{w.ref() + ": " + spec}
		return f
	}
	var unread []Unread
	for _, ns := range where {
		unread = append(unread, s.unread(resLeases, ns)...)
	}
	if len(unread) > 0 && (!found || on) {
		return unknownFinding(CategoryAvailability, f.Check, "Leases", unread)
	}
	f.Result, f.Penalty = Fail, 10
	switch {
	case found:
		f.Message = "leader election turned off in its spec (" + spec + "): replicas would reconcile at once, so it cannot be scaled out safely"
		f.Evidence = []string{w.ref() + ": " + spec}
	case mayUpdate:
		f.Message = fmt.Sprintf("no leader election Lease in %s (its ServiceAccount may update Leases there) and nothing in its spec asks for one: replicas would reconcile at once, so it cannot be scaled out safely", strings.Join(where, ", "))
	default:
		f.Message = "no leader election: no Lease held by its pods, nothing in its spec, and its ServiceAccount may not update Leases in its namespace; replicas would reconcile at once"
	}
	return f
}

// allowsNoDisruption reports whether a budget forbids evicting any of replicas pods,
// which makes `kubectl drain` wait forever on their node.
func allowsNoDisruption(p policyv1.PodDisruptionBudget, replicas int32) bool {
	if mu := p.Spec.MaxUnavailable; mu != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(mu, int(replicas), true)
		return err == nil && v == 0
	}
	if ma := p.Spec.MinAvailable; ma != nil {
		v, err := intstr.GetScaledValueFromIntOrPercent(ma, int(replicas), true)
		return err == nil && v >= int(replicas)
	}
	return false
}

func pdbFinding(w workload, s *Snapshot) Finding {
	f := func(result string, penalty int, evidence []string, format string, args ...any) Finding {
		return Finding{Category: CategoryAvailability, Check: "availability.pdb", Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...), Evidence: evidence}
	}
	var pdb *policyv1.PodDisruptionBudget
	for i := range s.PDBs {
		if p := &s.PDBs[i]; p.Namespace == w.namespace && selects(p.Spec.Selector, w) {
			pdb = p
			break
		}
	}
	// Below two replicas only a budget that blocks drains matters; either way the
	// budgets must have been read.
	if us := s.unread(resPDBs, w.namespace); len(us) > 0 && (pdb == nil || w.replicas < 2) {
		return unknownFinding(CategoryAvailability, "availability.pdb", "PodDisruptionBudgets", us)
	}
	if w.replicas < 2 {
		if pdb != nil && allowsNoDisruption(*pdb, w.replicas) {
			return f(Warn, 5, []string{"PodDisruptionBudget " + w.namespace + "/" + pdb.Name},
				"PodDisruptionBudget %s allows no disruption of its only pod: `kubectl drain` of that node waits until someone deletes the pod or the budget", pdb.Name)
		}
		return f(NotApplicable, 0, nil, "not applicable at %s: a budget that kept its only pod would block `kubectl drain` of its node, and one that does not keeps nothing", plural(int(w.replicas), "replica"))
	}
	if pdb != nil {
		return f(Pass, 0, []string{"PodDisruptionBudget " + w.namespace + "/" + pdb.Name}, "PodDisruptionBudget %s selects its pods", pdb.Name)
	}
	return f(Fail, 10, nil, "no PodDisruptionBudget selects its %d pods: a node drain may evict them all at once", w.replicas)
}

// availabilityFindings grades replicas, leader election, disruption budget,
// resources, image pinning and security context.
func availabilityFindings(w workload, s *Snapshot) []Finding {
	f := func(check, result string, penalty int, format string, args ...any) Finding {
		return Finding{Category: CategoryAvailability, Check: check, Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...)}
	}
	var out []Finding
	replicas := fmt.Sprintf("%s: replicas %d", w.ref(), w.replicas)
	switch {
	case w.replicas >= 2:
		out = append(out, f("availability.replicas", Pass, 0, "%d replicas", w.replicas))
	case w.replicas == 1:
		out = append(out, f("availability.replicas", Fail, 25, "1 replica: nothing reconciles while its pod is rescheduled or its node fails"))
	default:
		out = append(out, f("availability.replicas", Fail, 25, "scaled to 0 replicas: nothing reconciles"))
	}
	out[0].Evidence = []string{replicas}
	out = append(out, leaseFinding(w, s), pdbFinding(w, s))

	containers := w.template.Spec.Containers
	var noRequests, noLimit, unpinned []string
	for _, c := range containers {
		if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() {
			noRequests = append(noRequests, c.Name)
		}
		if c.Resources.Limits.Memory().IsZero() {
			noLimit = append(noLimit, c.Name)
		}
		if !strings.Contains(c.Image, "@sha256:") {
			unpinned = append(unpinned, c.Name+" ("+c.Image+")")
		}
	}
	if len(noRequests) > 0 {
		out = append(out, f("availability.requests", Fail, 10, "no CPU and memory requests for container %s: it may be starved or evicted first", strings.Join(noRequests, ", ")))
	} else {
		out = append(out, f("availability.requests", Pass, 0, "CPU and memory requests on every container"))
	}
	if len(noLimit) > 0 {
		out = append(out, f("availability.limits", Warn, 5, "no memory limit for container %s: a leak takes the node's memory", strings.Join(noLimit, ", ")))
	} else {
		out = append(out, f("availability.limits", Pass, 0, "a memory limit on every container"))
	}
	if len(unpinned) > 0 {
		out = append(out, f("availability.image-digest", Warn, 5, "image not pinned by digest: %s (a tag can be moved)", strings.Join(unpinned, ", ")))
	} else {
		out = append(out, f("availability.image-digest", Pass, 0, "every image pinned by digest"))
	}
	return append(out, securityFindings(w)...)
}

// securityFindings checks each container's effective security context (the
// container's settings over the pod's).
func securityFindings(w workload) []Finding {
	pod := w.template.Spec.SecurityContext
	if pod == nil {
		pod = &corev1.PodSecurityContext{}
	}
	var rootOK, roFS, noEsc, seccomp, privileged []string
	for _, c := range w.template.Spec.Containers {
		sc := c.SecurityContext
		if sc == nil {
			sc = &corev1.SecurityContext{}
		}
		nonRoot := pod.RunAsNonRoot
		if sc.RunAsNonRoot != nil {
			nonRoot = sc.RunAsNonRoot
		}
		if nonRoot == nil || !*nonRoot {
			rootOK = append(rootOK, c.Name)
		}
		if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
			roFS = append(roFS, c.Name)
		}
		if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
			noEsc = append(noEsc, c.Name)
		}
		profile := pod.SeccompProfile
		if sc.SeccompProfile != nil {
			profile = sc.SeccompProfile
		}
		if profile == nil || (profile.Type != corev1.SeccompProfileTypeRuntimeDefault && profile.Type != corev1.SeccompProfileTypeLocalhost) {
			seccomp = append(seccomp, c.Name)
		}
		if sc.Privileged != nil && *sc.Privileged {
			privileged = append(privileged, c.Name)
		}
	}
	check := func(id string, failing []string, penalty int, ok, bad string) Finding {
		if len(failing) == 0 {
			return Finding{Category: CategoryAvailability, Check: id, Result: Pass, Message: ok}
		}
		return Finding{Category: CategoryAvailability, Check: id, Result: resultFor(penalty), Penalty: penalty, Message: bad + ": " + strings.Join(failing, ", ")}
	}
	return []Finding{
		check("security.run-as-non-root", rootOK, 5, "runAsNonRoot on every container", "runAsNonRoot not set for container"),
		check("security.read-only-root-filesystem", roFS, 5, "read-only root filesystem on every container", "readOnlyRootFilesystem not set for container"),
		check("security.no-privilege-escalation", noEsc, 5, "allowPrivilegeEscalation false on every container", "allowPrivilegeEscalation not false for container"),
		check("security.seccomp", seccomp, 5, "seccomp profile RuntimeDefault (or Localhost) on every container", "no RuntimeDefault or Localhost seccomp profile for container"),
		check("security.privileged", privileged, 20, "no privileged container", "privileged container (root on the node)"),
	}
}

// metricsPortName reports whether a port's name says it serves metrics.
func metricsPortName(name string) bool {
	return name == "metrics" || strings.HasSuffix(name, "-metrics") || strings.HasPrefix(name, "metrics-")
}

// metricsFlags are the flags (normalized) that set a metrics address in
// controller-runtime's scaffolds (kubebuilder v4's --metrics-bind-address, v2's
// --metrics-addr) and their variants; "0" turns metrics off.
var metricsFlags = []string{"METRICSBINDADDRESS", "METRICSADDR", "METRICSBINDADDR", "METRICSADDRESS", "METRICSPORT"}

// metricsFlag returns the argument that makes a container serve metrics, or "".
func metricsFlag(c corev1.Container) string {
	args := append(slices.Clone(c.Command), c.Args...)
	for i, arg := range args {
		if !strings.HasPrefix(arg, "-") {
			continue
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(arg, "-"), "=")
		if !slices.Contains(metricsFlags, normalized(name)) {
			continue
		}
		if !hasVal && i+1 < len(args) {
			val, arg = args[i+1], arg+" "+args[i+1]
		}
		if v := strings.TrimSpace(val); v != "" && v != "0" && v != ":0" && v != "false" {
			return arg
		}
	}
	return ""
}

// probesOn lists the HTTP paths the container's probes ask on port (by name or number).
func probesOn(c corev1.Container, port corev1.ContainerPort) []string {
	var out []string
	for _, p := range []*corev1.Probe{c.LivenessProbe, c.ReadinessProbe, c.StartupProbe} {
		if p == nil || p.HTTPGet == nil {
			continue
		}
		if hp := p.HTTPGet.Port; (hp.Type == intstr.String && hp.StrVal == port.Name) || (hp.Type == intstr.Int && hp.IntVal == port.ContainerPort) {
			if !slices.Contains(out, p.HTTPGet.Path) {
				out = append(out, p.HTTPGet.Path)
			}
		}
	}
	return out
}

// monitorCovers reports whether a monitor looks in namespace ns.
func monitorCovers(m Monitor, ns string) bool {
	return m.AnyNamespace || slices.Contains(m.MatchNames, ns) || (len(m.MatchNames) == 0 && m.Namespace == ns)
}

// metricsEvidence lists what shows that the workload serves metrics, strongest first:
// a monitor that scrapes it (in any namespace whose namespaceSelector covers it), a
// scrape annotation, a port or Service named for metrics, a metrics address flag, an
// HTTP port that serves its probes (where Prometheus' default path /metrics is
// served by the same server: inferred, and said so).
func metricsEvidence(w workload, s *Snapshot) []string {
	var how []string
	for _, m := range s.Monitors {
		if !monitorCovers(m, w.namespace) {
			continue
		}
		switch m.Kind {
		case "PodMonitor":
			if selects(&m.Selector, w) {
				how = append(how, fmt.Sprintf("PodMonitor %s/%s", m.Namespace, m.Name))
			}
		case "ServiceMonitor":
			sel, err := metav1.LabelSelectorAsSelector(&m.Selector)
			if err != nil {
				continue
			}
			for _, svc := range s.Services {
				if svc.Namespace == w.namespace && sel.Matches(labels.Set(svc.Labels)) && serviceSelects(svc, w) {
					how = append(how, fmt.Sprintf("ServiceMonitor %s/%s (Service %s/%s)", m.Namespace, m.Name, svc.Namespace, svc.Name))
				}
			}
		}
	}
	if w.template.Annotations["prometheus.io/scrape"] == "true" {
		how = append(how, "annotation prometheus.io/scrape on its pods")
	}
	for _, svc := range s.Services {
		if svc.Namespace != w.namespace || !serviceSelects(svc, w) {
			continue
		}
		if svc.Annotations["prometheus.io/scrape"] == "true" {
			how = append(how, fmt.Sprintf("annotation prometheus.io/scrape on Service %s/%s", svc.Namespace, svc.Name))
		}
		for _, p := range svc.Spec.Ports {
			if metricsPortName(p.Name) || strings.HasSuffix(svc.Name, "-metrics-service") || strings.HasSuffix(svc.Name, "-metrics") {
				how = append(how, fmt.Sprintf("Service %s/%s port %s (%d)", svc.Namespace, svc.Name, p.Name, p.Port))
				break
			}
		}
	}
	for _, c := range w.template.Spec.Containers {
		for _, p := range c.Ports {
			if metricsPortName(p.Name) {
				how = append(how, fmt.Sprintf("port %s (%d) of container %s", p.Name, p.ContainerPort, c.Name))
			}
		}
		if arg := metricsFlag(c); arg != "" {
			how = append(how, fmt.Sprintf("argument %s of container %s", arg, c.Name))
		}
	}
	if len(how) > 0 {
		return how
	}
	for _, c := range w.template.Spec.Containers {
		for _, p := range c.Ports {
			if paths := probesOn(c, p); p.Name == "http" && len(paths) > 0 {
				how = append(how, fmt.Sprintf("port http (%d) of container %s, the HTTP server of its probes (%s), where /metrics is Prometheus' default path (inferred: nothing names it)",
					p.ContainerPort, c.Name, strings.Join(paths, ", ")))
			}
		}
	}
	return how
}

// observabilityFindings grades the metrics endpoint and the probes.
func observabilityFindings(w workload, s *Snapshot) []Finding {
	f := func(check, result string, penalty int, format string, args ...any) Finding {
		return Finding{Category: CategoryObservability, Check: check, Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...)}
	}
	var out []Finding
	how := metricsEvidence(w, s)
	unread := append(s.unread(resServices, w.namespace), s.unread(resServiceMonitors, w.namespace)...)
	unread = append(unread, s.unread(resPodMonitors, w.namespace)...)
	switch {
	case len(how) > 0:
		m := f("observability.metrics", Pass, 0, "metrics: %s", strings.Join(how, "; "))
		m.Evidence = how
		out = append(out, m)
	case len(unread) > 0:
		out = append(out, unknownFinding(CategoryObservability, "observability.metrics", "what would show a metrics endpoint (Services or monitors)", unread))
	default:
		out = append(out, f("observability.metrics", Fail, 40, "no metrics endpoint found: no container port or Service named metrics (or *-metrics, metrics-*), no metrics address flag, no ServiceMonitor or PodMonitor covering its namespace, no prometheus.io/scrape annotation"))
	}
	var noLive, noReady []string
	for _, c := range w.template.Spec.Containers {
		if c.LivenessProbe == nil {
			noLive = append(noLive, c.Name)
		}
		if c.ReadinessProbe == nil {
			noReady = append(noReady, c.Name)
		}
	}
	if len(noLive) > 0 {
		out = append(out, f("observability.liveness", Fail, 30, "no liveness probe for container %s: a stuck process is never restarted", strings.Join(noLive, ", ")))
	} else {
		out = append(out, f("observability.liveness", Pass, 0, "a liveness probe on every container"))
	}
	if len(noReady) > 0 {
		out = append(out, f("observability.readiness", Fail, 30, "no readiness probe for container %s: its state is not visible to the cluster", strings.Join(noReady, ", ")))
	} else {
		out = append(out, f("observability.readiness", Pass, 0, "a readiness probe on every container"))
	}
	return out
}
