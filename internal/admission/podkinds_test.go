package admission

import (
	"slices"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// Every way a write puts an image on a node is matched: each workload kind's create
// and update, and pods' ephemeral containers (kubectl debug).
func TestPodRulesMatchEveryWayAnImageReachesANode(t *testing.T) {
	matched := map[string]bool{}
	for _, r := range PodRules("persistentvolumeclaims") {
		if !slices.Equal(r.Operations, []admissionv1.OperationType{admissionv1.Create, admissionv1.Update}) {
			t.Errorf("group %v: operations %v, want CREATE and UPDATE", r.APIGroups, r.Operations)
		}
		for _, g := range r.APIGroups {
			for _, res := range r.Resources {
				matched[g+"/"+res] = true
			}
		}
	}
	for _, want := range []string{
		"/pods", "/pods/ephemeralcontainers", "/replicationcontrollers", "/persistentvolumeclaims",
		"apps/deployments", "apps/replicasets", "apps/statefulsets", "apps/daemonsets",
		"batch/jobs", "batch/cronjobs",
	} {
		if !matched[want] {
			t.Errorf("%s is not matched (matched: %v)", want, matched)
		}
	}
	if len(matched) != 10 {
		t.Errorf("matched %d resources, want 10: %v", len(matched), matched)
	}
}

func TestPodSpecOfEveryKind(t *testing.T) {
	tests := []struct {
		kind, raw string
		want      []string
	}{
		{"Pod", `{"spec":{"initContainers":[{"name":"i","image":"init:1"}],"containers":[{"name":"a","image":"app:1"}],"ephemeralContainers":[{"name":"d","image":"debug:1"}]}}`, []string{"init:1", "app:1", "debug:1"}},
		{"ReplicationController", `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"rc:1"}]}}}}`, []string{"rc:1"}},
		{"Deployment", `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"app:1"}]}}}}`, []string{"app:1"}},
		{"StatefulSet", `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"db:1"}]}}}}`, []string{"db:1"}},
		{"CronJob", `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"job:3"}]}}}}}}`, []string{"job:3"}},
		{"Deployment", `{"metadata":{"name":"x"}}`, []string{}},
		{"CronJob", `{"spec":{"jobTemplate":null}}`, []string{}},
	}
	for _, tt := range tests {
		spec, err := PodSpecOf(tt.kind, []byte(tt.raw))
		if err != nil {
			t.Fatalf("%s %s: %v", tt.kind, tt.raw, err)
		}
		if got := ImagesOf(spec); !slices.Equal(got, tt.want) {
			t.Errorf("%s %s: images %v, want %v", tt.kind, tt.raw, got, tt.want)
		}
	}
	for kind, raw := range map[string]string{
		"Pod":        `{"spec":`,
		"Deployment": `{"spec":{"template":"nope"}}`,
		"ConfigMap":  `{}`,
	} {
		if _, err := PodSpecOf(kind, []byte(raw)); err == nil {
			t.Errorf("%s %s decoded without an error", kind, raw)
		}
	}
}

func TestSpecPointerAndCEL(t *testing.T) {
	for kind, want := range map[string]string{"Pod": "/spec", "Job": "/spec/template/spec", "CronJob": "/spec/jobTemplate/spec/template/spec"} {
		if got, ok := SpecPointer(kind); !ok || got != want {
			t.Errorf("SpecPointer(%s) = %q, %v; want %q", kind, got, ok, want)
		}
	}
	if _, ok := SpecPointer("Service"); ok {
		t.Error("a Service has a pod spec pointer")
	}
	want := `(request.kind.kind == "Pod" ? object.spec : request.kind.kind == "ReplicationController" ? object.spec.template.spec : ` +
		`request.kind.kind == "Deployment" ? object.spec.template.spec : request.kind.kind == "ReplicaSet" ? object.spec.template.spec : ` +
		`request.kind.kind == "StatefulSet" ? object.spec.template.spec : request.kind.kind == "DaemonSet" ? object.spec.template.spec : ` +
		`request.kind.kind == "Job" ? object.spec.template.spec : request.kind.kind == "CronJob" ? object.spec.jobTemplate.spec.template.spec : null)`
	if got := PodSpecCEL("object"); got != want {
		t.Errorf("PodSpecCEL:\n got %s\nwant %s", got, want)
	}
}
