package audit

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// workload is a Deployment or StatefulSet, reduced to what the audit looks at.
type workload struct {
	kind, namespace, name string
	replicas              int32
	selector              *metav1.LabelSelector
	template              corev1.PodTemplateSpec
	// labels and annotations are the Deployment's or StatefulSet's own.
	labels, annotations map[string]string
	// serviceAccount is the name of the ServiceAccount its pods run as, in namespace.
	serviceAccount string
	grants         []grant
}

func (w workload) ref() string { return w.kind + " " + w.namespace + "/" + w.name }

func workloads(s *Snapshot, idx *rbacIndex) []workload {
	var out []workload
	add := func(kind string, meta metav1.ObjectMeta, replicas *int32, sel *metav1.LabelSelector, tpl corev1.PodTemplateSpec) {
		w := workload{kind: kind, namespace: meta.Namespace, name: meta.Name, replicas: 1, selector: sel, template: tpl,
			labels: meta.Labels, annotations: meta.Annotations}
		if replicas != nil {
			w.replicas = *replicas // the API server defaults it to 1
		}
		w.serviceAccount = tpl.Spec.ServiceAccountName
		if w.serviceAccount == "" {
			w.serviceAccount = tpl.Spec.DeprecatedServiceAccount // still honoured by the API server
		}
		if w.serviceAccount == "" {
			w.serviceAccount = "default"
		}
		w.grants = idx.grantsOf(w.namespace, w.serviceAccount)
		out = append(out, w)
	}
	for _, d := range s.Deployments {
		add("Deployment", d.ObjectMeta, d.Spec.Replicas, d.Spec.Selector, d.Spec.Template)
	}
	for _, st := range s.StatefulSets {
		add("StatefulSet", st.ObjectMeta, st.Spec.Replicas, st.Spec.Selector, st.Spec.Template)
	}
	slices.SortFunc(out, func(a, b workload) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name), cmp.Compare(a.kind, b.kind))
	})
	return out
}

// evidence is how strongly a workload's RBAC ties it to a kind.
type evidence int

const (
	noEvidence evidence = iota
	// throughWildcard: it may write the kind only through apiGroups "*".
	throughWildcard
	// writesResources: a rule naming the group lets it write the resources, not their
	// status: a client of the API.
	writesResources
	// controlsKind: a rule naming the group lets it write the kind's status, or, for a
	// kind without a status subresource, the kind itself: what the controller of a
	// resource does.
	controlsKind
)

// tie is a workload's strongest tie to one kind, and the rule that makes it.
type tie struct {
	level evidence
	// controls is set when the rule grants what a controller needs (status, or the
	// kind itself when it has no status), whether or not it names the group; status
	// when that is the kind's status.
	controls, status bool
	kind             string
	permission       string
	via              string
}

func hasStatusSubresource(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Served && v.Subresources != nil && v.Subresources.Status != nil
	})
}

// grantedVerbs names the verbs of want that the rule grants ("*" when it grants all).
func grantedVerbs(verbs []string, want ...string) string {
	if slices.Contains(verbs, "*") {
		return "*"
	}
	var out []string
	for _, v := range want {
		if slices.Contains(verbs, v) {
			out = append(out, v)
		}
	}
	return strings.Join(out, ", ")
}

// kindTie is the strongest tie of a workload to one kind, decided per kind: it
// controls the kind when it may write its status, or, when the kind has no status
// subresource, the kind itself. A client writes the spec and never the status. Rules
// limited by resourceNames are not a controller's, which acts on every object of
// its kinds. grants are the workload's grants that may reach the group.
func kindTie(grants []grant, crd *apiextensionsv1.CustomResourceDefinition) tie {
	group, plural := crd.Spec.Group, crd.Spec.Names.Plural
	status := hasStatusSubresource(crd)
	var best tie
	for _, g := range grants {
		r := g.rule
		if len(r.ResourceNames) > 0 {
			continue
		}
		var t tie
		switch {
		case status && allows(r, group, plural+"/status", "update", "patch"):
			t = tie{level: controlsKind, controls: true, status: true, permission: grantedVerbs(r.Verbs, "update", "patch") + " on " + plural + "/status"}
		case !status && allows(r, group, plural, writeVerbs...):
			t = tie{level: controlsKind, controls: true, permission: grantedVerbs(r.Verbs, writeVerbs...) + " on " + plural + " (no status subresource)"}
		case allows(r, group, plural, writeVerbs...):
			t = tie{level: writesResources, permission: grantedVerbs(r.Verbs, writeVerbs...) + " on " + plural}
		default:
			continue
		}
		if !namesGroup(r, group) {
			t.level = throughWildcard
		}
		t.kind, t.via = crd.Spec.Names.Kind, g.via+" "+g.scope()
		if t.level > best.level || (t.level == best.level && t.controls && !best.controls) {
			best = t
		}
	}
	return best
}

