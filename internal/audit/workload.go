package audit

import (
	"fmt"
	"slices"
	"strings"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
)

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

// selects reports whether a selector of the namespace selects the workload's pods
// (its template's labels). A nil selector selects nothing.
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

// leaseFinding: leader election is recognized by a Lease, in a namespace where the
// workload may hold one (leaseNamespaces), that (1) one of its pods holds, or else (2)
// its ServiceAccount may update: a Lease held from elsewhere, or between two holders,
// still tells that the operator elects a leader there.
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
		return f
	}
	f.Result, f.Penalty = Fail, 10
	mayUpdate := slices.ContainsFunc(where, func(ns string) bool {
		return slices.ContainsFunc(w.grants, func(g grant) bool {
			return (g.namespace == "" || g.namespace == ns) && allows(g.rule, coordinationGroup, "leases", "update")
		})
	})
	if mayUpdate {
		f.Message = fmt.Sprintf("no leader election Lease in %s (its ServiceAccount may update Leases there): replicas would reconcile at once, so it cannot be scaled out safely", strings.Join(where, ", "))
	} else {
		f.Message = "no leader election: no Lease held by its pods, and its ServiceAccount may not update Leases in its namespace; replicas would reconcile at once"
	}
	return f
}

// availabilityFindings grades replicas, leader election, disruption budget,
// resources, image pinning and security context.
func availabilityFindings(w workload, s *Snapshot) []Finding {
	f := func(check, result string, penalty int, format string, args ...any) Finding {
		return Finding{Category: CategoryAvailability, Check: check, Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...)}
	}
	var out []Finding
	switch {
	case w.replicas >= 2:
		out = append(out, f("availability.replicas", Pass, 0, "%d replicas", w.replicas))
	case w.replicas == 1:
		out = append(out, f("availability.replicas", Fail, 25, "1 replica: nothing reconciles while its pod is rescheduled or its node fails"))
	default:
		out = append(out, f("availability.replicas", Fail, 25, "scaled to 0 replicas: nothing reconciles"))
	}
	out = append(out, leaseFinding(w, s))

	pdb := ""
	for _, p := range s.PDBs {
		if p.Namespace == w.namespace && selects(p.Spec.Selector, w) {
			pdb = p.Name
			break
		}
	}
	if pdb != "" {
		out = append(out, f("availability.pdb", Pass, 0, "PodDisruptionBudget %s selects its pods", pdb))
	} else {
		out = append(out, f("availability.pdb", Fail, 10, "no PodDisruptionBudget selects its pods: a node drain may evict them all at once"))
	}

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
		r := Warn
		if penalty >= 10 {
			r = Fail
		}
		return Finding{Category: CategoryAvailability, Check: id, Result: r, Penalty: penalty, Message: bad + ": " + strings.Join(failing, ", ")}
	}
	return []Finding{
		check("security.run-as-non-root", rootOK, 5, "runAsNonRoot on every container", "runAsNonRoot not set for container"),
		check("security.read-only-root-filesystem", roFS, 5, "read-only root filesystem on every container", "readOnlyRootFilesystem not set for container"),
		check("security.no-privilege-escalation", noEsc, 5, "allowPrivilegeEscalation false on every container", "allowPrivilegeEscalation not false for container"),
		check("security.seccomp", seccomp, 5, "seccomp profile RuntimeDefault (or Localhost) on every container", "no RuntimeDefault or Localhost seccomp profile for container"),
		check("security.privileged", privileged, 20, "no privileged container", "privileged container (root on the node)"),
	}
}

// metricsPortName reports whether a container port's name says it serves metrics.
func metricsPortName(name string) bool {
	return name == "metrics" || strings.HasSuffix(name, "-metrics") || strings.HasPrefix(name, "metrics-")
}

// observabilityFindings grades the metrics endpoint and the probes.
func observabilityFindings(w workload, s *Snapshot) []Finding {
	f := func(check, result string, penalty int, format string, args ...any) Finding {
		return Finding{Category: CategoryObservability, Check: check, Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...)}
	}
	var out []Finding
	var how []string
	for _, c := range w.template.Spec.Containers {
		for _, p := range c.Ports {
			if metricsPortName(p.Name) {
				how = append(how, fmt.Sprintf("port %s (%d) of container %s", p.Name, p.ContainerPort, c.Name))
			}
		}
	}
	for _, m := range s.Monitors {
		if m.Namespace != w.namespace {
			continue
		}
		switch m.Kind {
		case "PodMonitor":
			if selects(&m.Selector, w) {
				how = append(how, "PodMonitor "+m.Name)
			}
		case "ServiceMonitor":
			sel, err := metav1.LabelSelectorAsSelector(&m.Selector)
			if err != nil {
				continue
			}
			for _, svc := range s.Services {
				if svc.Namespace == w.namespace && sel.Matches(labels.Set(svc.Labels)) && len(svc.Spec.Selector) > 0 &&
					labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels)) {
					how = append(how, "ServiceMonitor "+m.Name+" (Service "+svc.Name+")")
				}
			}
		}
	}
	if w.template.Annotations["prometheus.io/scrape"] == "true" {
		how = append(how, "annotation prometheus.io/scrape")
	}
	if len(how) > 0 {
		out = append(out, f("observability.metrics", Pass, 0, "metrics: %s", strings.Join(how, "; ")))
	} else {
		out = append(out, f("observability.metrics", Fail, 40, "no metrics endpoint found: no container port named metrics (or *-metrics, metrics-*), no ServiceMonitor or PodMonitor, no prometheus.io/scrape annotation"))
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
