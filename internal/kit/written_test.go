package kit

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func configMapAt(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func TestWrittenVersionsBehind(t *testing.T) {
	now := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	tests := []struct {
		name    string
		written string // "" for no write recorded
		cached  string
		after   time.Duration
		want    bool
	}{
		{name: "nothing written", cached: "100", want: false},
		{name: "cache older than the write", written: "1000", cached: "999", want: true},
		{name: "older with fewer digits", written: "1000", cached: "99", want: true},
		{name: "cache at the write", written: "1000", cached: "1000", want: false},
		{name: "cache past the write", written: "1000", cached: "1001", want: false},
		{name: "newer with more digits", written: "999", cached: "1000", want: false},
		{name: "older but the write is past MaxCacheLag", written: "1000", cached: "999", after: MaxCacheLag + time.Millisecond, want: false},
		{name: "older, at MaxCacheLag", written: "1000", cached: "999", after: MaxCacheLag, want: true},
		{name: "not an integer: taken as current", written: "abc", cached: "999", want: false},
		{name: "cached not an integer", written: "1000", cached: "x1", want: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := now
			w := &WrittenVersions{Now: func() time.Time { return clock }}
			if tt.written != "" {
				w.Record(configMapAt("a", tt.written))
			}
			clock = now.Add(tt.after)
			if got := w.Behind(configMapAt("a", tt.cached)); got != tt.want {
				t.Errorf("Behind(cached %s) after a write of %q = %v, want %v", tt.cached, tt.written, got, tt.want)
			}
		})
	}
}

func TestWrittenVersionsForgetsOnceCaughtUp(t *testing.T) {
	var w WrittenVersions
	w.Record(configMapAt("a", "10"))
	w.Record(configMapAt("b", "20"))
	if !w.Behind(configMapAt("a", "9")) {
		t.Fatal("a at 9 after a write of 10: not behind")
	}
	if w.Behind(configMapAt("a", "10")) {
		t.Fatal("a at 10 after a write of 10: behind")
	}
	// Caught up: the write is forgotten, so an older copy (a relist) is not held back.
	if w.Behind(configMapAt("a", "9")) {
		t.Error("a's write still remembered after the cache caught up with it")
	}
	// Another object's write is its own.
	if !w.Behind(configMapAt("b", "19")) {
		t.Error("b at 19 after a write of 20: not behind")
	}
	w.Forget(types.NamespacedName{Namespace: "ns", Name: "b"})
	if w.Behind(configMapAt("b", "19")) {
		t.Error("b's write still remembered after Forget")
	}
	// No resourceVersion (not written): nothing recorded.
	w.Record(configMapAt("c", ""))
	if w.Behind(configMapAt("c", "1")) {
		t.Error("a write without a resourceVersion was recorded")
	}
}

func TestWrittenVersionsDropsOldWritesOfGoneObjects(t *testing.T) {
	clock := time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	w := &WrittenVersions{Now: func() time.Time { return clock }}
	for i := range sweepAbove + 1 {
		w.Record(configMapAt(fmt.Sprintf("gone-%d", i), "5"))
	}
	clock = clock.Add(MaxCacheLag + time.Second)
	w.Record(configMapAt("fresh", "7"))
	w.mu.Lock()
	left := len(w.m)
	w.mu.Unlock()
	if left != 1 {
		t.Errorf("%d writes remembered after the sweep, want 1 (the fresh one)", left)
	}
	if !w.Behind(configMapAt("fresh", "6")) {
		t.Error("the fresh write was swept")
	}
}
