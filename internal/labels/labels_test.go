package labels

import "testing"

func TestIsOrderlyKey(t *testing.T) {
	for key, want := range map[string]bool{
		"orderly.dev/x":                  true,
		"power.orderly.dev/sleep-state":  true,
		"orderly.dev":                    false,
		"notorderly.dev/x":               false,
		"orderly.dev.example.com/x":      false,
		"kubeflow-resource-stopped":      false,
		"autoscaling.keda.sh/paused":     false,
		"app.kubernetes.io/managed-by":   false,
		"example.com/orderly.dev/nested": false,
	} {
		if got := IsOrderlyKey(key); got != want {
			t.Errorf("IsOrderlyKey(%q) = %v, want %v", key, got, want)
		}
	}
}
