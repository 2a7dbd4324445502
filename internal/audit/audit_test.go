package audit

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// cluster is a hand-built cluster with two operators: a careful one (narrow RBAC,
// two replicas, hardened) whose alpha API it controls, and a careless one (cluster
// admin in all but name, one replica) with a beta API and an open schema; plus a
// group of CRDs nobody controls, which the careful one writes as a client.
func cluster() *Snapshot {
	return &Snapshot{
		CRDs: []apiextensionsv1.CustomResourceDefinition{
			newCRD("careful.example.com", "Widget", "widgets").version("v1alpha1", true, specSchema(3)).build(),
			newCRD("careful.example.com", "Gadget", "gadgets").version("v1alpha1", true, specSchema(1)).build(),
			newCRD("broad.example.com", "Thing", "things").version("v1beta1", true, openSpecSchema()).build(),
			newCRD("routes.example.org", "Route", "routes").version("v1", true, specSchema(1)).build(),
		},
		Deployments: []appsv1.Deployment{
			newDeployment("careful-system", "careful", "careful", 2).hardened().build(),
			newDeployment("broad-system", "broad", "broad", 1).build(),
			newDeployment("apps", "web", "", 3).build(), // the default ServiceAccount, no rights
		},
		ClusterRoles: []rbacv1.ClusterRole{
			clusterRole("careful",
				rule(l("careful.example.com"), l("widgets", "gadgets"), l("get", "list", "watch", "patch")),
				rule(l("careful.example.com"), l("widgets/status", "gadgets/status"), l("get", "patch")),
				rule(l("routes.example.org"), l("routes"), l("get", "create", "update")),
				rule(l(""), l("secrets"), l("get", "list", "watch", "create")),
				rule(l("rbac.authorization.k8s.io"), l("clusterroles"), l("bind"), "view")),
			clusterRole("broad", rule(l("broad.example.com"), l("*"), l("*")), rule(l("*"), l("*"), l("*"))),
		},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{
			clusterBinding("careful", "careful", saSubject("careful-system", "careful")),
			clusterBinding("broad", "broad", saSubject("broad-system", "broad")),
		},
		Roles:        []rbacv1.Role{role("careful-system", "le", rule(l("coordination.k8s.io"), l("leases"), l("get", "create", "update")))},
		RoleBindings: []rbacv1.RoleBinding{roleBinding("careful-system", "le", "Role", "le", saSubject("careful-system", "careful"))},
		Leases:       []coordinationv1.Lease{lease("careful-system", "careful-lock", "somewhere_1")},
	}
}

