package audit

import (
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

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
		wantFailing   map[string]int
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
			"availability.replicas": 25, "availability.leader-election": 10, "availability.pdb": 10, "availability.requests": 10,
			"availability.limits": 5, "availability.image-digest": 5, "security.run-as-non-root": 5, "security.read-only-root-filesystem": 5,
			"security.no-privilege-escalation": 5, "security.seccomp": 5,
			"observability.metrics": 40, "observability.liveness": 30, "observability.readiness": 30,
		},
		wantInMessage: map[string]string{
			"availability.leader-election": "its ServiceAccount may update Leases there",
			"availability.image-digest":    "manager (example.com/op:v1)",
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
		wantInMessage: map[string]string{"observability.metrics": "ServiceMonitor op (Service op-metrics)"},
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
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := tc.d.build()
			w := workload{kind: "Deployment", namespace: d.Namespace, name: d.Name, replicas: *d.Spec.Replicas,
				selector: d.Spec.Selector, template: d.Spec.Template, serviceAccount: "op", grants: tc.grants}
			fs := append(availabilityFindings(w, &tc.s), observabilityFindings(w, &tc.s)...)
			for _, f := range fs {
				want, failing := tc.wantFailing[f.Check]
				if f.Penalty != want || (f.Result == Pass) == failing {
					t.Errorf("%s = %s -%d (%s), want penalty %d", f.Check, f.Result, f.Penalty, f.Message, want)
				}
				if piece, ok := tc.wantInMessage[f.Check]; ok && !strings.Contains(f.Message, piece) {
					t.Errorf("%s message %q does not say %q", f.Check, f.Message, piece)
				}
			}
		})
	}
}
