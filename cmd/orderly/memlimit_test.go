package main

import "testing"

func TestSoftLimit(t *testing.T) {
	for _, tt := range []struct {
		content string
		want    int64
	}{
		{"268435456\n", 228170137},   // 256Mi: 85%
		{"max\n", 0},                 // cgroup v2 without a limit
		{"9223372036854771712\n", 0}, // cgroup v1 without a limit
		{"", 0},                      // unreadable
		{"0\n", 0},                   // nonsense
		{"1073741824", 912680550},    // 1Gi, no newline
	} {
		if got := softLimit(tt.content); got != tt.want {
			t.Errorf("softLimit(%q) = %d, want %d", tt.content, got, tt.want)
		}
	}
}