func TestAuditGradesOperators(t *testing.T) {
	r := Audit(cluster(), Options{})

	type wantOp struct {
		groups   []string
		scores   Scores
		grade    string
		failing  []string // checks that do not pass, sorted
		replicas int32
	}
	want := map[string]wantOp{
		"Deployment careful-system/careful": {
			groups: l("careful.example.com"),
			// API: alpha only (-30). RBAC: cluster-wide Secrets read (-15) and write
			// (-10), bind limited to view (-5). Availability: no PDB (-10).
			// Maintenance: an image by digest says no release (-10).
			// (20×70 + 35×70 + 20×90 + 15×100 + 10×90) / 100 = 80.5, rounded to 81.
			scores: Scores{API: 70, RBAC: 70, Availability: 90, Observability: 100, Maintenance: 90, Total: 81}, grade: "B", replicas: 2,
			failing: l("api.maturity", "availability.pdb", "maintenance.version", "rbac.bind", "rbac.secrets-read", "rbac.secrets-write"),
		},
		"Deployment broad-system/broad": {
			groups: l("broad.example.com"),
			// API: beta (-10), open spec (-20), no CEL (-10). RBAC: cluster-admin.
			// Availability: 100 - 25 - 10 - 10 - 5 - 5 - 4×5 (no PDB asked of one
			// replica). Observability: nothing. Maintenance: the tag v1 names no release
			// (-10, -10).
			scores: Scores{API: 60, RBAC: 0, Availability: 25, Observability: 0, Maintenance: 80, Total: 25}, grade: "F", replicas: 1,
			failing: l("api.cel", "api.maturity", "api.schema",
				"availability.image-digest", "availability.leader-election", "availability.limits", "availability.replicas", "availability.requests",
				"maintenance.image-tag", "maintenance.version",
				"observability.liveness", "observability.metrics", "observability.readiness",
				"rbac.bind", "rbac.cluster-admin", "rbac.escalate", "rbac.impersonate", "rbac.nodes", "rbac.pods-exec", "rbac.role-bindings", "rbac.secrets-read", "rbac.secrets-write",
				"rbac.wildcard-groups", "rbac.wildcard-resources", "rbac.wildcard-verbs", "rbac.workloads",
				"security.no-privilege-escalation", "security.read-only-root-filesystem", "security.run-as-non-root", "security.seccomp"),
		},
	}
	if len(r.Operators) != len(want) {
		t.Fatalf("operators = %d, want %d: %+v", len(r.Operators), len(want), r.Operators)
	}
	for _, o := range r.Operators {
		w, ok := want[o.Ref()]
		if !ok {
			t.Errorf("unexpected operator %s", o.Ref())
			continue
		}
		if !slices.Equal(o.Groups, w.groups) || o.Scores != w.scores || o.Grade != w.grade || o.Replicas != w.replicas {
			t.Errorf("%s: groups %q scores %+v grade %s replicas %d, want %q %+v %s %d", o.Ref(), o.Groups, o.Scores, o.Grade, o.Replicas, w.groups, w.scores, w.grade, w.replicas)
		}
		var failing []string
		for _, f := range o.Findings {
			if f.Result != Pass && f.Result != NotApplicable && !slices.Contains(failing, f.Check) {
				failing = append(failing, f.Check)
			}
		}
		slices.Sort(failing)
		if !slices.Equal(failing, w.failing) {
			t.Errorf("%s: failing checks %q, want %q", o.Ref(), failing, w.failing)
		}
	}

	groups := map[string]Group{}
	for _, g := range r.Groups {
		groups[g.Group] = g
	}
	for name, wantG := range map[string]struct {
		maturity             string
		controllers, writers []string
		apiScore             int
	}{
		"broad.example.com":   {Beta, l("Deployment broad-system/broad"), l(), 60},
		"careful.example.com": {Alpha, l("Deployment careful-system/careful"), l("Deployment broad-system/broad (through a wildcard)"), 70},
		// Written by the careful operator as a client (no status) and reachable by the
		// broad one through a wildcard: no controller.
		"routes.example.org": {Stable, l(), l("Deployment broad-system/broad (through a wildcard)", "Deployment careful-system/careful"), 100},
	} {
		g, ok := groups[name]
		if !ok {
			t.Errorf("group %s missing", name)
			continue
		}
		if g.Maturity != wantG.maturity || !slices.Equal(g.Controllers, wantG.controllers) || !slices.Equal(g.Writers, wantG.writers) || g.APIScore != wantG.apiScore {
			t.Errorf("%s: maturity %s controllers %q writers %q api %d, want %s %q %q %d", name, g.Maturity, g.Controllers, g.Writers, g.APIScore,
				wantG.maturity, wantG.controllers, wantG.writers, wantG.apiScore)
		}
	}

	// --group keeps the groups named and the operators that control them.
	only := Audit(cluster(), Options{Groups: l("routes.example.org", "broad.example.com")})
	if len(only.Groups) != 2 || len(only.Operators) != 1 || only.Operators[0].Name != "broad" {
		t.Errorf("with --group: groups %d operators %+v, want 2 groups and the broad operator only", len(only.Groups), only.Operators)
	}
}

func TestGrade(t *testing.T) {
	for total, want := range map[int]string{100: "A", 90: "A", 89: "B", 80: "B", 79: "C", 70: "C", 69: "D", 60: "D", 59: "F", 0: "F"} {
		if got := Grade(total); got != want {
			t.Errorf("Grade(%d) = %s, want %s", total, got, want)
		}
	}
}