// crdsByGroup returns the CRDs by API group, groups and CRDs sorted by name.
func crdsByGroup(crds []apiextensionsv1.CustomResourceDefinition) ([]string, map[string][]apiextensionsv1.CustomResourceDefinition) {
	by := map[string][]apiextensionsv1.CustomResourceDefinition{}
	for _, c := range crds {
		by[c.Spec.Group] = append(by[c.Spec.Group], c)
	}
	groups := make([]string, 0, len(by))
	for g, cs := range by {
		slices.SortFunc(cs, func(a, b apiextensionsv1.CustomResourceDefinition) int { return cmp.Compare(a.Name, b.Name) })
		groups = append(groups, g)
	}
	slices.Sort(groups)
	return groups, by
}

// discovery is who controls and who writes each group, decided once per snapshot.
type discovery struct {
	s      *Snapshot
	ws     []workload
	groups []string
	by     map[string][]apiextensionsv1.CustomResourceDefinition
	// controllers, writers and evidence are each group's, as reported.
	controllers, writers map[string][]string
	evidence             map[string][]Control
	// kindControllers are the workloads that control each CRD (by its name).
	kindControllers map[string][]string
	// own are the groups each workload controls (by index in ws).
	own [][]string
	// clusterAdmin marks the workloads that hold every verb on every resource of every
	// group cluster-wide.
	clusterAdmin []bool
	// candidates marks the workloads that reach, only through apiGroups "*", what
	// controls a group nobody else controls: the reader reads their namespaces too,
	// as what may tie them to the group lives there.
	candidates []bool
}

// grantsByGroup indexes a workload's grants by the API groups they name; "*" holds
// the rules for every group.
func grantsByGroup(w workload) map[string][]grant {
	out := map[string][]grant{}
	for _, g := range w.grants {
		for _, ag := range g.rule.APIGroups {
			out[ag] = append(out[ag], g)
		}
	}
	return out
}

