package sleepschedule

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestOlderThanOrdersByAgeThenName(t *testing.T) {
	at := func(name string, sec int) *powerv1alpha1.SleepSchedule {
		return &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: name,
			CreationTimestamp: metav1.NewTime(time.Date(2026, 12, 2, 12, 0, sec, 0, time.UTC))}}
	}
	tests := []struct {
		name string
		a, b *powerv1alpha1.SleepSchedule
		want bool
	}{
		// Name order and age order disagree: age decides.
		{"older with the later name", at("z", 0), at("a", 1), true},
		{"newer with the earlier name", at("a", 1), at("z", 0), false},
		{"same age: by name", at("a", 0), at("z", 0), true},
		{"same age, later name", at("z", 0), at("a", 0), false},
		{"itself", at("a", 0), at("a", 0), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := olderThan(tt.a, tt.b); got != tt.want {
				t.Errorf("olderThan(%s, %s) = %v, want %v", tt.a.Name, tt.b.Name, got, tt.want)
			}
		})
	}
}

func TestCheckSelectors(t *testing.T) {
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpIn}}}
	good := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "dev"}}
	tests := []struct {
		name    string
		spec    powerv1alpha1.SleepScheduleSpec
		wantErr string
	}{
		{"none", powerv1alpha1.SleepScheduleSpec{}, ""},
		{"usable", powerv1alpha1.SleepScheduleSpec{NamespaceSelector: good, Exclude: powerv1alpha1.SleepExclusions{Selector: good}}, ""},
		{"namespaceSelector", powerv1alpha1.SleepScheduleSpec{NamespaceSelector: bad}, "namespaceSelector: "},
		{"exclude.selector", powerv1alpha1.SleepScheduleSpec{Exclude: powerv1alpha1.SleepExclusions{Selector: bad}}, "exclude.selector: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkSelectors(&tt.spec)
			switch {
			case tt.wantErr == "" && err != nil:
				t.Errorf("checkSelectors() = %v, want nil", err)
			case tt.wantErr != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.wantErr)):
				t.Errorf("checkSelectors() = %v, want an error starting %q", err, tt.wantErr)
			}
		})
	}
}

func TestExcludedReason(t *testing.T) {
	tests := []struct {
		ns, manager, want string
	}{
		{"kube-system", "orderly-system", powerv1alpha1.ExcludedSystemNamespace},
		{"kube-public", "", powerv1alpha1.ExcludedSystemNamespace},
		{"kube-node-lease", "orderly-system", powerv1alpha1.ExcludedSystemNamespace},
		{"orderly-system", "orderly-system", powerv1alpha1.ExcludedManagerNamespace},
		{"ops", "ops", powerv1alpha1.ExcludedManagerNamespace},
		{"payments-dev", "orderly-system", ""},
		{"kubeflow", "orderly-system", ""}, // not kube-*
		{"default", "", ""},
	}
	for _, tt := range tests {
		if got := excludedReason(tt.ns, tt.manager); got != tt.want {
			t.Errorf("excludedReason(%q, %q) = %q, want %q", tt.ns, tt.manager, got, tt.want)
		}
	}
}
