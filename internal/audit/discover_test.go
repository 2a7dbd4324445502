package audit

import (
	"slices"
	"strings"
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
	cases := []struct {
		name string
		crd  *crdBuilder
		op   appsv1.Deployment
		s    Snapshot
		// wantControllers and wantWriters are the group's, as reported.
		wantControllers, wantWriters []string
		// wantClusterAdmin: the workload is graded for holding cluster-admin, whether
		// or not it controls the group.
		wantClusterAdmin bool
		// wantEvidence is a piece of the first evidence's permission and via.
		wantEvidence string
	}{{
		name:            "status written through a ClusterRoleBinding",
		s:               Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", statusWrite, specWrite)}, ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantControllers: l("Deployment ops/widget-operator"),
		wantEvidence:    "update, patch on widgets/status by ClusterRole w (ClusterRoleBinding w) cluster-wide",
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
		// Before, a kind without status beside one with status made only a writer.
		name: "writing a kind without a status subresource controls it, though a sibling kind has a status, when a label ties them",
		crd:  labelled(newCRD(g, "Entry", "entries").version("v1", true, specSchema(1)).noStatus(), "app.kubernetes.io/part-of", "widgets"),
		op:   partOf(newDeployment("ops", "widget-operator", "widget-operator", 1).build(), "widgets"),
		s: Snapshot{
			CRDs:                []apiextensionsv1.CustomResourceDefinition{widgets.build()},
			ClusterRoles:        []rbacv1.ClusterRole{clusterRole("w", rule(l(g), l("entries"), l("create", "update")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantControllers: l("Deployment ops/widget-operator"),
		wantEvidence:    "create, update on entries (no status subresource) by ClusterRole w (ClusterRoleBinding w) cluster-wide, tied by label app.kubernetes.io/part-of=widgets",
	}, {
		name: "writing a kind without a status, and its sibling's status through apiGroups *",
		crd:  newCRD(g, "Entry", "entries").version("v1", true, specSchema(1)).noStatus(),
		s: Snapshot{
			CRDs: []apiextensionsv1.CustomResourceDefinition{widgets.build()},
			ClusterRoles: []rbacv1.ClusterRole{clusterRole("w", rule(l(g), l("entries"), l("create", "update")),
				rule(l("*"), l("*/status"), l("update")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantControllers: l("Deployment ops/widget-operator"),
		wantEvidence:    "create, update on entries (no status subresource) by ClusterRole w (ClusterRoleBinding w) cluster-wide",
	}, {
		// CloudNativePG creates PodMonitors for its clusters: a client of the
		// Prometheus Operator's group, whose Prometheus kind has a status.
		name: "creating objects of another project's kind without a status, and nothing else, makes a client",
		crd:  newCRD("monitoring.coreos.com", "PodMonitor", "podmonitors").version("v1", true, openSpecSchema()).noStatus(),
		s: Snapshot{
			CRDs:                []apiextensionsv1.CustomResourceDefinition{newCRD("monitoring.coreos.com", "Prometheus", "prometheuses").version("v1", true, specSchema(0)).build()},
			ClusterRoles:        []rbacv1.ClusterRole{clusterRole("w", rule(l("monitoring.coreos.com"), l("podmonitors"), l("create", "delete", "get", "list", "patch", "watch")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("w", "w", saSubject("ops", "widget-operator"))}},
		wantWriters: l("Deployment ops/widget-operator"),
	}, {
		// Before, a cluster-admin controller was never graded.
		name: "cluster-admin with nothing tying it to the group: a writer of the group, graded as an operator anyway",
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("all", rule(l("*"), l("*"), l("*")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("all", "all", saSubject("ops", "widget-operator"))}},
		wantWriters:      l("Deployment ops/widget-operator (through a wildcard)"),
		wantClusterAdmin: true,
	}, {
		name: "cluster-admin and a label shared with the group's CRD: its controller, through a wildcard",
		crd:  labelled(newCRD(g, "Widget", "widgets").version("v1", true, specSchema(1)), "app.kubernetes.io/part-of", "widgets"),
		op:   partOf(newDeployment("ops", "widget-operator", "widget-operator", 1).build(), "widgets"),
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("all", rule(l("*"), l("*"), l("*")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("all", "all", saSubject("ops", "widget-operator"))}},
		wantControllers: l("Deployment ops/widget-operator"), wantClusterAdmin: true,
		wantEvidence: "* on widgets/status by ClusterRole all (ClusterRoleBinding all) cluster-wide, tied by label app.kubernetes.io/part-of=widgets on CRD widgets.widgets.example.com and on the workload",
	}, {
		name: "status through apiGroups * without cluster-admin, and a namespace named after the group",
		op:   newDeployment("widgets-system", "manager", "manager", 1).build(),
		s: Snapshot{ClusterRoles: []rbacv1.ClusterRole{clusterRole("st", rule(l("*"), l("*/status"), l("patch")))},
			ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("st", "st", saSubject("widgets-system", "manager"))}},
		wantControllers: l("Deployment widgets-system/manager"),
		wantEvidence:    `"widgets", from its name or namespace, names the group`,
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
			s.CRDs = append(s.CRDs, crd.build())
			op := tc.op
			if op.Name == "" {
				op = newDeployment("ops", "widget-operator", "widget-operator", 1).build()
			}
			s.Deployments = []appsv1.Deployment{op}
			r := Audit(&s, Options{})
			r.Groups = slices.DeleteFunc(r.Groups, func(gr Group) bool { return gr.Group != crd.Spec.Group })
			if len(r.Groups) != 1 {
				t.Fatalf("groups = %+v, want one", r.Groups)
			}
			if tc.wantEvidence != "" {
				if ev := r.Groups[0].Evidence; len(ev) == 0 || !strings.Contains(ev[0].Permission+" by "+ev[0].Via+", tied by "+ev[0].Tie, tc.wantEvidence) {
					t.Errorf("evidence %+v does not say %q", ev, tc.wantEvidence)
				}
			}
			if got := r.Groups[0].Controllers; !slices.Equal(got, tc.wantControllers) && len(got)+len(tc.wantControllers) > 0 {
				t.Errorf("controllers = %q, want %q", got, tc.wantControllers)
			}
			if got := r.Groups[0].Writers; !slices.Equal(got, tc.wantWriters) && len(got)+len(tc.wantWriters) > 0 {
				t.Errorf("writers = %q, want %q", got, tc.wantWriters)
			}
			wantOps := len(tc.wantControllers)
			if tc.wantClusterAdmin {
				wantOps = 1
			}
			if len(r.Operators) != wantOps {
				t.Fatalf("operators = %d, want %d", len(r.Operators), wantOps)
			}
			if wantOps == 1 {
				o := r.Operators[0]
				if o.ClusterAdmin != tc.wantClusterAdmin || !slices.Equal(o.Groups, map[bool][]string{true: l(g), false: l()}[len(tc.wantControllers) > 0]) {
					t.Errorf("operator clusterAdmin %v groups %q, want %v and the group if it controls it", o.ClusterAdmin, o.Groups, tc.wantClusterAdmin)
				}
				if !slices.Equal(ControllerNamespaces(&s), l(op.Namespace)) {
					t.Errorf("ControllerNamespaces = %q, want [%s]", ControllerNamespaces(&s), op.Namespace)
				}
			}
		})
	}
}

// partOf labels a Deployment's pods as part of a project.
func partOf(d appsv1.Deployment, project string) appsv1.Deployment {
	d.Spec.Template.Labels["app.kubernetes.io/part-of"] = project
	return d
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
