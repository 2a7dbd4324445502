package imagepolicy

import (
	"slices"
	"testing"
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
