package audit

import (
	"cmp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// workload is a Deployment or StatefulSet, reduced to what the audit looks at.
type workload struct {
	kind, namespace, name string
	replicas              int32
	selector              *metav1.LabelSelector
	template              corev1.PodTemplateSpec
	// serviceAccount is the name of the ServiceAccount its pods run as, in namespace.
	serviceAccount string
	grants         []grant
}

func (w workload) ref() string { return w.kind + " " + w.namespace + "/" + w.name }

func workloads(s *Snapshot, idx *rbacIndex) []workload {
	var out []workload
	add := func(kind, ns, name string, replicas *int32, sel *metav1.LabelSelector, tpl corev1.PodTemplateSpec) {
		w := workload{kind: kind, namespace: ns, name: name, replicas: 1, selector: sel, template: tpl}
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
		w.grants = idx.grantsOf(ns, w.serviceAccount)
		out = append(out, w)
	}
	for _, d := range s.Deployments {
		add("Deployment", d.Namespace, d.Name, d.Spec.Replicas, d.Spec.Selector, d.Spec.Template)
	}
	for _, st := range s.StatefulSets {
		add("StatefulSet", st.Namespace, st.Name, st.Spec.Replicas, st.Spec.Selector, st.Spec.Template)
	}
	slices.SortFunc(out, func(a, b workload) int {
		return cmp.Or(cmp.Compare(a.namespace, b.namespace), cmp.Compare(a.name, b.name), cmp.Compare(a.kind, b.kind))
	})
	return out
}

// evidence is how strongly a workload's RBAC ties it to an API group.
type evidence int

const (
	noEvidence evidence = iota
	// throughWildcard: it may write the group's resources only through apiGroups "*".
	throughWildcard
	// writesResources: a rule naming the group lets it write the resources, not their
	// status: a client of the API.
	writesResources
	// controlsGroup: a rule naming the group lets it write the status of the group's
	// resources (or, where no kind of the group has a status subresource, the
	// resources themselves): what the controller of a resource does.
	controlsGroup
)

func hasStatusSubresource(crd *apiextensionsv1.CustomResourceDefinition) bool {
	return slices.ContainsFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return v.Served && v.Subresources != nil && v.Subresources.Status != nil
	})
}

// evidenceFor grades a workload's tie to the group whose CRDs are crds. Rules limited
// by resourceNames are not a controller's: a controller acts on every object of its kinds.
func evidenceFor(w workload, crds []apiextensionsv1.CustomResourceDefinition) evidence {
	groupHasStatus := slices.ContainsFunc(crds, func(c apiextensionsv1.CustomResourceDefinition) bool { return hasStatusSubresource(&c) })
	best := noEvidence
	for i := range crds {
		crd := &crds[i]
		group, plural := crd.Spec.Group, crd.Spec.Names.Plural
		for _, g := range w.grants {
			r := g.rule
			if len(r.ResourceNames) > 0 {
				continue
			}
			var e evidence
			switch {
			case hasStatusSubresource(crd) && allows(r, group, plural+"/status", "update", "patch"):
				e = controlsGroup
			case allows(r, group, plural, writeVerbs...):
				e = writesResources
				if !groupHasStatus {
					e = controlsGroup
				}
			default:
				continue
			}
			if !namesGroup(r, group) {
				e = throughWildcard
			}
			best = max(best, e)
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

// ControllerNamespaces returns the namespaces of the workloads that control an API
// group of CRDs: the reader reads Leases, PDBs, Pods, Services and monitors there only.
func ControllerNamespaces(s *Snapshot) []string {
	idx := newRBACIndex(s)
	ws := workloads(s, idx)
	groups, by := crdsByGroup(s.CRDs)
	var out []string
	for _, w := range ws {
		if slices.Contains(out, w.namespace) {
			continue
		}
		if slices.ContainsFunc(groups, func(g string) bool { return evidenceFor(w, by[g]) == controlsGroup }) {
			out = append(out, w.namespace)
		}
	}
	return out
}

// LeaseNamespaces returns the namespaces where the controllers of API groups may hold
// their leader election Lease (leaseNamespaces) other than their own, which
// ControllerNamespaces already gives: the reader reads Leases, and only Leases, there.
func LeaseNamespaces(s *Snapshot) []string {
	idx := newRBACIndex(s)
	ws := workloads(s, idx)
	groups, by := crdsByGroup(s.CRDs)
	own := ControllerNamespaces(s)
	var out []string
	for _, w := range ws {
		if !slices.ContainsFunc(groups, func(g string) bool { return evidenceFor(w, by[g]) == controlsGroup }) {
			continue
		}
		for _, ns := range leaseNamespaces(w) {
			if !slices.Contains(own, ns) && !slices.Contains(out, ns) {
				out = append(out, ns)
			}
		}
	}
	return out
}
