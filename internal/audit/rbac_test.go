package audit

import (
	"strings"
	"testing"
)

func TestRBACFindings(t *testing.T) {
	const own = "widgets.example.com"
	cases := []struct {
		name   string
		grants []grant
		// wantPenalties are the penalties of the checks named; the others are 0.
		wantPenalties map[string]int
		wantScore     int
		wantInMessage map[string]string
	}{{
		name: "Orderly's kind of RBAC: named verbs, Secrets everywhere, bind limited by names",
		grants: []grant{
			{rule: rule(l(""), l("secrets"), l("create", "delete", "get", "list", "patch", "update", "watch")), via: "ClusterRole m (ClusterRoleBinding m)"},
			{rule: rule(l("rbac.authorization.k8s.io"), l("clusterroles"), l("bind"), "edit", "view"), via: "ClusterRole m (ClusterRoleBinding m)"},
			{rule: rule(l("rbac.authorization.k8s.io"), l("rolebindings"), l("create", "list", "watch")), via: "ClusterRole m (ClusterRoleBinding m)"},
			{rule: rule(l("coordination.k8s.io"), l("leases"), l("get", "update")), namespace: "ops", via: "Role le (RoleBinding ops/le)"},
			{rule: rule(l(""), l("pods"), l("list", "patch")), via: "ClusterRole m (ClusterRoleBinding m)"},
		},
		wantPenalties: map[string]int{"rbac.secrets-read": 15, "rbac.secrets-write": 10, "rbac.bind": 5},
		wantScore:     70,
		wantInMessage: map[string]string{"rbac.bind": "limited to edit, view", "rbac.secrets-read": "ClusterRole m (ClusterRoleBinding m) cluster-wide"},
	}, {
		name:   "everything on everything",
		grants: []grant{{rule: rule(l("*"), l("*"), l("*")), via: "ClusterRole admin (ClusterRoleBinding admin)"}},
		wantPenalties: map[string]int{
			"rbac.wildcard-verbs": 20, "rbac.wildcard-resources": 20, "rbac.wildcard-groups": 15, "rbac.secrets-read": 15, "rbac.secrets-write": 10,
			"rbac.escalate": 20, "rbac.bind": 20, "rbac.impersonate": 20, "rbac.pods-exec": 15, "rbac.nodes": 15,
		},
		wantScore: 0,
	}, {
		name: "wildcards confined to its own group cost less, and namespaced grants half",
		grants: []grant{
			{rule: rule(l(own), l("*"), l("*")), via: "ClusterRole w (ClusterRoleBinding w)"},
			{rule: rule(l(""), l("pods/exec"), l("create")), namespace: "ops", via: "Role x (RoleBinding ops/x)"},
			{rule: rule(l(""), l("secrets"), l("get", "list")), namespace: "ops", via: "Role x (RoleBinding ops/x)"},
		},
		wantPenalties: map[string]int{"rbac.wildcard-verbs": 5, "rbac.wildcard-resources": 5, "rbac.pods-exec": 7},
		wantScore:     83,
		wantInMessage: map[string]string{"rbac.secrets-read": "no cluster-wide read of Secrets: Role x (RoleBinding ops/x) in namespace ops"},
	}, {
		name: "escalate, impersonate and nodes",
		grants: []grant{
			{rule: rule(l("rbac.authorization.k8s.io"), l("roles", "clusterroles"), l("escalate", "get")), via: "ClusterRole e (ClusterRoleBinding e)"},
			{rule: rule(l(""), l("serviceaccounts"), l("impersonate"), "builder"), via: "ClusterRole e (ClusterRoleBinding e)"},
			{rule: rule(l(""), l("nodes"), l("get", "list", "watch")), via: "ClusterRole e (ClusterRoleBinding e)"},
			{rule: rule(l(""), l("nodes/proxy"), l("get")), via: "ClusterRole e (ClusterRoleBinding e)"},
		},
		wantPenalties: map[string]int{"rbac.escalate": 20, "rbac.impersonate": 10, "rbac.nodes": 15},
		wantScore:     55,
	}, {
		name: "reading Nodes and pods/exec only",
		grants: []grant{
			{rule: rule(l(""), l("nodes"), l("get", "list", "watch")), via: "ClusterRole n (ClusterRoleBinding n)"},
			{rule: rule(l(""), l("pods/exec"), l("get")), via: "ClusterRole n (ClusterRoleBinding n)"},
		},
		wantPenalties: map[string]int{},
		wantScore:     100,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fs := rbacFindings(workload{grants: tc.grants}, []string{own})
			for _, f := range fs {
				if f.Penalty != tc.wantPenalties[f.Check] {
					t.Errorf("%s penalty = %d (%s), want %d", f.Check, f.Penalty, f.Message, tc.wantPenalties[f.Check])
				}
				if (f.Penalty == 0) != (f.Result == Pass) {
					t.Errorf("%s: result %s with penalty %d", f.Check, f.Result, f.Penalty)
				}
				if piece, ok := tc.wantInMessage[f.Check]; ok && !strings.Contains(f.Message, piece) {
					t.Errorf("%s message %q does not say %q", f.Check, f.Message, piece)
				}
			}
			if got := score(fs); got != tc.wantScore {
				t.Errorf("score = %d, want %d", got, tc.wantScore)
			}
		})
	}
}
