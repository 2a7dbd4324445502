package audit

import (
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"orderly.dev/orderly/charts"
)

// clusterScoped are the kinds of the manifests that have no namespace.
var clusterScoped = map[string]bool{
	"Namespace": true, "CustomResourceDefinition": true, "ClusterRole": true, "ClusterRoleBinding": true,
	"MutatingWebhookConfiguration": true, "ValidatingWebhookConfiguration": true,
}

// fromManifests reads install manifests (testdata/operators/<file>) into a Snapshot
// as the API server holds them once applied with `kubectl apply -n namespace`:
// namespaced objects without a namespace get it, and each Deployment's pods exist
// (metadata only, named as a ReplicaSet names them). Kinds the audit does not read
// are skipped.
func fromManifests(t *testing.T, namespace string, files ...string) *Snapshot {
	t.Helper()
	s := &Snapshot{}
	for _, file := range files {
		raw, err := os.ReadFile(filepath.Join("testdata", "operators", file))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := charts.Decode(raw)
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		for _, o := range objs {
			if !clusterScoped[o.GetKind()] && o.GetNamespace() == "" {
				o.SetNamespace(namespace)
			}
			into := func(v any) {
				if err := charts.Into(o, v); err != nil {
					t.Fatalf("%s: %s %s: %v", file, o.GetKind(), o.GetName(), err)
				}
			}
			switch o.GetKind() {
			case "CustomResourceDefinition":
				var v apiextensionsv1.CustomResourceDefinition
				into(&v)
				s.CRDs = append(s.CRDs, v)
			case "Deployment":
				var v appsv1.Deployment
				into(&v)
				s.Deployments = append(s.Deployments, v)
				replicas := 1
				if v.Spec.Replicas != nil {
					replicas = int(*v.Spec.Replicas)
				}
				for i := range replicas {
					s.Pods = append(s.Pods, metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{
						Namespace: v.Namespace, Name: fmt.Sprintf("%s-7d9f6b5c4-%05d", v.Name, i), Labels: v.Spec.Template.Labels}})
				}
			case "StatefulSet":
				var v appsv1.StatefulSet
				into(&v)
				s.StatefulSets = append(s.StatefulSets, v)
			case "ClusterRole":
				var v rbacv1.ClusterRole
				into(&v)
				s.ClusterRoles = append(s.ClusterRoles, v)
			case "ClusterRoleBinding":
				var v rbacv1.ClusterRoleBinding
				into(&v)
				s.ClusterRoleBindings = append(s.ClusterRoleBindings, v)
			case "Role":
				var v rbacv1.Role
				into(&v)
				s.Roles = append(s.Roles, v)
			case "RoleBinding":
				var v rbacv1.RoleBinding
				into(&v)
				s.RoleBindings = append(s.RoleBindings, v)
			case "Service":
				var v corev1.Service
				into(&v)
				s.Services = append(s.Services, v)
			case "ServiceMonitor", "PodMonitor":
				list := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*o}}
				s.Monitors = append(s.Monitors, monitorsOf(o.GetKind(), list)...)
			case "PodDisruptionBudget":
				var v policyv1.PodDisruptionBudget
				into(&v)
				s.PDBs = append(s.PDBs, v)
			}
		}
	}
	return s
}

// notPassed are the checks of findings that cost points, with their penalties, and
// those unknown (-1); an api check's key has its group.
func notPassed(fs []Finding) map[string]int {
	out := map[string]int{}
	for _, f := range fs {
		switch f.Result {
		case Pass, NotApplicable:
		case Unknown:
			out[checkName(f)] = -1
		default:
			out[checkName(f)] = f.Penalty
		}
	}
	return out
}

func answerOf(o Operator, id string) Answer {
	for _, a := range o.Checklist {
		if a.ID == id {
			return a
		}
	}
	return Answer{}
}

