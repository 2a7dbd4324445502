package servicedomain

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The kinds Orderly writes that are not part of Kubernetes. Whether their CRDs are
// installed is asked of the API server at run time, so that a ServiceDomain reports
// a missing CRD in a condition, and goes on once it is installed, without a restart.
var (
	httpRouteKind   = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}
	gatewayKind     = schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "Gateway"}
	certificateKind = schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	dnsEndpointKind = schema.GroupKind{Group: "externaldns.k8s.io", Kind: "DNSEndpoint"}
)

// The versions Orderly writes of each, best first.
var wantedVersions = map[schema.GroupKind][]string{
	httpRouteKind:   {"v1", "v1beta1"},
	gatewayKind:     {"v1", "v1beta1"},
	certificateKind: {"v1"},
	dnsEndpointKind: {"v1alpha1"},
}

// How long an answer is trusted: a missing kind is asked about again soon, so that
// installing its CRD makes ServiceDomains go on quickly; each question is a
// discovery request shared by every ServiceDomain.
const (
	installedTTL = time.Minute
	missingTTL   = 5 * time.Second
)

// kindDetector tells whether the API server serves a kind at a version Orderly writes.
type kindDetector struct {
	mapper meta.RESTMapper
	now    func() time.Time

	mu      sync.Mutex
	answers map[schema.GroupKind]kindAnswer
}

type kindAnswer struct {
	version string // "" when not served
	at      time.Time
}

func newKindDetector(mapper meta.RESTMapper, now func() time.Time) *kindDetector {
	return &kindDetector{mapper: mapper, now: now, answers: map[schema.GroupKind]kindAnswer{}}
}

// version returns the served version of gk that Orderly writes, "" when none is served.
func (d *kindDetector) version(gk schema.GroupKind) (string, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.now()
	if a, ok := d.answers[gk]; ok {
		ttl := missingTTL
		if a.version != "" {
			ttl = installedTTL
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
	if !slices.Contains(wantedVersions[gk], v) {
		// The preferred version is one Orderly does not write: is one it writes served?
		m, err := d.mapper.RESTMapping(gk, wantedVersions[gk]...)
		if err != nil {
			d.answers[gk] = kindAnswer{at: now}
			return "", nil //nolint:nilerr // no version Orderly writes is served: as good as missing
		}
		v = m.GroupVersionKind.Version
	}
	d.answers[gk] = kindAnswer{version: v, at: now}
	return v, nil
}

// forget drops what is known of gk: a read failed as if the kind were gone.
func (d *kindDetector) forget(gk schema.GroupKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.answers, gk)
}
