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
	return out, nil
}
