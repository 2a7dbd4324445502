package labelpolicy

import (
	"regexp"
	"testing"
	"unicode/utf8"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/testing/testcel"
)

// The CRD's patterns of spec.match.podOwners.
var (
	apiPodOwnerVersion = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/v[0-9]+((alpha|beta)[0-9]+)?$`)
	apiPodOwnerKind    = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
)

func ref(apiVersion, kind string, controller *bool) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: "owner", UID: "uid-owner", Controller: controller}
}

// podObject is a Pod with refs, as the API server hands it to CEL.
func podObject(refs []metav1.OwnerReference) map[string]any {
	md := map[string]any{"name": "p"}
	if refs != nil {
		items := []any{}
		for _, r := range refs {
			m := map[string]any{"apiVersion": r.APIVersion, "kind": r.Kind, "name": r.Name, "uid": string(r.UID)}
			if r.Controller != nil {
				m["controller"] = *r.Controller
			}
			items = append(items, m)
		}
		md["ownerReferences"] = items
	}
	return map[string]any{"metadata": md}
}

// applies evaluates the generated match condition on a Pod with refs: true when the
// policy judges the Pod itself.
func applies(t testing.TB, p *policyv1alpha1.LabelPolicy, kind string, refs []metav1.OwnerReference) bool {
	t.Helper()
	var out bool
	cond := podsMatchCondition(p)
	if err := testcel.Eval(cond.Expression, map[string]any{"request": map[string]any{"kind": map[string]any{"kind": kind}}, "object": podObject(refs)}, &out); err != nil {
		t.Fatalf("%s: %v", cond.Expression, err)
	}
	return out
}

// TestPodOwnerRule: only a controller reference of a trusted kind, by exact apiVersion
// and kind, leaves a Pod to its controller; any other Pod is judged as a bare Pod. The
// match condition (CEL, as the API server evaluates it) and its Go twin (Orderly's
// webhook, the audit) agree on every case.
func TestPodOwnerRule(t *testing.T) {
	yes, no := ptr.To(true), ptr.To(false)
	cnpg := func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Match.PodOwners = []policyv1alpha1.PodOwner{{APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster"}, {APIVersion: "core.strimzi.io/v1beta2", Kind: "StrimziPodSet"}}
	}
	cases := []struct {
		name       string
		p          *policyv1alpha1.LabelPolicy
		refs       []metav1.OwnerReference
		wantExempt bool
	}{
		{"no ownerReferences", testPolicy(policyv1alpha1.ActionDeny), nil, false},
		{"an empty list", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{}, false},
		{"a ReplicaSet's pod", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", yes)}, true},
		{"a StatefulSet's pod", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "StatefulSet", yes)}, true},
		{"a DaemonSet's pod", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "DaemonSet", yes)}, true},
		{"a Job's pod", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("batch/v1", "Job", yes)}, true},
		{"a ReplicationController's pod", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("v1", "ReplicationController", yes)}, true},
		{"a ReplicaSet that is not the controller", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", nil)}, false},
		{"a ReplicaSet with controller false", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", no)}, false},
		{"her ConfigMap as controller", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("v1", "ConfigMap", yes)}, false},
		{"her ConfigMap, not as controller", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("v1", "ConfigMap", nil)}, false},
		{"a Deployment does not create pods", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "Deployment", yes)}, false},
		{"a version the API server does not serve", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1beta2", "ReplicaSet", yes)}, false},
		{"a ReplicaSet of another group", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("example.com/v1", "ReplicaSet", yes)}, false},
		{"a group smuggled into the kind", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps", "v1/ReplicaSet", yes)}, false},
		{"the kind in another case", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("apps/v1", "replicaset", yes)}, false},
		{"a trusted controller beside other owners", testPolicy(policyv1alpha1.ActionDeny),
			[]metav1.OwnerReference{ref("v1", "ConfigMap", nil), ref("batch/v1", "Job", yes)}, true},
		{"an operator's pod not listed", testPolicy(policyv1alpha1.ActionDeny), []metav1.OwnerReference{ref("postgresql.cnpg.io/v1", "Cluster", yes)}, false},
		{"an operator's pod listed", testPolicy(policyv1alpha1.ActionDeny, cnpg), []metav1.OwnerReference{ref("postgresql.cnpg.io/v1", "Cluster", yes)}, true},
		{"a listed operator's other version", testPolicy(policyv1alpha1.ActionDeny, cnpg), []metav1.OwnerReference{ref("postgresql.cnpg.io/v2", "Cluster", yes)}, false},
		{"a listed operator's kind, not as controller", testPolicy(policyv1alpha1.ActionDeny, cnpg), []metav1.OwnerReference{ref("core.strimzi.io/v1beta2", "StrimziPodSet", nil)}, false},
		{"the built-ins stay trusted beside listed kinds", testPolicy(policyv1alpha1.ActionDeny, cnpg), []metav1.OwnerReference{ref("apps/v1", "ReplicaSet", yes)}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := judgedThroughOwner(tc.p, ownerRefs(tc.refs)); got != tc.wantExempt {
				t.Errorf("judgedThroughOwner = %v, want %v", got, tc.wantExempt)
			}
			if got := judgedThroughOwner(tc.p, ownerRefsOf(podObject(tc.refs))); got != tc.wantExempt {
				t.Errorf("judgedThroughOwner on the webhook's object = %v, want %v", got, tc.wantExempt)
			}
			if got := applies(t, tc.p, "Pod", tc.refs); got == tc.wantExempt {
				t.Errorf("the match condition applies = %v, want %v", got, !tc.wantExempt)
			}
			if got := trustedControllerRef(tc.p, tc.refs); (got != nil) != tc.wantExempt {
				t.Errorf("trustedControllerRef = %v", got)
			}
			// Workloads are judged whatever their owners.
			if !applies(t, tc.p, "Deployment", tc.refs) {
				t.Error("the match condition leaves a Deployment out")
			}
		})
	}
}

// FuzzPodOwnerTwin holds the match condition's CEL and its Go twin to the same
// answer for any ownerReferences (two references, any strings) and any listed owner
// the API server would store.
func FuzzPodOwnerTwin(f *testing.F) {
	f.Add("apps/v1", "ReplicaSet", uint8(1), "v1", "ConfigMap", uint8(0), "", "")
	f.Add("apps/v1", "ReplicaSet", uint8(0), "batch/v1", "Job", uint8(1), "", "")
	f.Add("postgresql.cnpg.io/v1", "Cluster", uint8(1), "", "", uint8(2), "postgresql.cnpg.io/v1", "Cluster")
	f.Add("apps", "v1/ReplicaSet", uint8(1), "v1", "ReplicationController", uint8(2), "core.strimzi.io/v1beta2", "StrimziPodSet")
	f.Add(`a"b`, `\'`, uint8(1), "apps/v1 ", "DaemonSet", uint8(1), "x.io/v1alpha1", "K")
	f.Fuzz(func(t *testing.T, av1, k1 string, c1 uint8, av2, k2 string, c2 uint8, ownerAV, ownerKind string) {
		for _, s := range []string{av1, k1, av2, k2} {
			if !utf8.ValidString(s) {
				return // strings from the API server are JSON
			}
		}
		p := testPolicy(policyv1alpha1.ActionDeny)
		if ownerAV != "" || ownerKind != "" {
			if !apiPodOwnerVersion.MatchString(ownerAV) || len(ownerAV) > 317 || !apiPodOwnerKind.MatchString(ownerKind) || len(ownerKind) > 63 {
				return // refused by the CRD
			}
			p.Spec.Match.PodOwners = []policyv1alpha1.PodOwner{{APIVersion: ownerAV, Kind: ownerKind}}
		}
		controller := func(c uint8) *bool {
			switch c % 3 {
			case 0:
				return nil
			case 1:
				return ptr.To(true)
			}
			return ptr.To(false)
		}
		refs := []metav1.OwnerReference{ref(av1, k1, controller(c1))}
		if av2 != "" || k2 != "" {
			refs = append(refs, ref(av2, k2, controller(c2)))
		}
		exempt := judgedThroughOwner(p, ownerRefs(refs))
		if applies(t, p, "Pod", refs) == exempt {
			t.Fatalf("refs %+v, owners %v: the Go twin says exempt=%v, the match condition %q disagrees", refs, p.Spec.Match.PodOwners, exempt, podsMatchCondition(p).Expression)
		}
		if exempt != judgedThroughOwner(p, ownerRefsOf(podObject(refs))) {
			t.Fatalf("refs %+v: the webhook's reading disagrees", refs)
		}
	})
}

