package sleepschedule

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// scaled says that every resource has a scale subresource.
type scaled struct{}

func (scaled) ServerResourcesForGroupVersion(string) (*metav1.APIResourceList, error) {
	return &metav1.APIResourceList{APIResources: []metav1.APIResource{{Name: "widgets"}, {Name: "widgets/scale"}}}, nil
}

// A schedule looks at its kinds again on a timer only where no watch tells it of a
// change.
func TestKindsRecheck(t *testing.T) {
	served := schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{served.GroupVersion()})
	mapper.Add(served, meta.RESTScopeNamespace)
	r := &Reconciler{KindsRecheck: time.Minute, kinds: kit.NewKindDetector(mapper, clocktesting.NewFakePassiveClock(time.Unix(0, 0)), nil).
		WithSubresources(scaled{})}
	missing := schema.GroupKind{Group: "missing.example.com", Kind: "Gadget"}
	schedule := func(kinds ...schema.GroupKind) *powerv1alpha1.SleepSchedule {
		s := &powerv1alpha1.SleepSchedule{}
		for _, gk := range kinds {
			s.Spec.Targets.Kinds = append(s.Spec.Targets.Kinds, powerv1alpha1.SleepKind{Group: gk.Group, Kind: gk.Kind})
		}
		return s
	}
	tests := []struct {
		name     string
		s        *powerv1alpha1.SleepSchedule
		problems []kindProblem
		want     time.Duration
	}{
		{"a missing kind waited for", schedule(missing), []kindProblem{{reason: ReasonKindNotFound, gk: missing, waited: true}}, 0},
		{"a missing kind, CRDs not watched", schedule(missing), []kindProblem{{reason: ReasonKindNotFound, gk: missing}}, time.Minute},
		{"a refused list", schedule(missing), []kindProblem{{reason: ReasonKindNotFound, gk: missing, waited: true}, {reason: ReasonForbidden}}, time.Minute},
		{"a served kind not watched", schedule(served.GroupKind()), nil, time.Minute},
	}
	for _, tt := range tests {
		if got := r.kindsRecheck(context.Background(), tt.s, tt.problems); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
	r.KindsRecheck = 0
	if got := r.kindsRecheck(context.Background(), schedule(missing), []kindProblem{{reason: ReasonKindNotFound, gk: missing}}); got != DefaultKindsRecheck {
		t.Errorf("without KindsRecheck: %s, want %s", got, DefaultKindsRecheck)
	}
}
