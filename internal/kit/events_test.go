package kit

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// noteRecorder keeps the notes it is given.
type noteRecorder struct{ notes []string }

func (n *noteRecorder) Eventf(_, _ runtime.Object, _, _, _, note string, args ...any) {
	if len(args) > 0 {
		note = args[0].(string)
	}
	n.notes = append(n.notes, note)
}

func TestRecorder(t *testing.T) {
	var zero Recorder
	zero.Eventf(&corev1.Pod{}, nil, corev1.EventTypeNormal, "Reason", "Act", "no recorder: %s", "nothing happens")

	inner := &noteRecorder{}
	r := NewRecorder(inner)
	r.Eventf(&corev1.Pod{}, nil, corev1.EventTypeNormal, "Reason", "Act", "made %d things", 3)
	r.Eventf(&corev1.Pod{}, nil, corev1.EventTypeWarning, "Reason", "Act", "%s", strings.Repeat("x", 5000))
	if len(inner.notes) != 2 || inner.notes[0] != "made 3 things" {
		t.Fatalf("notes = %q", inner.notes)
	}
	if len(inner.notes[1]) > MaxEventNote {
		t.Errorf("note of %d bytes passed on; the API server refuses more than %d", len(inner.notes[1]), MaxEventNote)
	}
}
