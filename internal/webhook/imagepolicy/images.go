package imagepolicy

import (
	"encoding/json"
	"fmt"

	corev1 "k8s.io/api/core/v1"
)

// Images returns the images of the pod spec in raw, an object of kind: a Pod, a
// CronJob, or a kind with spec.template (Deployment, StatefulSet, DaemonSet,
// ReplicaSet, Job).
func Images(kind string, raw []byte) ([]string, error) {
	spec, err := PodSpecOf(kind, raw)
	if err != nil {
		return nil, err
	}
	return ImagesOf(spec), nil
}

// PodSpecOf returns the pod spec in raw, an object of kind (see Images).
func PodSpecOf(kind string, raw []byte) (*corev1.PodSpec, error) {
	var spec *corev1.PodSpec
	switch kind {
	case "Pod":
		var o struct {
			Spec corev1.PodSpec `json:"spec"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kind, err)
		}
		spec = &o.Spec
	case "CronJob":
		var o struct {
			Spec struct {
				JobTemplate struct {
					Spec struct {
						Template corev1.PodTemplateSpec `json:"template"`
					} `json:"spec"`
				} `json:"jobTemplate"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kind, err)
		}
		spec = &o.Spec.JobTemplate.Spec.Template.Spec
	default:
		var o struct {
			Spec struct {
				Template corev1.PodTemplateSpec `json:"template"`
			} `json:"spec"`
		}
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("decoding %s: %w", kind, err)
		}
		spec = &o.Spec.Template.Spec
	}
	return spec, nil
}

// ImagesOf returns the images of spec's containers, init and ephemeral ones included.
func ImagesOf(spec *corev1.PodSpec) []string {
	var out []string
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