// TestOperatorsFromManifests audits real operators' install manifests (CloudNativePG
// 1.30.0, Strimzi 1.2.0; testdata/operators/README.md) and two written here in the
// shapes the audit got wrong (a cluster-admin controller, a kubebuilder v4 project
// with only alpha kinds), against the facts of each manifest.
func TestOperatorsFromManifests(t *testing.T) {
	cases := []struct {
		name       string
		namespace  string // what `kubectl apply -n` gives objects without one
		files      []string
		operator   string
		groups     []string
		scores     Scores
		grade      string
		notPassed  map[string]int
		answers    map[string]string // checklist id → answer
		inMessage  map[string]string // check → piece of its message
		inEvidence map[string]string // checklist id → one line of its evidence
	}{{
		// Every CRD at v1 with CEL rules; one replica with --leader-elect; a metrics
		// port; probes; a ClusterRole that reads and writes Secrets, creates pods,
		// Jobs, Deployments, ServiceAccounts, Roles and RoleBindings in every
		// namespace, and pods/exec.
		name: "CloudNativePG 1.30.0", namespace: "cnpg-system", files: []string{"cnpg.yaml"},
		operator: "Deployment cnpg-system/cnpg-controller-manager", groups: []string{"postgresql.cnpg.io"},
		// (20×100 + 35×15 + 20×70 + 15×100 + 10×100) / 100 = 64.25
		scores: Scores{API: 100, RBAC: 15, Availability: 70, Observability: 100, Maintenance: 100, Total: 64}, grade: "D",
		notPassed: map[string]int{
			"rbac.workloads": 40, "rbac.secrets-read": 15, "rbac.secrets-write": 10, "rbac.role-bindings": 5, "rbac.pods-exec": 15,
			"availability.replicas": 25, "availability.image-digest": 5,
		},
		answers: map[string]string{"api": Yes, "cluster-admin": InEffect, "availability": No, "observability": Yes, "maintenance": Yes},
		inMessage: map[string]string{
			"rbac.workloads":               "writes pods, deployments, jobs in every namespace",
			"availability.leader-election": "its spec asks for leader election: argument --leader-elect of container manager",
			"availability.pdb":             "not applicable at 1 replica",
			"observability.metrics":        "port metrics (8080) of container manager",
			"maintenance.version":          "runs release 1.30.0 (image ghcr.io/cloudnative-pg/cloudnative-pg:1.30.0 of container manager)",
			"api.maturity":                 "(not graded: FailoverQuorum, which users do not write)",
		},
		inEvidence: map[string]string{
			"cluster-admin": `ClusterRole cnpg-manager (ClusterRoleBinding cnpg-manager-rolebinding) cluster-wide: create, delete, get, list, patch, watch on persistentvolumeclaims, pods, pods/exec in ""`,
			"availability":  "Deployment cnpg-system/cnpg-controller-manager: argument --leader-elect of container manager",
			"api":           "Cluster (clusters.postgresql.cnpg.io): stable, served v1",
		},
	}, {
		// Installed into one namespace; leader election by
		// STRIMZI_LEADER_ELECTION_ENABLED=true; metrics on the port named http at
		// /metrics; may write ClusterRoleBindings.
		name: "Strimzi 1.2.0", namespace: "kafka", files: []string{"strimzi.yaml"},
		operator: "Deployment kafka/strimzi-cluster-operator", groups: []string{"core.strimzi.io", "kafka.strimzi.io"},
		// (20×90 + 35×90 + 20×70 + 15×100 + 10×100) / 100 = 88.5
		scores: Scores{API: 90, RBAC: 90, Availability: 70, Observability: 100, Maintenance: 100, Total: 89}, grade: "B",
		notPassed: map[string]int{
			"api.cel (core.strimzi.io)": 10, "rbac.role-bindings": 10, "availability.replicas": 25, "availability.image-digest": 5,
		},
		answers: map[string]string{"api": Yes, "cluster-admin": No, "availability": No, "observability": Yes, "maintenance": Yes},
		inMessage: map[string]string{
			"rbac.workloads":               "writes pods or workloads only where a RoleBinding lets it: ClusterRole strimzi-cluster-operator-namespaced (RoleBinding kafka/strimzi-cluster-operator) in namespace kafka",
			"rbac.secrets-read":            "in namespace kafka",
			"rbac.role-bindings":           "ClusterRole strimzi-cluster-operator-global (ClusterRoleBinding strimzi-cluster-operator) cluster-wide",
			"availability.leader-election": "environment variable STRIMZI_LEADER_ELECTION_ENABLED=true of container strimzi-cluster-operator",
			"observability.metrics":        "port http (8080) of container strimzi-cluster-operator, the HTTP server of its probes (/healthy, /ready)",
		},
		inEvidence: map[string]string{
			"cluster-admin": `ClusterRole strimzi-cluster-operator-global (ClusterRoleBinding strimzi-cluster-operator) cluster-wide: get, list, watch, create, delete, patch, update on clusterrolebindings in "rbac.authorization.k8s.io"`,
		},
	}, {
		name: "Ledger: a cluster-admin controller that names no group of its own", files: []string{"monitoring-crds.yaml", "ledger.yaml"},
		operator: "Deployment ledger-system/ledger-controller", groups: []string{"ledger.example.com"},
		// (20×100 + 35×0 + 20×35 + 15×70 + 10×65) / 100 = 44
		scores: Scores{API: 100, RBAC: 0, Availability: 35, Observability: 70, Maintenance: 65, Total: 44}, grade: "F",
		notPassed: map[string]int{
			"rbac.cluster-admin": 100, "rbac.workloads": 40, "rbac.wildcard-verbs": 20, "rbac.wildcard-resources": 20, "rbac.wildcard-groups": 15,
			"rbac.secrets-read": 15, "rbac.secrets-write": 10, "rbac.role-bindings": 10, "rbac.escalate": 20, "rbac.bind": 20, "rbac.impersonate": 20,
			"rbac.pods-exec": 15, "rbac.nodes": 15,
			"availability.replicas": 25, "availability.leader-election": 10, "availability.pdb": 5, "availability.limits": 5, "availability.image-digest": 5,
			"security.read-only-root-filesystem": 5, "security.no-privilege-escalation": 5, "security.seccomp": 5,
			"observability.readiness": 30, "maintenance.version": 10, "maintenance.image-tag": 25,
		},
		answers: map[string]string{"api": Yes, "cluster-admin": Yes, "availability": No, "observability": Partly, "maintenance": Unknown},
		inMessage: map[string]string{
			"rbac.cluster-admin":    "cluster-admin: every verb on every resource of every API group and every non-resource URL: ClusterRole ledger-controller (ClusterRoleBinding ledger-controller) cluster-wide",
			"observability.metrics": "PodMonitor monitoring/ledger",
			"availability.pdb":      "PodDisruptionBudget ledger-controller allows no disruption of its only pod",
			"maintenance.image-tag": "image by :latest",
		},
		inEvidence: map[string]string{"cluster-admin": `ClusterRole ledger-controller (ClusterRoleBinding ledger-controller) cluster-wide: * on * in "*"`},
	}, {
		name: "Pruner: a kubebuilder v4 project with only alpha kinds", files: []string{"pruner.yaml"},
		operator: "Deployment pruner-system/pruner-controller-manager", groups: []string{"cleanup.example.io"},
		// (20×70 + 35×100 + 20×70 + 15×100 + 10×100) / 100 = 88
		scores: Scores{API: 70, RBAC: 100, Availability: 70, Observability: 100, Maintenance: 100, Total: 88}, grade: "B",
		notPassed: map[string]int{"api.maturity (cleanup.example.io)": 30, "availability.replicas": 25, "availability.image-digest": 5},
		answers:   map[string]string{"api": No, "cluster-admin": No, "availability": No, "observability": Yes, "maintenance": Yes},
		inMessage: map[string]string{
			"observability.metrics":        "Service pruner-system/pruner-controller-manager-metrics-service port https (8443); argument --metrics-bind-address=:8443 of container manager",
			"availability.leader-election": "argument --leader-elect of container manager",
			"api.maturity":                 "alpha only for PrunePolicy, PruneRun, PruneSchedule",
		},
		inEvidence: map[string]string{"api": "PruneRun (pruneruns.cleanup.example.io): alpha, served v1alpha1"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := Audit(fromManifests(t, tc.namespace, tc.files...), Options{})
			if len(r.Operators) != 1 {
				t.Fatalf("operators = %+v, want %s only", r.Operators, tc.operator)
			}
			o := r.Operators[0]
			if o.Ref() != tc.operator || !slices.Equal(o.Groups, tc.groups) {
				t.Errorf("operator %s groups %q, want %s %q", o.Ref(), o.Groups, tc.operator, tc.groups)
			}
			if o.Scores != tc.scores || o.Grade != tc.grade {
				t.Errorf("scores %+v grade %s, want %+v %s", o.Scores, o.Grade, tc.scores, tc.grade)
			}
			if got := notPassed(o.Findings); !maps.Equal(got, tc.notPassed) {
				t.Errorf("checks not passed:\n got  %v\n want %v", got, tc.notPassed)
			}
			for id, want := range tc.answers {
				if a := answerOf(o, id); a.Answer != want {
					t.Errorf("%s: %s (%s), want %s", a.Question, a.Answer, a.Summary, want)
				}
			}
			for check, piece := range tc.inMessage {
				var msgs []string
				for _, f := range o.Findings {
					if f.Check == check {
						msgs = append(msgs, f.Message)
					}
				}
				if !slices.ContainsFunc(msgs, func(m string) bool { return strings.Contains(m, piece) }) {
					t.Errorf("%s says %q, not %q", check, msgs, piece)
				}
			}
			for id, line := range tc.inEvidence {
				if a := answerOf(o, id); !slices.Contains(a.Evidence, line) {
					t.Errorf("%s evidence %q lacks %q", a.Question, a.Evidence, line)
				}
			}
			for _, g := range r.Groups {
				if slices.Contains(tc.groups, g.Group) && !slices.Equal(g.Controllers, []string{tc.operator}) {
					t.Errorf("group %s: controllers %q, want %s", g.Group, g.Controllers, tc.operator)
				}
			}
		})
	}
}

