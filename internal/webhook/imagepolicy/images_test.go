package imagepolicy

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestImagesOfEveryKind(t *testing.T) {
	tests := []struct {
		kind, raw string
		want      []string
	}{
		{"Pod", `{"spec":{"initContainers":[{"name":"i","image":"init:1"}],"containers":[{"name":"a","image":"app:1"},{"name":"b","image":"side:2"}]}}`, []string{"init:1", "app:1", "side:2"}},
		{"Deployment", `{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"app:1"}]}}}}`, []string{"app:1"}},
		{"CronJob", `{"spec":{"jobTemplate":{"spec":{"template":{"spec":{"containers":[{"name":"a","image":"job:3"}]}}}}}}`, []string{"job:3"}},
	}
	for _, tt := range tests {
		got, err := Images(tt.kind, []byte(tt.raw))
		if err != nil {
			t.Fatalf("%s: %v", tt.kind, err)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("%s: images %v, want %v", tt.kind, got, tt.want)
		}
	}
	if _, err := Images("Pod", []byte(`{"spec":`)); err == nil {
		t.Error("a broken object decoded")
	}
}

func TestPinsPathsAndWhatIsLeftAlone(t *testing.T) {
	spec := &corev1.PodSpec{
		InitContainers: []corev1.Container{{Image: "registry.example.com/team/init:1"}},
		Containers: []corev1.Container{
			{Image: "registry.example.com/team/app:1"},
			{Image: "registry.example.com/team/app@sha256:" + strings.Repeat("a", 64)},
			{Image: "registry.example.com/team/unknown:2"},
			{Image: "nginx"},
		},
	}
	known := map[string]string{
		"registry.example.com/team/init:1": "sha256:" + strings.Repeat("1", 64),
		"registry.example.com/team/app:1":  "sha256:" + strings.Repeat("2", 64),
		"docker.io/library/nginx:latest":   "sha256:" + strings.Repeat("3", 64),
	}
	digestOf := func(repository, tag string) string { return known[repository+":"+tag] }
	for kind, base := range map[string]string{"Pod": "/spec", "Deployment": "/spec/template/spec", "CronJob": "/spec/jobTemplate/spec/template/spec"} {
		got := map[string]any{}
		for _, op := range Pins(kind, spec, digestOf) {
			if op.Operation != "replace" {
				t.Errorf("%s: operation %q", kind, op.Operation)
			}
			got[op.Path] = op.Value
		}
		want := map[string]any{
			base + "/initContainers/0/image": "registry.example.com/team/init:1@" + known["registry.example.com/team/init:1"],
			base + "/containers/0/image":     "registry.example.com/team/app:1@" + known["registry.example.com/team/app:1"],
			base + "/containers/3/image":     "nginx@" + known["docker.io/library/nginx:latest"],
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: patches %v, want %v (a digest and an unknown tag are left alone)", kind, got, want)
		}
	}
}