func TestVouches(t *testing.T) {
	r := metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: "uid-rs"}
	cases := []struct {
		name     string
		facts    ownerFacts
		podValue string
		want     bool
	}{
		{"the controller's pod, template without the label", ownerFacts{found: true, uid: "uid-rs"}, "", true},
		{"the controller's pod, template with a value", ownerFacts{found: true, uid: "uid-rs", template: "cc-1"}, "cc-1", true},
		{"the owner does not exist: a forged reference", ownerFacts{}, "", false},
		{"another object of that name", ownerFacts{found: true, uid: "uid-other"}, "", false},
		{"the template carries the label, the pod does not", ownerFacts{found: true, uid: "uid-rs", template: "cc-1"}, "", false},
		{"the pod's value differs from the template's", ownerFacts{found: true, uid: "uid-rs", template: "cc-1"}, "cc-bad", false},
		{"an owner that could not be read is trusted", ownerFacts{unknown: true}, "", true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := vouches(tc.facts, r, tc.podValue); got != tc.want {
				t.Errorf("vouches = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPodOwners(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Match.PodOwners = []policyv1alpha1.PodOwner{{APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster"}, {APIVersion: "apps/v1", Kind: "ReplicaSet"}}
	})
	got := podOwners(p)
	if len(got) != len(builtinPodOwners)+1 {
		t.Errorf("podOwners = %v, want the built-ins and Cluster once each", got)
	}
}