// A cluster-admin workload that nothing ties to a group is graded all the same,
// always F on RBAC, with its API left out of the total rather than guessed.
func TestClusterAdminTiedToNothing(t *testing.T) {
	s := fromManifests(t, "", "monitoring-crds.yaml", "ledger.yaml")
	for i := range s.CRDs {
		c := &s.CRDs[i]
		if c.Spec.Group == "ledger.example.com" {
			c.Spec.Group = "accounts.example.com"
			c.Name = c.Spec.Names.Plural + ".accounts.example.com"
		}
		c.Labels, c.Annotations = nil, nil
	}
	for _, opts := range []Options{{}, {Groups: []string{"accounts.example.com"}}, {Groups: []string{"monitoring.coreos.com"}}} {
		r := Audit(s, opts)
		if len(r.Operators) != 1 {
			t.Fatalf("%v: operators %+v, want the cluster-admin workload", opts, r.Operators)
		}
		o := r.Operators[0]
		if o.Ref() != "Deployment ledger-system/ledger-controller" || !o.ClusterAdmin || len(o.Groups) != 0 || !slices.Equal(o.Ungraded, []string{CategoryAPI}) {
			t.Errorf("%v: %s clusterAdmin %v groups %q ungraded %q", opts, o.Ref(), o.ClusterAdmin, o.Groups, o.Ungraded)
		}
		// (35×0 + 20×35 + 15×70 + 10×65) / 80 = 30
		if o.Scores.RBAC != 0 || Grade(o.Scores.RBAC) != "F" || o.Scores.Total != 30 || o.Grade != "F" {
			t.Errorf("%v: scores %+v grade %s, want RBAC 0 and a total of 30 (F)", opts, o.Scores, o.Grade)
		}
		if a := answerOf(o, "api"); a.Answer != Unknown {
			t.Errorf("%v: %s %s", opts, a.Question, a.Answer)
		}
		for _, g := range r.Groups {
			if !slices.Contains(g.Writers, "Deployment ledger-system/ledger-controller (through a wildcard)") {
				t.Errorf("%v: group %s writers %q", opts, g.Group, g.Writers)
			}
		}
	}
}

