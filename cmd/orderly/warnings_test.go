package main

import (
	"context"
	"testing"
)

type recordedWarnings []string

func (r *recordedWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _, text string) {
	*r = append(*r, text)
}

func TestWithoutOwnDeprecations(t *testing.T) {
	var got recordedWarnings
	h := withoutOwnDeprecations{&got}
	for _, text := range []string{
		"power.orderly.dev/v1alpha1 SleepSchedule is deprecated: use power.orderly.dev/v1beta1 (the same fields)",
		"data.orderly.dev/v1alpha1 DevDatabase is deprecated: use data.orderly.dev/v1beta1 (the same fields)",
		"policy/v1beta1 PodSecurityPolicy is deprecated in v1.21+, unavailable in v1.25+",
		"example.com/v1alpha1 Widget is deprecated: see power.orderly.dev/v1alpha1 SleepSchedule is deprecated",
		"notorderly.dev/v1 Thing is deprecated",
		"spec.template.spec.containers[0]: image without a tag",
	} {
		h.HandleWarningHeaderWithContext(context.Background(), 299, "", text)
	}
	want := []string{
		"policy/v1beta1 PodSecurityPolicy is deprecated in v1.21+, unavailable in v1.25+",
		"example.com/v1alpha1 Widget is deprecated: see power.orderly.dev/v1alpha1 SleepSchedule is deprecated",
		"notorderly.dev/v1 Thing is deprecated",
		"spec.template.spec.containers[0]: image without a tag",
	}
	if len(got) != len(want) {
		t.Fatalf("passed on %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("warning %d: %q, want %q", i, got[i], want[i])
		}
	}
}
