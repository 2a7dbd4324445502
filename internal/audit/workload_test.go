package audit

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// withArgs gives the operator's container arguments.
func withArgs(d *deploymentBuilder, args ...string) *deploymentBuilder {
	d.Spec.Template.Spec.Containers[0].Args = args
	return d
}

// pdbFor is a PodDisruptionBudget in ops that selects app=op.
func pdbFor(minAvailable intstr.IntOrString, maxUnavailable *intstr.IntOrString) policyv1.PodDisruptionBudget {
	p := policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op"},
		Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}, MaxUnavailable: maxUnavailable}}
	if maxUnavailable == nil {
		p.Spec.MinAvailable = &minAvailable
	}
	return p
}

func TestAvailabilityAndObservabilityFindings(t *testing.T) {
	leaseWriter := []grant{{rule: rule(l("coordination.k8s.io"), l("leases"), l("get", "create", "update")), namespace: "ops", via: "Role le (RoleBinding ops/le)"}}
	podOf := pod("ops", "op-7d9f-abcde", map[string]string{"app": "op"})
	// As cert-manager's Role in kube-system: update only on its own Lease, create on any.
	namedLeaseWriter := []grant{
		{rule: rule(l("coordination.k8s.io"), l("leases"), l("get", "update", "patch"), "op-controller"), namespace: "kube-system", via: "Role op:leaderelection (RoleBinding kube-system/op:leaderelection)"},
		{rule: rule(l("coordination.k8s.io"), l("leases"), l("create")), namespace: "kube-system", via: "Role op:leaderelection (RoleBinding kube-system/op:leaderelection)"},
	}
	cases := []struct {
		name   string
		d      *deploymentBuilder
		grants []grant
		s      Snapshot
		// wantFailing are the checks that do not pass, with their penalties.
		wantFailing map[string]int
		// wantResults are the results of checks that are neither pass nor a penalty's
		// (unknown, n/a).
		wantResults   map[string]string
		wantInMessage map[string]string
	}{{
		name: "a hardened operator with two replicas, a PDB and a Lease held by its pod",
		d:    newDeployment("ops", "op", "op", 2).hardened(),
		s: Snapshot{
			Pods:   []metav1.PartialObjectMetadata{podOf},
			Leases: []coordinationv1.Lease{lease("ops", "op-lock", "op-7d9f-abcde_5f0c1a2b")},
			PDBs:   []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op"}, Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}}}},
		},
		wantFailing:   map[string]int{},
		wantInMessage: map[string]string{"availability.leader-election": "held by its pod (holder op-7d9f-abcde_5f0c1a2b)"},
	}, {
		name:          "a Lease held from elsewhere, in a namespace where its ServiceAccount may update Leases",
		d:             newDeployment("ops", "op", "op", 2).hardened(),
		grants:        leaseWriter,
		s:             Snapshot{Leases: []coordinationv1.Lease{lease("ops", "op-lock", "laptop_1234"), lease("other", "x", "op-7d9f-abcde")}},
		wantFailing:   map[string]int{"availability.pdb": 10},
		wantInMessage: map[string]string{"availability.leader-election": "Lease ops/op-lock in its namespace, which its ServiceAccount may update"},
	}, {
		name:   "nothing set: one replica, no Lease, no PDB, no resources, a tag, no security context, no metrics, no probes",
		d:      newDeployment("ops", "op", "op", 1),
		grants: leaseWriter,
		s: Snapshot{PDBs: []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "other"},
			Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}}}}}},
		wantFailing: map[string]int{
			"availability.replicas": 25, "availability.leader-election": 10, "availability.requests": 10,
			"availability.limits": 5, "availability.image-digest": 5, "security.run-as-non-root": 5, "security.read-only-root-filesystem": 5,
			"security.no-privilege-escalation": 5, "security.seccomp": 5,
			"observability.metrics": 40, "observability.liveness": 30, "observability.readiness": 30,
		},
		// Before, a PodDisruptionBudget was asked of one replica, where it blocks drains.
		wantResults: map[string]string{"availability.pdb": NotApplicable},
		wantInMessage: map[string]string{
			"availability.leader-election": "(its ServiceAccount may update Leases there) and nothing in its spec asks for one",
			"availability.image-digest":    "manager (example.com/op:v1)",
			"availability.pdb":             "not applicable at 1 replica",
		},
	}, {
		// cert-manager elects in kube-system (its --leader-election-namespace default),
		// with a Role there that names its Lease, and holds it as "<pod>-external-...".
		name:   "a Lease in another namespace where a RoleBinding lets it update that Lease by name, held by its pod",
		d:      newDeployment("ops", "op", "op", 2).hardened(),
		grants: namedLeaseWriter,
		s: Snapshot{
			Pods:   []metav1.PartialObjectMetadata{podOf},
			Leases: []coordinationv1.Lease{lease("kube-system", "op-controller", "op-7d9f-abcde-external-op-controller")},
		},
		wantFailing:   map[string]int{"availability.pdb": 10},
		wantInMessage: map[string]string{"availability.leader-election": "Lease kube-system/op-controller is held by its pod"},
	}, {
		name:          "a Lease its ServiceAccount may update by name, held from elsewhere",
		d:             newDeployment("ops", "op", "op", 2).hardened(),
		grants:        namedLeaseWriter,
		s:             Snapshot{Leases: []coordinationv1.Lease{lease("kube-system", "op-controller", "laptop-external-op-controller")}},
		wantFailing:   map[string]int{"availability.pdb": 10},
		wantInMessage: map[string]string{"availability.leader-election": "Lease kube-system/op-controller, which its ServiceAccount may update"},
	}, {
		name:   "another operator's Lease in that namespace, not named in its rules nor held by its pods, does not count",
		d:      newDeployment("ops", "op", "op", 2).hardened(),
		grants: namedLeaseWriter,
		s: Snapshot{
			Pods:   []metav1.PartialObjectMetadata{podOf},
			Leases: []coordinationv1.Lease{lease("kube-system", "kube-scheduler", "node-1_5f0c")},
		},
		wantFailing: map[string]int{"availability.pdb": 10, "availability.leader-election": 10},
	}, {
		name: "a privileged container whose own settings undo the pod's",
		d: func() *deploymentBuilder {
			d := newDeployment("ops", "op", "op", 3).hardened()
			d.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{
				Privileged: ptr.To(true), RunAsNonRoot: ptr.To(false), AllowPrivilegeEscalation: ptr.To(true), ReadOnlyRootFilesystem: ptr.To(true),
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeUnconfined},
			}
			return d
		}(),
		s: Snapshot{Leases: []coordinationv1.Lease{lease("ops", "op-lock", "op-7d9f-abcde")}, Pods: []metav1.PartialObjectMetadata{podOf}},
		wantFailing: map[string]int{
			"availability.pdb": 10, "security.privileged": 20, "security.run-as-non-root": 5, "security.no-privilege-escalation": 5, "security.seccomp": 5,
		},
	}, {
		name: "metrics through a ServiceMonitor on a Service in front of the pods, and no port named so",
		d: func() *deploymentBuilder {
			d := newDeployment("ops", "op", "op", 2).hardened()
			d.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			return d
		}(),
		grants: leaseWriter,
		s: Snapshot{
			Leases: []coordinationv1.Lease{lease("ops", "op-lock", "x")},
			PDBs: []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}}}},
			Services: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op-metrics", Labels: map[string]string{"scrape": "yes"}},
				Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "op"}}}},
			Monitors: []Monitor{{Kind: "ServiceMonitor", Namespace: "ops", Name: "op", Selector: metav1.LabelSelector{MatchLabels: map[string]string{"scrape": "yes"}}}},
		},
		wantFailing:   map[string]int{},
		wantInMessage: map[string]string{"observability.metrics": "ServiceMonitor ops/op (Service ops/op-metrics)"},
	}, {
		name: "a ServiceMonitor in another namespace does not count",
		d: func() *deploymentBuilder {
			d := newDeployment("ops", "op", "op", 2).hardened()
			d.Spec.Template.Spec.Containers[0].Ports = nil
			return d
		}(),
		grants: leaseWriter,
		s: Snapshot{
			Leases: []coordinationv1.Lease{lease("ops", "op-lock", "x")},
			PDBs: []policyv1.PodDisruptionBudget{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op"},
				Spec: policyv1.PodDisruptionBudgetSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}}}},
			Services: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "mon", Name: "op-metrics"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "op"}}}},
			Monitors: []Monitor{{Kind: "ServiceMonitor", Namespace: "mon", Name: "op"}},
		},
		wantFailing: map[string]int{"observability.metrics": 40},
	}, {
		// Before, leader election was judged only from a live Lease.
		name:          "no Lease yet, and --leader-elect in its arguments (CloudNativePG, kubebuilder)",
		d:             withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--leader-elect", "--metrics-bind-address=:8443"),
		grants:        leaseWriter,
		s:             Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)}},
		wantFailing:   map[string]int{},
		wantInMessage: map[string]string{"availability.leader-election": "no Lease found yet; its spec asks for leader election: argument --leader-elect of container manager"},
	}, {
		name: "no Lease yet, and STRIMZI_LEADER_ELECTION_ENABLED=true, with update on its Lease by name",
		d: func() *deploymentBuilder {
			d := newDeployment("ops", "op", "op", 1).hardened()
			d.Spec.Template.Spec.Containers[0].Env = []corev1.EnvVar{
				{Name: "STRIMZI_LEADER_ELECTION_LEASE_NAME", Value: "true"}, // a setting, not the switch
				{Name: "STRIMZI_LEADER_ELECTION_ENABLED", Value: "true"},
			}
			return d
		}(),
		grants:        []grant{{rule: rule(l("coordination.k8s.io"), l("leases"), l("get", "update"), "op"), namespace: "ops", via: "ClusterRole le (RoleBinding ops/le)"}},
		wantFailing:   map[string]int{"availability.replicas": 25},
		wantResults:   map[string]string{"availability.pdb": NotApplicable},
		wantInMessage: map[string]string{"availability.leader-election": "environment variable STRIMZI_LEADER_ELECTION_ENABLED=true of container manager"},
	}, {
		name:          "leader election turned off by --leader-elect=false",
		d:             withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--leader-elect=false"),
		grants:        leaseWriter,
		s:             Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)}},
		wantFailing:   map[string]int{"availability.leader-election": 10},
		wantInMessage: map[string]string{"availability.leader-election": "leader election turned off in its spec (argument --leader-elect=false of container manager)"},
	}, {
		name:          "--leader-elect without any right on Leases cannot lead",
		d:             withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--leader-elect"),
		s:             Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)}},
		wantFailing:   map[string]int{"availability.leader-election": 10},
		wantInMessage: map[string]string{"availability.leader-election": "but its ServiceAccount may not update Leases"},
	}, {
		name:          "a budget that keeps the only pod blocks drains",
		d:             withArgs(newDeployment("ops", "op", "op", 1).hardened(), "--leader-elect"),
		grants:        leaseWriter,
		s:             Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)}},
		wantFailing:   map[string]int{"availability.replicas": 25, "availability.pdb": 5},
		wantInMessage: map[string]string{"availability.pdb": "PodDisruptionBudget op allows no disruption of its only pod"},
	}, {
		name:        "a budget of maxUnavailable 1 on one replica keeps nothing: not applicable",
		d:           withArgs(newDeployment("ops", "op", "op", 1).hardened(), "--leader-elect"),
		grants:      leaseWriter,
		s:           Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.IntOrString{}, ptr.To(intstr.FromInt32(1)))}},
		wantFailing: map[string]int{"availability.replicas": 25},
		wantResults: map[string]string{"availability.pdb": NotApplicable},
	}, {
		// Before, Strimzi's metrics were missed.
		name: "metrics on the port named http that serves its probes (Strimzi)",
		d: func() *deploymentBuilder {
			d := withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--leader-elect")
			c := &d.Spec.Template.Spec.Containers[0]
			c.Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthy", Port: intstr.FromString("http")}}}
			c.LivenessProbe, c.ReadinessProbe = probe, probe
			return d
		}(),
		grants:        leaseWriter,
		s:             Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)}},
		wantFailing:   map[string]int{},
		wantInMessage: map[string]string{"observability.metrics": "port http (8080) of container manager, the HTTP server of its probes (/healthy), where /metrics is Prometheus' default path (inferred"},
	}, {
		name: "a port named http that serves no probe says nothing",
		d: func() *deploymentBuilder {
			d := withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--leader-elect", "--metrics-bind-address=0")
			d.Spec.Template.Spec.Containers[0].Ports = []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}
			return d
		}(),
		grants:      leaseWriter,
		s:           Snapshot{PDBs: []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)}},
		wantFailing: map[string]int{"observability.metrics": 40},
	}, {
		// Before, the kubebuilder v4 layout was missed.
		name: "kubebuilder v4: --metrics-bind-address and a *-metrics-service on port https, no container port",
		d: func() *deploymentBuilder {
			d := withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--metrics-bind-address=:8443", "--leader-elect")
			d.Spec.Template.Spec.Containers[0].Ports = nil
			return d
		}(),
		grants: leaseWriter,
		s: Snapshot{
			PDBs:     []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)},
			Services: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op-controller-manager-metrics-service"}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "op"}, Ports: []corev1.ServicePort{{Name: "https", Port: 8443}}}}},
		},
		wantFailing:   map[string]int{},
		wantInMessage: map[string]string{"observability.metrics": "metrics: Service ops/op-controller-manager-metrics-service port https (8443); argument --metrics-bind-address=:8443 of container manager"},
	}, {
		// Before, only monitors in the operator's namespace counted.
		name: "a PodMonitor and a ServiceMonitor in the monitoring namespace whose namespaceSelector covers the operator's",
		d: func() *deploymentBuilder {
			d := withArgs(newDeployment("ops", "op", "op", 2).hardened(), "--leader-elect")
			d.Spec.Template.Spec.Containers[0].Ports = nil
			return d
		}(),
		grants: leaseWriter,
		s: Snapshot{
			PDBs:     []policyv1.PodDisruptionBudget{pdbFor(intstr.FromInt32(1), nil)},
			Services: []corev1.Service{{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "op", Labels: map[string]string{"scrape": "yes"}}, Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "op"}}}},
			Monitors: []Monitor{
				{Kind: "PodMonitor", Namespace: "monitoring", Name: "op", MatchNames: l("ops"), Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}},
				{Kind: "ServiceMonitor", Namespace: "monitoring", Name: "all", AnyNamespace: true, Selector: metav1.LabelSelector{MatchLabels: map[string]string{"scrape": "yes"}}},
				{Kind: "PodMonitor", Namespace: "monitoring", Name: "elsewhere", MatchNames: l("other"), Selector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "op"}}},
			},
		},
		wantFailing:   map[string]int{},
		wantInMessage: map[string]string{"observability.metrics": "metrics: PodMonitor monitoring/op; ServiceMonitor monitoring/all (Service ops/op)"},
	}, {
		// Before, one forbidden list failed the whole audit.
		name: "PodDisruptionBudgets, Leases and Services that could not be listed: unknown, with the permission that would answer",
		d: func() *deploymentBuilder {
			d := newDeployment("ops", "op", "op", 2).hardened()
			d.Spec.Template.Spec.Containers[0].Ports = nil
			return d
		}(),
		grants: leaseWriter,
		s: Snapshot{Unread: []Unread{
			{Resource: resPDBs, Namespace: "ops", Error: "forbidden"}, {Resource: resLeases, Namespace: "ops", Error: "forbidden"},
			{Resource: resServices, Namespace: "ops", Error: "forbidden"},
		}},
		wantFailing: map[string]int{},
		wantResults: map[string]string{"availability.pdb": Unknown, "availability.leader-election": Unknown, "observability.metrics": Unknown},
		wantInMessage: map[string]string{
			"availability.pdb":      "unknown: PodDisruptionBudgets could not be read (forbidden); list poddisruptionbudgets.policy in namespace ops would answer it",
			"observability.metrics": "list services in namespace ops would answer it",
		},
	}, {
		name:          "what could not be listed is not needed when the spec answers",
		d:             withArgs(newDeployment("ops", "op", "op", 1).hardened(), "--leader-elect"),
		grants:        leaseWriter,
		s:             Snapshot{Unread: []Unread{{Resource: resLeases, Namespace: "ops", Error: "forbidden"}, {Resource: resServices, Namespace: "ops", Error: "forbidden"}}},
		wantFailing:   map[string]int{"availability.replicas": 25},
		wantResults:   map[string]string{"availability.pdb": NotApplicable},
		wantInMessage: map[string]string{"observability.metrics": "port metrics (8443)"},
	}, {
		// One replica needs no budget, but one that blocks drains would be reported.
		name:        "PodDisruptionBudgets that could not be listed, at one replica",
		d:           withArgs(newDeployment("ops", "op", "op", 1).hardened(), "--leader-elect"),
		grants:      leaseWriter,
		s:           Snapshot{Unread: []Unread{{Resource: resPDBs, Namespace: "ops", Error: "forbidden"}}},
		wantFailing: map[string]int{"availability.replicas": 25},
		wantResults: map[string]string{"availability.pdb": Unknown},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d.build()
			w := workload{kind: "Deployment", namespace: d.Namespace, name: d.Name, replicas: *d.Spec.Replicas,
				selector: d.Spec.Selector, template: d.Spec.Template, serviceAccount: "op", grants: tc.grants}
			fs := append(availabilityFindings(w, &tc.s), observabilityFindings(w, &tc.s)...)
			for _, f := range fs {
				want := tc.wantFailing[f.Check]
				wantResult := resultFor(want)
				if r, ok := tc.wantResults[f.Check]; ok {
					wantResult = r
				}
				if f.Penalty != want || f.Result != wantResult {
					t.Errorf("%s = %s -%d (%s), want %s -%d", f.Check, f.Result, f.Penalty, f.Message, wantResult, want)
				}
				if piece, ok := tc.wantInMessage[f.Check]; ok && !strings.Contains(f.Message, piece) {
					t.Errorf("%s message %q does not say %q", f.Check, f.Message, piece)
				}
			}
		})
	}
}
