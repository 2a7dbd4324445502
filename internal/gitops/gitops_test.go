package gitops

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestToolOf(t *testing.T) {
	for _, tt := range []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        Tool
	}{
		{"tracking annotation", nil, map[string]string{ArgoTrackingAnnotation: "shop:apps/Deployment:shop/web"}, ArgoCD},
		{"instance label", map[string]string{ArgoInstanceLabel: "shop"}, nil, ArgoCD},
		{"Helm's instance label alone tells nothing", map[string]string{"app.kubernetes.io/instance": "shop"}, nil, ""},
		{"kustomize-controller", map[string]string{FluxKustomizationLabel: "apps"}, nil, Flux},
		{"helm-controller", map[string]string{FluxHelmReleaseLabel: "web"}, nil, Flux},
		{"empty Flux label", map[string]string{FluxKustomizationLabel: ""}, nil, ""},
		{"nothing", nil, nil, ""},
	} {
		o := &metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations}
		if got := ToolOf(o); got != tt.want {
			t.Errorf("%s: ToolOf = %q, want %q", tt.name, got, tt.want)
		}
	}
}
