package postgres

import "testing"

func TestGrantableTo(t *testing.T) {
	tests := []struct {
		comment, namespace string
		want               bool
	}{
		{"orderly.dev/grantable-to=payments", "payments", true},
		{"orderly.dev/grantable-to=orders, payments", "payments", true},
		{"orderly.dev/grantable-to=payments-staging", "payments", false},
		{"grantable to payments", "payments", false},
		{"", "payments", false},
		{"orderly.dev/grantable-to=", "", false},
	}
	for _, tt := range tests {
		if got := grantableTo(tt.comment, tt.namespace); got != tt.want {
			t.Errorf("grantableTo(%q, %q) = %v, want %v", tt.comment, tt.namespace, got, tt.want)
		}
	}
}