func TestRender(t *testing.T) {
	r := Audit(cluster(), Options{})

	var js bytes.Buffer
	if err := Render(&js, r, "json"); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON output does not parse: %v", err)
	}
	if len(back.Operators) != 2 || back.Operators[0].Grade == "" || len(back.Operators[0].Findings) == 0 {
		t.Errorf("JSON output lost the operators: %+v", back.Operators)
	}
	// Every question answered, with its evidence.
	for _, o := range back.Operators {
		var ids []string
		for _, a := range o.Checklist {
			ids = append(ids, a.ID)
			if a.Answer == "" || a.Summary == "" || a.Evidence == nil {
				t.Errorf("%s: %q answered %q (%q) with evidence %q", o.Ref(), a.Question, a.Answer, a.Summary, a.Evidence)
			}
		}
		if !slices.Equal(ids, l("api", "cluster-admin", "availability", "observability", "maintenance")) {
			t.Errorf("%s: checklist %q", o.Ref(), ids)
		}
	}
	if a := back.Operators[0].Checklist[1]; back.Operators[0].Name != "broad" || a.Answer != Yes || !slices.Contains(a.Evidence, `ClusterRole broad (ClusterRoleBinding broad) cluster-wide: * on * in "*"`) {
		t.Errorf("JSON: the broad operator's cluster-admin answer: %+v", a)
	}

	var table bytes.Buffer
	if err := Render(&table, r, "table"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"OPERATOR", "Deployment broad-system/broad", "routes.example.org", "none found",
		"Deployment careful-system/careful: grade B (81/100), ServiceAccount careful-system/careful, replicas 2, version -",
		"Does it need cluster-admin?", "Deployment broad-system/broad: grade F (25/100), ServiceAccount broad-system/broad, replicas 1, version -, CLUSTER-ADMIN",
		"- ClusterRole broad (ClusterRoleBinding broad) cluster-wide: * on * in \"*\"",
		"rbac.escalate", "api.maturity (careful.example.com)", "alpha only for Gadget, Widget",
		"routes.example.org: API 100/100, no controller found (written by Deployment broad-system/broad (through a wildcard), Deployment careful-system/careful)",
	} {
		if !strings.Contains(table.String(), want) {
			t.Errorf("table output lacks %q:\n%s", want, table.String())
		}
	}

	var md bytes.Buffer
	if err := Render(&md, r, "markdown"); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| Deployment careful-system/careful | **B** | 81 |", "### Deployment broad-system/broad: grade F (25/100)",
		"| Does it need cluster-admin? | **yes** | cluster-admin: every verb on every resource of every API group: ClusterRole broad (ClusterRoleBinding broad) cluster-wide |",
		"| fail | -20 | `rbac.escalate` |", "### routes.example.org: no controller found (API 100/100)",
	} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown output lacks %q:\n%s", want, md.String())
		}
	}

	if err := Render(&bytes.Buffer{}, r, "yaml"); err == nil {
		t.Error("Render accepted an unknown format")
	}
}

// Before, --group graded an operator on the groups shown only: one that controls a
// stable group and an alpha one got a better grade when the alpha group was left out,
// and nothing said the result was partial.
func TestGroupFilterKeepsGrades(t *testing.T) {
	s := &Snapshot{
		CRDs: []apiextensionsv1.CustomResourceDefinition{
			newCRD("stable.example.com", "Widget", "widgets").version("v1", true, specSchema(1)).build(),
			newCRD("alpha.example.com", "Gadget", "gadgets").version("v1alpha1", true, specSchema(1)).build(),
		},
		Deployments: []appsv1.Deployment{newDeployment("ops", "op", "op", 2).hardened().build()},
		ClusterRoles: []rbacv1.ClusterRole{clusterRole("op",
			rule(l("stable.example.com"), l("widgets/status"), l("patch")), rule(l("alpha.example.com"), l("gadgets/status"), l("patch")))},
		ClusterRoleBindings: []rbacv1.ClusterRoleBinding{clusterBinding("op", "op", saSubject("ops", "op"))},
	}
	all := Audit(s, Options{})
	only := Audit(s, Options{Groups: l("stable.example.com")})
	if len(all.Operators) != 1 || len(only.Operators) != 1 {
		t.Fatalf("operators %d and %d, want 1 and 1", len(all.Operators), len(only.Operators))
	}
	if a, o := all.Operators[0], only.Operators[0]; a.Scores != o.Scores || a.Grade != o.Grade || !slices.Equal(o.Groups, l("alpha.example.com", "stable.example.com")) {
		t.Errorf("filtered %+v %s groups %q, unfiltered %+v %s: the grade must not depend on --group", o.Scores, o.Grade, o.Groups, a.Scores, a.Grade)
	}
	if len(only.Groups) != 1 || !slices.Equal(only.Filter, l("stable.example.com")) {
		t.Errorf("filtered report: groups %d filter %q", len(only.Groups), only.Filter)
	}
	var table bytes.Buffer
	if err := Render(&table, only, "table"); err != nil {
		t.Fatal(err)
	}
	if want := "Only API groups stable.example.com (--group), and the operators that control them; each operator is graded on every group it controls"; !strings.Contains(table.String(), want) {
		t.Errorf("table does not say it is partial:\n%s", table.String())
	}
}

// Before, a mistyped --group printed empty tables and exited 0.
func TestMissingGroups(t *testing.T) {
	s := cluster()
	if err := MissingGroups(s, l("careful.example.com", "routes.example.org")); err != nil {
		t.Errorf("groups that exist: %v", err)
	}
	err := MissingGroups(s, l("careful.example.com", "carefull.example.com", "nothing.at.all"))
	if err == nil || err.Error() != `--group: no CustomResourceDefinition in API group "carefull.example.com" (did you mean careful.example.com?), "nothing.at.all"` {
		t.Errorf("err = %v", err)
	}
}
