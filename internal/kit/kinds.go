package kit

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// How long a KindDetector trusts an answer. A missing kind is asked about again soon,
// so that installing its CRD lets objects that wait for it go on quickly; each question
// is a discovery request shared by every object of the controller.
const (
	KindInstalledTTL = time.Minute
	KindMissingTTL   = 5 * time.Second
)

// KindDetector tells whether the API server serves a kind that is not part of
// Kubernetes (Gateway API, cert-manager, ...), and at which version, so that a
// controller reports a missing CRD in a condition instead of failing, and goes on
// once it is installed, without a restart.
type KindDetector struct {
	mapper meta.RESTMapper
	now    func() time.Time
	// wanted lists, per kind, the versions the controller writes, best first; a kind
	// not listed is taken at whatever version the API server prefers.
	wanted map[schema.GroupKind][]string

	mu      sync.Mutex
	answers map[schema.GroupKind]kindAnswer
}

type kindAnswer struct {
	version string // "" when not served
	at      time.Time
}

// NewKindDetector returns a KindDetector asking mapper; wanted may be nil.
func NewKindDetector(mapper meta.RESTMapper, now func() time.Time, wanted map[schema.GroupKind][]string) *KindDetector {
	return &KindDetector{mapper: mapper, now: now, wanted: wanted, answers: map[schema.GroupKind]kindAnswer{}}
}

// Version returns the served version of gk (one of its wanted versions when it has
// any), "" when none is served.
func (d *KindDetector) Version(gk schema.GroupKind) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if a, ok := d.answers[gk]; ok {
		ttl := KindMissingTTL
		if a.version != "" {
			ttl = KindInstalledTTL
		}
		if now.Sub(a.at) < ttl {
			return a.version, nil
		}
	}
	m, err := d.mapper.RESTMapping(gk)
	switch {
	case meta.IsNoMatchError(err):
		d.answers[gk] = kindAnswer{at: now}
		return "", nil
	case err != nil:
		return "", fmt.Errorf("asking the API server whether %s is served: %w", gk, err)
	}
	v := m.GroupVersionKind.Version
	if want := d.wanted[gk]; len(want) > 0 && !slices.Contains(want, v) {
		// The preferred version is one the controller does not write: is one it writes served?
		m, err := d.mapper.RESTMapping(gk, want...)
		if err != nil {
			d.answers[gk] = kindAnswer{at: now}
			return "", nil //nolint:nilerr // no version the controller writes is served: as good as missing
		}
		v = m.GroupVersionKind.Version
	}
	d.answers[gk] = kindAnswer{version: v, at: now}
	return v, nil
}

// Forget drops what is known of gk: a read failed as if the kind were gone.
func (d *KindDetector) Forget(gk schema.GroupKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.answers, gk)
}
