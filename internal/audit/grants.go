package audit

import (
	"fmt"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// grant is one policy rule a ServiceAccount holds, where it holds it, and through what.
type grant struct {
	rule rbacv1.PolicyRule
	// namespace is where the rule applies; empty for cluster-wide (a ClusterRoleBinding).
	namespace string
	// via names the role and binding, for the findings' reasons.
	via string
}

func (g grant) scope() string {
	if g.namespace == "" {
		return "cluster-wide"
	}
	return "in namespace " + g.namespace
}

// subjectIsServiceAccount reports whether a binding's subject covers the ServiceAccount
// namespace/name: the ServiceAccount itself (a RoleBinding's subject without a namespace
// means the binding's own), its user name, or a group every ServiceAccount (of its
// namespace, or every authenticated caller) belongs to.
func subjectIsServiceAccount(sub rbacv1.Subject, bindingNamespace, namespace, name string) bool {
	switch sub.Kind {
	case rbacv1.ServiceAccountKind:
		ns := sub.Namespace
		if ns == "" {
			ns = bindingNamespace
		}
		return sub.Name == name && ns == namespace
	case rbacv1.UserKind:
		return sub.Name == "system:serviceaccount:"+namespace+":"+name
	case rbacv1.GroupKind:
		return sub.Name == "system:serviceaccounts" || sub.Name == "system:serviceaccounts:"+namespace || sub.Name == "system:authenticated"
	}
	return false
}

// rbacIndex resolves roles and bindings once for every ServiceAccount the audit asks about.
type rbacIndex struct {
	s            *Snapshot
	clusterRoles map[string]int
	resolved     map[string][]rbacv1.PolicyRule
}

func newRBACIndex(s *Snapshot) *rbacIndex {
	idx := &rbacIndex{s: s, clusterRoles: map[string]int{}, resolved: map[string][]rbacv1.PolicyRule{}}
	for i, cr := range s.ClusterRoles {
		idx.clusterRoles[cr.Name] = i
	}
	return idx
}

// clusterRoleRules returns a ClusterRole's rules with those of the ClusterRoles it
// aggregates. The API server's aggregation controller copies them into the role
// already; resolving them here too keeps the audit right when it has not run yet (and
// in unit tests), and duplicates do no harm to the checks.
func (x *rbacIndex) clusterRoleRules(name string) []rbacv1.PolicyRule {
	return x.clusterRoleRulesVisiting(name, map[string]bool{})
}

func (x *rbacIndex) clusterRoleRulesVisiting(name string, visiting map[string]bool) []rbacv1.PolicyRule {
	if rules, ok := x.resolved[name]; ok {
		return rules
	}
	i, ok := x.clusterRoles[name]
	if !ok || visiting[name] {
		return nil
	}
	visiting[name] = true
	cr := x.s.ClusterRoles[i]
	rules := slices.Clone(cr.Rules)
	if cr.AggregationRule != nil {
		for _, sel := range cr.AggregationRule.ClusterRoleSelectors {
			selector, err := metav1.LabelSelectorAsSelector(&sel)
			if err != nil || selector.Empty() {
				continue // the API server refuses both; an empty selector aggregates nothing
			}
			for _, other := range x.s.ClusterRoles {
				if other.Name != name && selector.Matches(labels.Set(other.Labels)) {
					rules = append(rules, x.clusterRoleRulesVisiting(other.Name, visiting)...)
				}
			}
		}
	}
	x.resolved[name] = rules
	return rules
}

// grantsOf returns every rule the ServiceAccount namespace/name holds.
func (x *rbacIndex) grantsOf(namespace, name string) []grant {
	var out []grant
	for _, b := range x.s.ClusterRoleBindings {
		if b.RoleRef.Kind != "ClusterRole" || !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return subjectIsServiceAccount(s, "", namespace, name)
		}) {
			continue
		}
		via := fmt.Sprintf("ClusterRole %s (ClusterRoleBinding %s)", b.RoleRef.Name, b.Name)
		for _, r := range x.clusterRoleRules(b.RoleRef.Name) {
			out = append(out, grant{rule: r, via: via})
		}
	}
	for _, b := range x.s.RoleBindings {
		if !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return subjectIsServiceAccount(s, b.Namespace, namespace, name)
		}) {
			continue
		}
		var rules []rbacv1.PolicyRule
		switch b.RoleRef.Kind {
		case "ClusterRole":
			rules = x.clusterRoleRules(b.RoleRef.Name)
		case "Role":
			for _, r := range x.s.Roles {
				if r.Namespace == b.Namespace && r.Name == b.RoleRef.Name {
					rules = r.Rules
				}
			}
		}
		via := fmt.Sprintf("%s %s (RoleBinding %s/%s)", b.RoleRef.Kind, b.RoleRef.Name, b.Namespace, b.Name)
		for _, r := range rules {
			out = append(out, grant{rule: r, namespace: b.Namespace, via: via})
		}
	}
	return out
}

// Verbs that change objects.
var writeVerbs = []string{"create", "update", "patch", "delete", "deletecollection"}

// Verbs that read objects.
var readVerbs = []string{"get", "list", "watch"}

func hasOrStar(list []string, v string) bool {
	return slices.Contains(list, v) || slices.Contains(list, rbacv1.VerbAll)
}

// resourceMatches follows the API server's RBAC: "*" is every resource and
// subresource, "*/sub" is that subresource of every resource.
func resourceMatches(list []string, resource string) bool {
	for _, r := range list {
		if r == rbacv1.ResourceAll || r == resource {
			return true
		}
		if _, sub, ok := strings.Cut(resource, "/"); ok && r == "*/"+sub {
			return true
		}
	}
	return false
}

// allows reports whether the rule grants any of verbs on resource (which may name a
// subresource, "pods/exec") in group, through a wildcard or by name.
func allows(r rbacv1.PolicyRule, group, resource string, verbs ...string) bool {
	if len(r.Resources) == 0 || !hasOrStar(r.APIGroups, group) || !resourceMatches(r.Resources, resource) {
		return false
	}
	return slices.ContainsFunc(verbs, func(v string) bool { return hasOrStar(r.Verbs, v) })
}

// namesGroup reports whether the rule names group itself rather than reaching it
// through apiGroups "*".
func namesGroup(r rbacv1.PolicyRule, group string) bool { return slices.Contains(r.APIGroups, group) }
