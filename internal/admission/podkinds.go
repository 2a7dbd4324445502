package admission

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// PodKind is a kind whose objects carry a pod spec. Together, PodKinds and
// EphemeralContainers are every way a write puts an image on a node; a policy on images
// matches all of them, so that no kind or subresource is a way around it.
type PodKind struct {
	Group, Resource, Kind string
	// Spec is the path of fields from the object to its pod spec.
	Spec []string
}

// PodKinds are pods and every built-in kind with a pod template. PodTemplate objects
// are not among them: nothing built in runs one.
var PodKinds = []PodKind{
	{"", "pods", "Pod", []string{"spec"}},
	{"", "replicationcontrollers", "ReplicationController", []string{"spec", "template", "spec"}},
	{"apps", "deployments", "Deployment", []string{"spec", "template", "spec"}},
	{"apps", "replicasets", "ReplicaSet", []string{"spec", "template", "spec"}},
	{"apps", "statefulsets", "StatefulSet", []string{"spec", "template", "spec"}},
	{"apps", "daemonsets", "DaemonSet", []string{"spec", "template", "spec"}},
	{"batch", "jobs", "Job", []string{"spec", "template", "spec"}},
	{"batch", "cronjobs", "CronJob", []string{"spec", "jobTemplate", "spec", "template", "spec"}},
}

// EphemeralContainers is the subresource through which `kubectl debug` adds a
// container, with any image, to a running pod. Its requests carry the whole Pod (kind
// Pod), so the pod's spec path applies; it only takes updates.
const EphemeralContainers = "pods/ephemeralcontainers"

// PodKindOf returns the PodKind of kind, false for any other kind.
func PodKindOf(kind string) (PodKind, bool) {
	for _, k := range PodKinds {
		if k.Kind == kind {
			return k, true
		}
	}
	return PodKind{}, false
}

// PodRules match every create and update of a pod spec: each PodKinds resource, and
// EphemeralContainers. extra are more resources of the core group to match alike
// (a policy that judges other kinds too).
func PodRules(extra ...string) []admissionv1.RuleWithOperations {
	var groups []string
	resources := map[string][]string{}
	for _, k := range PodKinds {
		if _, ok := resources[k.Group]; !ok {
			groups = append(groups, k.Group)
		}
		resources[k.Group] = append(resources[k.Group], k.Resource)
	}
	resources[""] = append(resources[""], EphemeralContainers)
	resources[""] = append(resources[""], extra...)
	out := make([]admissionv1.RuleWithOperations, 0, len(groups))
	for _, g := range groups {
		out = append(out, admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule: admissionv1.Rule{
				APIGroups: []string{g}, APIVersions: []string{"v1"}, Resources: resources[g],
				Scope: ptr.To(admissionv1.NamespacedScope),
			},
		})
	}
	return out
}

// Named turns rules into the rules of a ValidatingAdmissionPolicy.
func Named(rules []admissionv1.RuleWithOperations) []admissionv1.NamedRuleWithOperations {
	out := make([]admissionv1.NamedRuleWithOperations, 0, len(rules))
	for _, r := range rules {
		out = append(out, admissionv1.NamedRuleWithOperations{RuleWithOperations: r})
	}
	return out
}

// PodSpecCEL is a CEL expression for the pod spec of obj ("object" or "oldObject") in
// an admission policy, chosen by request.kind.kind; null for a kind without one.
func PodSpecCEL(obj string) string {
	expr := "null"
	for i := len(PodKinds) - 1; i >= 0; i-- {
		k := PodKinds[i]
		expr = fmt.Sprintf("request.kind.kind == %s ? %s.%s : %s", strconv.Quote(k.Kind), obj, strings.Join(k.Spec, "."), expr)
	}
	return "(" + expr + ")"
}

// ImagesCEL is a CEL expression for the images of the pod spec spec: its containers',
// then its init and ephemeral containers'.
func ImagesCEL(spec string) string {
	return fmt.Sprintf("%[1]s.containers.map(c, c.image) + (has(%[1]s.initContainers) ? %[1]s.initContainers.map(c, c.image) : []) + (has(%[1]s.ephemeralContainers) ? %[1]s.ephemeralContainers.map(c, c.image) : [])", spec)
}

// SpecPointer is the JSON pointer of the pod spec of an object of kind (for JSON
// patches); false for a kind without one.
func SpecPointer(kind string) (string, bool) {
	k, ok := PodKindOf(kind)
	if !ok {
		return "", false
	}
	return "/" + strings.Join(k.Spec, "/"), true
}

// PodSpecOf decodes the pod spec of raw, an object of kind. A kind without a pod
// spec is an error; an object without the fields gives an empty spec.
func PodSpecOf(kind string, raw []byte) (*corev1.PodSpec, error) {
	k, ok := PodKindOf(kind)
	if !ok {
		return nil, fmt.Errorf("kind %s has no pod spec", kind)
	}
	cur := json.RawMessage(raw)
	for _, field := range k.Spec {
		var fields map[string]json.RawMessage
		if err := json.Unmarshal(cur, &fields); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kind, err)
		}
		next, ok := fields[field]
		if !ok || string(next) == "null" {
			return &corev1.PodSpec{}, nil
		}
		cur = next
	}
	var spec corev1.PodSpec
	if err := json.Unmarshal(cur, &spec); err != nil {
		return nil, fmt.Errorf("decoding %s: %w", kind, err)
	}
	return &spec, nil
}

// ImagesOf returns the images of spec's init containers, containers and ephemeral
// containers, in that order.
func ImagesOf(spec *corev1.PodSpec) []string {
	out := make([]string, 0, len(spec.InitContainers)+len(spec.Containers)+len(spec.EphemeralContainers))
	for _, c := range spec.InitContainers {
		out = append(out, c.Image)
	}
	for _, c := range spec.Containers {
		out = append(out, c.Image)
	}
	for _, c := range spec.EphemeralContainers {
		out = append(out, c.Image)
	}
	return out
}
