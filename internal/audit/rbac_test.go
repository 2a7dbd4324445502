package audit

import (
	"slices"
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
		// wantNotInMessage is what the named check's message must not say.
		wantNotInMessage map[string]string
		// wantEvidence is one line of the named check's evidence.
		wantEvidence map[string]string
	}{{
		name: "Orderly's kind of RBAC: named verbs, Secrets everywhere, bind limited by names",
		grants: []grant{
			{rule: rule(l(""), l("secrets"), l("create", "delete", "get", "list", "patch", "update", "watch")), via: "ClusterRole m (ClusterRoleBinding m)"},
			{rule: rule(l("rbac.authorization.k8s.io"), l("clusterroles"), l("bind"), "edit", "view"), via: "ClusterRole m (ClusterRoleBinding m)"},
			{rule: rule(l("rbac.authorization.k8s.io"), l("rolebindings"), l("create", "list", "watch")), via: "ClusterRole m (ClusterRoleBinding m)"},
			{rule: rule(l("coordination.k8s.io"), l("leases"), l("get", "update")), namespace: "ops", via: "Role le (RoleBinding ops/le)"},
			{rule: rule(l(""), l("pods"), l("list", "patch")), via: "ClusterRole m (ClusterRoleBinding m)"},
		},
		// Patching pods in every namespace can change their images: it runs code as
		// their ServiceAccounts.
		wantPenalties: map[string]int{"rbac.secrets-read": 15, "rbac.secrets-write": 10, "rbac.bind": 5, "rbac.workloads": 40, "rbac.role-bindings": 5},
		wantScore:     25,
		wantInMessage: map[string]string{"rbac.bind": "limited to edit, view", "rbac.secrets-read": "ClusterRole m (ClusterRoleBinding m) cluster-wide"},
	}, {
		name:   "everything on everything",
		grants: []grant{{rule: rule(l("*"), l("*"), l("*")), via: "ClusterRole admin (ClusterRoleBinding admin)"}},
		wantPenalties: map[string]int{
			"rbac.cluster-admin": 100, "rbac.workloads": 40, "rbac.role-bindings": 10,
			"rbac.wildcard-verbs": 20, "rbac.wildcard-resources": 20, "rbac.wildcard-groups": 15, "rbac.secrets-read": 15, "rbac.secrets-write": 10,
			"rbac.escalate": 20, "rbac.bind": 20, "rbac.impersonate": 20, "rbac.pods-exec": 15, "rbac.nodes": 15,
		},
		wantScore: 0,
		wantInMessage: map[string]string{
			"rbac.cluster-admin":  "cluster-admin: every verb on every resource of every API group: ClusterRole admin (ClusterRoleBinding admin) cluster-wide",
			"rbac.wildcard-verbs": "reaches: writes pods, pods/ephemeralcontainers",
		},
	}, {
		// Before, nothing checked it: the one RBAC fact that separates most operators.
		name: "CloudNativePG's kind: creating pods, Deployments and Jobs in every namespace is cluster-admin in effect",
		grants: []grant{
			{rule: rule(l(""), l("persistentvolumeclaims", "pods", "pods/exec"), l("create", "delete", "get", "list", "patch", "watch")), via: "ClusterRole c (ClusterRoleBinding c)"},
			{rule: rule(l("apps"), l("deployments"), l("create", "get", "patch")), via: "ClusterRole c (ClusterRoleBinding c)"},
			{rule: rule(l("batch"), l("jobs"), l("create", "get")), via: "ClusterRole c (ClusterRoleBinding c)"},
			{rule: rule(l("apps"), l("statefulsets/scale"), l("patch")), via: "ClusterRole c (ClusterRoleBinding c)"},
		},
		wantPenalties: map[string]int{"rbac.workloads": 40, "rbac.pods-exec": 15},
		wantScore:     45,
		wantInMessage: map[string]string{"rbac.workloads": "writes pods, deployments, jobs in every namespace: it may run code as any ServiceAccount, kube-system's too (cluster-admin in effect): ClusterRole c (ClusterRoleBinding c) cluster-wide"},
		wantEvidence:  map[string]string{"rbac.workloads": `ClusterRole c (ClusterRoleBinding c) cluster-wide: create, delete, get, list, patch, watch on persistentvolumeclaims, pods, pods/exec in ""`},
	}, {
		name: "Strimzi's kind: workloads and Secrets in its own namespace only, ClusterRoleBindings everywhere",
		grants: []grant{
			{rule: rule(l(""), l("pods", "secrets"), l("create", "get", "list", "patch", "update")), namespace: "kafka", via: "ClusterRole n (RoleBinding kafka/n)"},
			{rule: rule(l("apps"), l("deployments", "deployments/scale"), l("create", "patch")), namespace: "kafka", via: "ClusterRole n (RoleBinding kafka/n)"},
			{rule: rule(l("rbac.authorization.k8s.io"), l("clusterrolebindings"), l("create", "get", "patch")), via: "ClusterRole g (ClusterRoleBinding g)"},
		},
		wantPenalties: map[string]int{"rbac.role-bindings": 10},
		wantScore:     90,
		wantInMessage: map[string]string{
			"rbac.workloads":     "writes pods or workloads only where a RoleBinding lets it: ClusterRole n (RoleBinding kafka/n) in namespace kafka",
			"rbac.role-bindings": "writes ClusterRoleBindings or RoleBindings in every namespace: it may give any account the permissions it holds",
		},
	}, {
		// Before, any wildcard verb was said to include escalate, bind and impersonate.
		name:             "wildcard verbs on its own group say what they reach, and claim no escalate",
		grants:           []grant{{rule: rule(l("widgets.example.org"), l("*"), l("*")), via: "ClusterRole w (ClusterRoleBinding w)"}},
		wantPenalties:    map[string]int{"rbac.wildcard-verbs": 20, "rbac.wildcard-resources": 20},
		wantScore:        60,
		wantInMessage:    map[string]string{"rbac.wildcard-verbs": `wildcard verbs ("*") in ClusterRole w (ClusterRoleBinding w) cluster-wide: reaches * on * in "widgets.example.org", including what is added to them later; none of the dangers checked below`},
		wantNotInMessage: map[string]string{"rbac.wildcard-verbs": "escalate"},
	}, {
		name:             "wildcard verbs on the core group name the real dangers: pods and Secrets",
		grants:           []grant{{rule: rule(l(""), l("pods", "secrets", "configmaps"), l("*")), via: "ClusterRole w (ClusterRoleBinding w)"}},
		wantPenalties:    map[string]int{"rbac.wildcard-verbs": 20, "rbac.workloads": 40, "rbac.secrets-read": 15, "rbac.secrets-write": 10},
		wantScore:        15,
		wantInMessage:    map[string]string{"rbac.wildcard-verbs": "reaches: writes pods (runs code as any ServiceAccount of the namespace); reads Secrets"},
		wantNotInMessage: map[string]string{"rbac.wildcard-verbs": "escalate"},
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
				if piece, ok := tc.wantNotInMessage[f.Check]; ok && strings.Contains(f.Message, piece) {
					t.Errorf("%s message %q says %q", f.Check, f.Message, piece)
				}
				if line, ok := tc.wantEvidence[f.Check]; ok && !slices.Contains(f.Evidence, line) {
					t.Errorf("%s evidence %q lacks %q", f.Check, f.Evidence, line)
				}
			}
			if got := score(fs); got != tc.wantScore {
				t.Errorf("score = %d, want %d", got, tc.wantScore)
			}
		})
	}
}
