package backupverification

import (
	"testing"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

func TestRunOf(t *testing.T) {
	bv := &datav1alpha1.BackupVerification{}
	bv.UID = "0b7c6a1e-2f3d-4c5b-9a8e-7d6c5b4a3f21"
	prefix := runPrefix(bv)
	if want := "orderly_0b7c6a1e2f3d4c5b9a8e7d6c5b4a3f21bv"; prefix != want {
		t.Fatalf("prefix %q, want %q", prefix, want)
	}
	tests := []struct {
		name   string
		want   int64
		wantOK bool
	}{
		{prefix + "1", 1, true},
		{prefix + "120", 120, true},
		{throwaway(bv, 7).Name, 7, true},
		{prefix, 0, false},
		{prefix + "0", 0, false},
		{prefix + "07", 0, false},
		{prefix + "1x", 0, false},
		{prefix + "1_reader", 0, false},
		{"orderly_0b7c6a1e2f3d4c5b9a8e7d6c5b4a3f21", 0, false}, // a DevDatabase's name
	}
	for _, tt := range tests {
		n, ok := runOf(prefix, tt.name)
		if n != tt.want || ok != tt.wantOK {
			t.Errorf("runOf(%q) = %d, %v; want %d, %v", tt.name, n, ok, tt.want, tt.wantOK)
		}
	}
}
