package kit

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
)

// MaxEventNote is the longest Event note the API server accepts, in bytes.
const MaxEventNote = 1024

// Recorder records Events on Orderly's objects. Its zero value records nothing, so
// unit tests need no recorder, and every note is cut to what the API server accepts
// (a longer note makes the whole Event fail).
type Recorder struct {
	events.EventRecorder
}

// NewRecorder returns a Recorder that sends Events through r.
func NewRecorder(r events.EventRecorder) Recorder { return Recorder{EventRecorder: r} }

// Eventf records an Event about regarding (and related, which may be nil).
func (r Recorder) Eventf(regarding, related runtime.Object, eventtype, reason, action, note string, args ...any) {
	if r.EventRecorder == nil {
		return
	}
	r.EventRecorder.Eventf(regarding, related, eventtype, reason, action, "%s", Truncate(fmt.Sprintf(note, args...), MaxEventNote))
}