// discover decides, for every group of CRDs, which workloads control it and which
// only write it, per kind: the controller of a kind writes its status, or, for a kind
// without a status subresource, the kind itself (with the conditions below). A
// workload that reaches a group nobody else controls only through apiGroups "*" is
// its controller when something ties it to the group (projectTie); otherwise it is
// listed as a writer. The caller's Services must include the candidates' namespaces
// for the conversion-webhook tie to be seen.
func discover(s *Snapshot) *discovery {
	idx := newRBACIndex(s)
	d := &discovery{s: s, ws: workloads(s, idx), controllers: map[string][]string{}, writers: map[string][]string{},
		evidence: map[string][]Control{}, kindControllers: map[string][]string{}}
	d.groups, d.by = crdsByGroup(s.CRDs)
	d.own = make([][]string, len(d.ws))
	d.clusterAdmin = make([]bool, len(d.ws))
	d.candidates = make([]bool, len(d.ws))
	indexed := make([]map[string][]grant, len(d.ws))
	for i, w := range d.ws {
		indexed[i] = grantsByGroup(w)
		d.clusterAdmin[i] = slices.ContainsFunc(w.grants, isClusterAdminGrant)
	}
	for _, g := range d.groups {
		crds := d.by[g]
		type wTies struct {
			i    int
			ties []tie // per kind with some tie
			best evidence
		}
		var all []wTies
		for i := range d.ws {
			grants := append(slices.Clone(indexed[i][g]), indexed[i]["*"]...)
			if len(grants) == 0 {
				continue
			}
			wt := wTies{i: i}
			for c := range crds {
				if t := kindTie(grants, &crds[c]); t.level > noEvidence {
					wt.ties = append(wt.ties, t)
					wt.best = max(wt.best, t.level)
				}
			}
			if len(wt.ties) > 0 {
				all = append(all, wt)
			}
		}
		groupHasStatus := slices.ContainsFunc(crds, func(c apiextensionsv1.CustomResourceDefinition) bool { return hasStatusSubresource(&c) })
		control := func(wt wTies, why string) {
			w := d.ws[wt.i]
			d.controllers[g] = append(d.controllers[g], w.ref())
			d.own[wt.i] = append(d.own[wt.i], g)
			for _, t := range wt.ties {
				if t.controls {
					d.evidence[g] = append(d.evidence[g], Control{Workload: w.ref(), Role: RoleController, Kind: t.kind, Permission: t.permission, Via: t.via,
						Wildcard: t.level == throughWildcard, Tie: why})
					name := kindCRDName(crds, t.kind)
					d.kindControllers[name] = append(d.kindControllers[name], w.ref())
				}
			}
		}
		write := func(wt wTies, wildcard bool) {
			w := d.ws[wt.i]
			ref := w.ref()
			if wildcard {
				ref += " (through a wildcard)"
			}
			d.writers[g] = append(d.writers[g], ref)
			d.evidence[g] = append(d.evidence[g], writerControl(w, wt.ties, wildcard))
		}
		has := func(wt wTies, f func(t tie) bool) bool { return slices.ContainsFunc(wt.ties, f) }
		// First the rules that name the group. Its status makes a controller. Writing a
		// kind without a status does when no kind of the group has one, when the
		// workload may also write a sibling's status (through "*"), or when something
		// ties it to the group; otherwise it is a client (CloudNativePG creates the
		// Prometheus Operator's PodMonitors).
		decided := make([]bool, len(all))
		named := false
		for k, wt := range all {
			namedStatus := has(wt, func(t tie) bool { return t.level == controlsKind && t.status })
			namedStatusless := has(wt, func(t tie) bool { return t.level == controlsKind && !t.status })
			wildStatus := has(wt, func(t tie) bool { return t.level == throughWildcard && t.status })
			switch {
			case namedStatus, namedStatusless && (!groupHasStatus || wildStatus):
				control(wt, "")
			case namedStatusless:
				d.candidates[wt.i] = true
				why := projectTie(d.ws[wt.i], g, crds, s)
				if why == "" {
					write(wt, false)
					decided[k] = true
					continue
				}
				control(wt, why)
			default:
				continue
			}
			decided[k], named = true, true
		}
		// Then the workloads that reach the group only through apiGroups "*": the
		// controller of a group nobody else controls when something ties them to it.
		for k, wt := range all {
			if decided[k] {
				continue
			}
			switch {
			case wt.best == throughWildcard && !named && has(wt, func(t tie) bool { return t.controls }):
				d.candidates[wt.i] = true
				if why := projectTie(d.ws[wt.i], g, crds, s); why != "" {
					control(wt, why)
				} else {
					write(wt, true)
				}
			case wt.best == throughWildcard:
				write(wt, true)
			default:
				write(wt, false)
			}
		}
	}
	return d
}

func kindCRDName(crds []apiextensionsv1.CustomResourceDefinition, kind string) string {
	for _, c := range crds {
		if c.Spec.Names.Kind == kind {
			return c.Name
		}
	}
	return ""
}

// writerControl is the evidence for a writer: its strongest tie.
func writerControl(w workload, ties []tie, wildcard bool) Control {
	best := ties[0]
	for _, t := range ties[1:] {
		if t.level > best.level {
			best = t
		}
	}
	return Control{Workload: w.ref(), Role: RoleWriter, Kind: best.kind, Permission: best.permission, Via: best.via, Wildcard: wildcard}
}

// tieLabels are the labels that, carried with the same value by a CRD and a
// workload, say that they were installed together as one project.
var tieLabels = []string{"app.kubernetes.io/part-of", "app.kubernetes.io/name", "app.kubernetes.io/instance", "app"}

// Helm's annotations on every object a release installs from its templates.
const (
	helmReleaseName      = "meta.helm.sh/release-name"
	helmReleaseNamespace = "meta.helm.sh/release-namespace"
)

// nameSuffixes are taken off a namespace's or workload's name to find the project's
// name in it: cnpg-system, ledger-controller-manager.
var nameSuffixes = []string{"-controller-manager", "-controllers", "-controller", "-operators", "-operator", "-manager", "-system"}