func TestPrintCorpus(t *testing.T) {
	if os.Getenv("AUDIT_PRINT") == "" {
		t.Skip("set AUDIT_PRINT=1 to print the audit of the manifests in testdata/operators")
	}
	for _, c := range []struct {
		ns    string
		files []string
	}{{"cnpg-system", []string{"cnpg.yaml"}}, {"kafka", []string{"strimzi.yaml"}}, {"", []string{"monitoring-crds.yaml", "ledger.yaml"}}, {"", []string{"pruner.yaml"}}} {
		r := Audit(fromManifests(t, c.ns, c.files...), Options{})
		_ = Render(os.Stdout, r, "table")
	}
}

// CloudNativePG creates PodMonitors for its clusters: beside the Prometheus
// Operator's CRDs it is their client, not their controller, and its grade does not
// take theirs.
func TestClientOfAnotherProjectsKinds(t *testing.T) {
	alone := Audit(fromManifests(t, "", "cnpg.yaml"), Options{})
	r := Audit(fromManifests(t, "", "monitoring-crds.yaml", "cnpg.yaml"), Options{})
	if len(r.Operators) != 1 || !slices.Equal(r.Operators[0].Groups, []string{"postgresql.cnpg.io"}) || r.Operators[0].Scores != alone.Operators[0].Scores {
		t.Fatalf("operators %+v, want CloudNativePG's on postgresql.cnpg.io only, graded as alone", r.Operators)
	}
	for _, g := range r.Groups {
		if g.Group == "monitoring.coreos.com" && (len(g.Controllers) != 0 || !slices.Equal(g.Writers, []string{"Deployment cnpg-system/cnpg-controller-manager"}) ||
			g.Evidence[0].Permission != "create, patch, delete on podmonitors") {
			t.Errorf("monitoring.coreos.com: controllers %q writers %q evidence %+v", g.Controllers, g.Writers, g.Evidence)
		}
	}
}

