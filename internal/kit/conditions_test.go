package kit

import (
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestTruncate(t *testing.T) {
	tests := []struct {
		name string
		in   string
		n    int
		want string
	}{
		{"short enough", "hello", 5, "hello"},
		{"cut ascii", "hello world", 8, "hello..."},
		{"never splits a character", "ab€€€", 7, "ab..."}, // € is 3 bytes: a cut after 4 bytes would split the first one
		{"keeps a whole character", "ab€€€", 8, "ab€..."},
		{"tiny limit", "hello", 2, ".."},
		{"zero", "hello", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Truncate(tt.in, tt.n)
			if got != tt.want {
				t.Errorf("Truncate(%q, %d) = %q, want %q", tt.in, tt.n, got, tt.want)
			}
			if len(got) > tt.n || !utf8.ValidString(got) {
				t.Errorf("Truncate(%q, %d) = %q: %d bytes, valid UTF-8 %v", tt.in, tt.n, got, len(got), utf8.ValidString(got))
			}
		})
	}
}

func TestFirstN(t *testing.T) {
	names := []string{"a", "b", "c", "d", "e"}
	tests := []struct {
		n    int
		want string
	}{
		{5, "a, b, c, d, e"},
		{10, "a, b, c, d, e"},
		{2, "a, b and 3 more"},
	}
	for _, tt := range tests {
		if got := FirstN(names, tt.n); got != tt.want {
			t.Errorf("FirstN(%v, %d) = %q, want %q", names, tt.n, got, tt.want)
		}
	}
	if got := Bounded(names, 2); len(got) != 2 || got[1] != "b" {
		t.Errorf("Bounded(names, 2) = %v", got)
	}
	if got := Bounded(names, 9); len(got) != 5 {
		t.Errorf("Bounded(names, 9) = %v", got)
	}
}

func TestConditionsStampGenerationAndKeepTransitionTime(t *testing.T) {
	var list []metav1.Condition
	c := ConditionsOf(&list, 3)
	c.True("Ready", "Fine", "all good")
	first := meta.FindStatusCondition(list, "Ready")
	if first == nil || first.ObservedGeneration != 3 || first.Status != metav1.ConditionTrue || first.Reason != "Fine" {
		t.Fatalf("Ready = %+v", first)
	}
	since := first.LastTransitionTime

	ConditionsOf(&list, 4).True("Ready", "StillFine", "still good")
	again := meta.FindStatusCondition(list, "Ready")
	if again.ObservedGeneration != 4 || again.Reason != "StillFine" || !again.LastTransitionTime.Equal(&since) {
		t.Errorf("a condition whose status stays keeps its transition time: %+v (was %v)", again, since)
	}

	ConditionsOf(&list, 4).False("Ready", "Broken", strings.Repeat("é", MaxConditionMessage))
	broken := meta.FindStatusCondition(list, "Ready")
	if len(broken.Message) > MaxConditionMessage || !utf8.ValidString(broken.Message) {
		t.Errorf("message of %d bytes, valid UTF-8 %v", len(broken.Message), utf8.ValidString(broken.Message))
	}
	ConditionsOf(&list, 4).Unknown("Other", "Pending", "")
	if len(list) != 2 {
		t.Errorf("conditions = %d, want 2", len(list))
	}
}

// At stamps transitions with the injected clock: set when the status changes, kept
// while it stays.
func TestConditionsAtStampTransitionsWithTheClock(t *testing.T) {
	var list []metav1.Condition
	t0 := time.Date(2026, 12, 2, 20, 0, 0, 0, time.UTC)
	ConditionsOf(&list, 1).At(t0).True("Ready", "Fine", "")
	if got := meta.FindStatusCondition(list, "Ready").LastTransitionTime; !got.Time.Equal(t0) {
		t.Fatalf("transition at %v, want %v", got, t0)
	}
	ConditionsOf(&list, 1).At(t0.Add(time.Hour)).True("Ready", "StillFine", "")
	if got := meta.FindStatusCondition(list, "Ready").LastTransitionTime; !got.Time.Equal(t0) {
		t.Errorf("status unchanged: transition at %v, want it kept at %v", got, t0)
	}
	ConditionsOf(&list, 1).At(t0.Add(2*time.Hour)).False("Ready", "Broken", "")
	if got := meta.FindStatusCondition(list, "Ready").LastTransitionTime; !got.Time.Equal(t0.Add(2 * time.Hour)) {
		t.Errorf("status changed: transition at %v, want %v", got, t0.Add(2*time.Hour))
	}
}

func TestConditionsRemove(t *testing.T) {
	tests := []struct {
		name   string
		list   []metav1.Condition
		remove string
		want   []string
	}{
		{"removes the one named", []metav1.Condition{{Type: "Ready"}, {Type: "Quota"}, {Type: "Other"}}, "Quota", []string{"Ready", "Other"}},
		{"absent is no change", []metav1.Condition{{Type: "Ready"}}, "Quota", []string{"Ready"}},
		{"the last one", []metav1.Condition{{Type: "Quota"}}, "Quota", nil},
		{"empty list", nil, "Quota", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := tt.list
			ConditionsOf(&list, 2).Remove(tt.remove)
			var got []string
			for _, c := range list {
				got = append(got, c.Type)
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("after Remove(%q): %v, want %v", tt.remove, got, tt.want)
			}
		})
	}
}
