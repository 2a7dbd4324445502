package backupverification

import (
	"testing"

	"k8s.io/utils/ptr"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

func TestEvaluate(t *testing.T) {
	tests := []struct {
		name  string
		check datav1alpha1.SQLCheck
		value string
		want  bool
	}{
		{"expect equal", datav1alpha1.SQLCheck{Expect: ptr.To("0")}, "0", true},
		{"expect differs", datav1alpha1.SQLCheck{Expect: ptr.To("0")}, "3", false},
		{"expect is text, not a number", datav1alpha1.SQLCheck{Expect: ptr.To("1.0")}, "1", false},
		{"min met", datav1alpha1.SQLCheck{Min: ptr.To("1000")}, "1000", true},
		{"min missed", datav1alpha1.SQLCheck{Min: ptr.To("1000")}, "999", false},
		{"max met, decimals", datav1alpha1.SQLCheck{Max: ptr.To("0.5")}, "0.25", true},
		{"max missed", datav1alpha1.SQLCheck{Max: ptr.To("0.5")}, "0.51", false},
		{"range", datav1alpha1.SQLCheck{Min: ptr.To("-1"), Max: ptr.To("1")}, "0", true},
		{"not a number", datav1alpha1.SQLCheck{Min: ptr.To("1")}, "many", false},
		{"NULL is not a number", datav1alpha1.SQLCheck{Min: ptr.To("0")}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, msg := evaluate(tt.check, tt.value)
			if got != tt.want {
				t.Errorf("evaluate(%q) = %v (%s), want %v", tt.value, got, msg, tt.want)
			}
			if !got && msg == "" {
				t.Error("a failed check needs a message")
			}
		})
	}
}