// A stable API that adds alpha kinds is graded on the mix: CloudNativePG with
// Database, Publication and Subscription served at v1alpha1 only loses 9 points of
// API (3 of 10 kinds users write, at 30 each), not the 30 of an alpha-only project
// such as Pruner's.
func TestMaturityOfAStableGroupWithNewAlphaKinds(t *testing.T) {
	s := fromManifests(t, "", "cnpg.yaml")
	for i := range s.CRDs {
		switch s.CRDs[i].Spec.Names.Kind {
		case "Database", "Publication", "Subscription":
			s.CRDs[i].Spec.Versions[0].Name = "v1alpha1"
		}
	}
	r := Audit(s, Options{})
	o := r.Operators[0]
	if o.Scores.API != 91 || answerOf(o, "api").Answer != Partly {
		t.Errorf("API %d, answer %+v; want 91 and partly", o.Scores.API, answerOf(o, "api"))
	}
	if m := notPassed(o.Findings)["api.maturity (postgresql.cnpg.io)"]; m != 9 {
		t.Errorf("api.maturity penalty %d, want 9", m)
	}
	if g := r.Groups[0]; maturityText(g) != "7 stable, 3 alpha" || g.Maturity != Alpha {
		t.Errorf("group maturity %q (%s), want 7 stable, 3 alpha", maturityText(g), g.Maturity)
	}
}

// --group on the four operators' cluster: each operator's grade is the same
// filtered or not, and a mistyped group is refused with the nearest one.
func TestGroupFilterOnManifests(t *testing.T) {
	s := fromManifests(t, "", "cnpg.yaml", "monitoring-crds.yaml", "ledger.yaml", "pruner.yaml")
	strimzi := fromManifests(t, "kafka", "strimzi.yaml")
	s.CRDs = append(s.CRDs, strimzi.CRDs...)
	s.Deployments = append(s.Deployments, strimzi.Deployments...)
	s.ClusterRoles = append(s.ClusterRoles, strimzi.ClusterRoles...)
	s.ClusterRoleBindings = append(s.ClusterRoleBindings, strimzi.ClusterRoleBindings...)
	s.RoleBindings = append(s.RoleBindings, strimzi.RoleBindings...)
	s.Pods = append(s.Pods, strimzi.Pods...)
	all := map[string]Operator{}
	for _, o := range Audit(s, Options{}).Operators {
		all[o.Ref()] = o
	}
	if len(all) != 4 {
		t.Fatalf("operators %d, want 4", len(all))
	}
	for _, g := range []string{"postgresql.cnpg.io", "kafka.strimzi.io", "core.strimzi.io", "ledger.example.com", "cleanup.example.io"} {
		r := Audit(s, Options{Groups: []string{g}})
		if len(r.Operators) != 1 || !slices.Equal(r.Filter, []string{g}) {
			t.Errorf("--group %s: %d operators, filter %q", g, len(r.Operators), r.Filter)
			continue
		}
		if o := r.Operators[0]; o.Scores != all[o.Ref()].Scores || o.Grade != all[o.Ref()].Grade {
			t.Errorf("--group %s: %s %+v %s, unfiltered %+v %s", g, o.Ref(), o.Scores, o.Grade, all[o.Ref()].Scores, all[o.Ref()].Grade)
		}
	}
	if err := MissingGroups(s, []string{"kafka.strimzy.io"}); err == nil || !strings.Contains(err.Error(), "did you mean kafka.strimzi.io?") {
		t.Errorf("a mistyped group: %v", err)
	}
}