// projectTie says what ties a workload to an API group it may act on without
// saying so by its status (through apiGroups "*", or by writing kinds without a
// status), or "" when nothing does: a label it shares with one of
// the group's CRDs (part-of, name, instance, app), the Helm release that installed
// both, a conversion webhook of the group served by its pods, or its name (or its
// namespace's) naming a part of the group (cnpg-system and postgresql.cnpg.io).
func projectTie(w workload, group string, crds []apiextensionsv1.CustomResourceDefinition, s *Snapshot) string {
	wl := labels.Merge(w.template.Labels, w.labels)
	for i := range crds {
		c := &crds[i]
		for _, key := range tieLabels {
			if v := c.Labels[key]; v != "" && wl[key] == v {
				return fmt.Sprintf("label %s=%s on CRD %s and on the workload", key, v, c.Name)
			}
		}
		if rel := c.Annotations[helmReleaseName]; rel != "" && rel == w.annotations[helmReleaseName] &&
			c.Annotations[helmReleaseNamespace] == w.annotations[helmReleaseNamespace] {
			return fmt.Sprintf("Helm release %s/%s installed CRD %s and the workload", w.annotations[helmReleaseNamespace], rel, c.Name)
		}
		if conv := c.Spec.Conversion; conv != nil && conv.Webhook != nil && conv.Webhook.ClientConfig != nil && conv.Webhook.ClientConfig.Service != nil {
			ref := conv.Webhook.ClientConfig.Service
			for _, svc := range s.Services {
				if svc.Namespace == ref.Namespace && svc.Name == ref.Name && svc.Namespace == w.namespace && serviceSelects(svc, w) {
					return fmt.Sprintf("the conversion webhook of CRD %s is Service %s/%s, in front of its pods", c.Name, svc.Namespace, svc.Name)
				}
			}
		}
	}
	parts := strings.Split(group, ".")
	parts = parts[:len(parts)-1] // the top-level domain names nobody's project
	for _, name := range []string{w.name, w.namespace, wl["app.kubernetes.io/name"]} {
		stem := name
		for _, suf := range nameSuffixes {
			stem = strings.TrimSuffix(stem, suf)
		}
		if stem != "" && slices.Contains(parts, stem) {
			return fmt.Sprintf("%q, from its name or namespace, names the group", stem)
		}
	}
	return ""
}

// serviceSelects reports whether a Service's selector selects the workload's pods.
func serviceSelects(svc corev1.Service, w workload) bool {
	return len(svc.Spec.Selector) > 0 && labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(w.template.Labels))
}

// operatorIndexes are the workloads graded as operators: those that control a group,
// and those that hold cluster-admin, always.
func (d *discovery) operatorIndexes() []int {
	var out []int
	for i := range d.ws {
		if len(d.own[i]) > 0 || d.clusterAdmin[i] {
			out = append(out, i)
		}
	}
	return out
}

// readNamespaces are the namespaces the reader reads Leases, PDBs, Pods and Services
// in: the operators', and the wildcard candidates' (what may tie them to a group is
// there).
func (d *discovery) readNamespaces() []string {
	var out []string
	for i, w := range d.ws {
		if (len(d.own[i]) > 0 || d.clusterAdmin[i] || d.candidates[i]) && !slices.Contains(out, w.namespace) {
			out = append(out, w.namespace)
		}
	}
	return out
}

// ControllerNamespaces returns the namespaces of the workloads graded as operators
// (and of those that may be, through a wildcard): the reader reads Leases, PDBs, Pods
// and Services there only.
func ControllerNamespaces(s *Snapshot) []string { return discover(s).readNamespaces() }

// LeaseNamespaces returns the namespaces where the operators may hold their leader
// election Lease (leaseNamespaces) other than their own, which ControllerNamespaces
// already gives: the reader reads Leases, and only Leases, there.
func LeaseNamespaces(s *Snapshot) []string {
	d := discover(s)
	return d.leaseOnlyNamespaces(d.readNamespaces())
}

func (d *discovery) leaseOnlyNamespaces(own []string) []string {
	var out []string
	for _, i := range d.operatorIndexes() {
		for _, ns := range leaseNamespaces(d.ws[i]) {
			if !slices.Contains(own, ns) && !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out
}
