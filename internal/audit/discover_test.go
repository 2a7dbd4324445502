package audit

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestGroupsFindTheirControllers(t *testing.T) {
	const g = "widgets.example.com"
	widgets := newCRD(g, "Widget", "widgets").version("v1", true, specSchema(1))
	statusWrite := rule(l(g), l("widgets/status"), l("get", "update", "patch"))
	specWrite := rule(l(g), l("widgets"), l("get", "list", "watch", "create", "update", "patch"))
	op := newDeployment("ops", "widget-operator", "widget-operator", 1).build()
	cases := []struct {
		name string
		crd  *crdBuilder
		s    Snapshot
		// wantControllers and wantWriters are the group's, as reported.
		wantControllers, wantWriters []string
	}{{
		name:            "status written through a ClusterRoleBinding",
		s:               Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", statusWrite, specWrite)}, ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantControllers: l("Deployment ops/widget-operator"),
	}, {
		name: "a ClusterRole bound in one namespace by a RoleBinding without the subject's namespace",
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", statusWrite)},
			RoleBindings: []rbacv1.RoleBinding{roleBinding("ops", "w", "ClusterRole", "w", rbacv1.Subject{Kind: "ServiceAccount", Name: "widget-operator"})}},
		wantControllers: l("Deployment ops/widget-operator"),
	}, {
		name: "a Role bound to the group of the namespace's ServiceAccounts",
		s: Snapshot{Roles: []rbacv1.Role{role("ops", "w", statusWrite)},
			RoleBindings: []rbacv1.RoleBinding{roleBinding("ops", "w", "Role", "w", rbacv1.Subject{Kind: "Group", Name: "system:serviceaccounts:ops"})}},
		wantControllers: l("Deployment ops/widget-operator"),
	}, {
		name: "a ClusterRole that aggregates the rules, not yet filled in by the API server",
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{
			{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, AggregationRule: &rbacv1.AggregationRule{ClusterRoleSelectors: []metav1.LabelSelector{{MatchLabels: map[string]string{"to-agg": "true"}}}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "part", Labels: map[string]string{"to-agg": "true"}}, Rules: []rbacv1.PolicyRule{statusWrite}},
		}, ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("agg", "agg", rbacv1.Subject{Kind: "User", Name: "system:serviceaccount:ops:widget-operator"})}},
		wantControllers: l("Deployment ops/widget-operator"),
	}, {
		name:        "writing the resources but not their status makes a client, not the controller",
		s:           Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", specWrite)}, ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantWriters: l("Deployment ops/widget-operator"),
	}, {
		name:            "without a status subresource, writing the resources is what the controller does",
		crd:             newCRD(g, "Widget", "widgets").version("v1", true, specSchema(1)).noStatus(),
		s:               Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", specWrite)}, ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantControllers: l("Deployment ops/widget-operator"),
	}, {
		name: "reaching the group only through apiGroups * says nothing of what it controls",
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("all", rule(l("*"), l("*"), l("*")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("all", "all", saSubject("ops", "widget-operator"))}},
		wantWriters: l("Deployment ops/widget-operator (through a wildcard)"),
	}, {
		name: "rules limited by resourceNames are not a controller's",
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", rule(l(g), l("widgets/status"), l("update"), "one"))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
	}, {
		name: "a binding to another ServiceAccount, or to the same name in another namespace",
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", statusWrite)},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "other"), saSubject("elsewhere", "widget-operator"))}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			crd := widgets
			if tc.crd != nil {
				crd = tc.crd
			}
			s := tc.s
			s.CRDs = []apiextensionsv1.CustomResourceDefinition{crd.build()}
			s.Deployments = []appsv1.Deployment{op}
			r := Audit(&s, Options{})
			if len(r.Groups) != 1 {
				t.Fatalf("groups = %+v, want one", r.Groups)
			}
			if got := r.Groups[0].Controllers; !slices.Equal(got, tc.wantControllers) && len(got)+len(tc.wantControllers) > 0 {
				t.Errorf("controllers = %q, want %q", got, tc.wantControllers)
			}
			if got := r.Groups[0].Writers; !slices.Equal(got, tc.wantWriters) && len(got)+len(tc.wantWriters) > 0 {
				t.Errorf("writers = %q, want %q", got, tc.wantWriters)
			}
			if wantOps := len(tc.wantControllers); len(r.Operators) != wantOps {
				t.Errorf("operators = %d, want %d", len(r.Operators), wantOps)
			}
			if len(tc.wantControllers) > 0 && !slices.Equal(ControllerNamespaces(&s), l("ops")) {
				t.Errorf("ControllerNamespaces = %q, want [ops]", ControllerNamespaces(&s))
			}
		})
	}
}

// The reader reads Leases where a controller may elect outside its namespace: where a
// RoleBinding lets its ServiceAccount update Leases (cert-manager's kube-system), and
// not where a workload that controls nothing could.
func TestLeaseNamespaces(t *testing.T) {
	const g = "widgets.example.com"
	leader := rule(l("coordination.k8s.io"), l("leases"), l("get", "update", "patch"), "widget-operator")
	s := Snapshot{
		CRDs:                []apiextensionsv1.CustomResourceDefinition{newCRD(g, "Widget", "widgets").version("v1", true, specSchema(1)).build()},
		Deployments:         []appsv1.Deployment{newDeployment("ops", "widget-operator", "widget-operator", 1).build(), newDeployment("apps", "web", "web", 1).build()},
		ClusterRoles:        []rbacv1.ClusterRole{clusterRole("w", rule(l(g), l("widgets/status"), l("update")))},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))},
		Roles:               []rbacv1.Role{role("kube-system", "le", leader), role("elsewhere", "le", leader), role("ops", "le", leader)},
		RoleBindings: []rbacv1.RoleBinding{
			roleBinding("kube-system", "le", "Role", "le", saSubject("ops", "widget-operator")),
			roleBinding("ops", "le", "Role", "le", saSubject("ops", "widget-operator")),
			roleBinding("elsewhere", "le", "Role", "le", saSubject("apps", "web")),
		},
	}
	if got := LeaseNamespaces(&s); !slices.Equal(got, l("kube-system")) {
		t.Errorf("LeaseNamespaces = %q, want [kube-system]", got)
	}
}
