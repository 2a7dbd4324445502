package kit

import (
	"fmt"
	"slices"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
)

// How long a KindDetector trusts an answer. A missing kind is asked about again soon,
// so that installing its CRD lets objects that wait for it go on quickly where no
// CRD watch tells (KindWatches forgets the answers of a group whose CRDs change); each
// question is a discovery request shared by every object of the controller.
const (
	KindInstalledTTL = time.Minute
	KindMissingTTL   = 5 * time.Second
)

// KindInfo is what the API server says of a kind.
type KindInfo struct {
	// Version is the served version (one the controller writes when it named some);
	// "" when the kind is not served.
	Version string
	// Resource is the kind's resource (plural) at that version.
	Resource string
	// Namespaced is true for a namespaced kind.
	Namespaced bool
	// Scale is true when the resource has a scale subresource; known only to a
	// detector made WithSubresources.
	Scale bool
}

// GroupVersionResource is the resource the kind is served as.
func (i KindInfo) GroupVersionResource(gk schema.GroupKind) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: gk.Group, Version: i.Version, Resource: i.Resource}
}

// ResourceLister is the part of a discovery client that tells a group version's
// resources and subresources (discovery.DiscoveryClient).
type ResourceLister interface {
	ServerResourcesForGroupVersion(groupVersion string) (*metav1.APIResourceList, error)
}

// KindDetector tells whether the API server serves a kind that is not part of
// Kubernetes (Gateway API, cert-manager, a user's CRD), at which version, and, made
// WithSubresources, whether it has a scale subresource, so that a controller reports
// a missing CRD in a condition instead of failing, and goes on once it is installed,
// without a restart. Time is read from the clock it is given, and nothing else.
type KindDetector struct {
	mapper meta.RESTMapper
	clock  clock.PassiveClock
	// wanted lists, per kind, the versions the controller writes, best first; a kind
	// not listed is taken at whatever version the API server prefers.
	wanted map[schema.GroupKind][]string
	// resources, when set, is asked for a served kind's subresources.
	resources ResourceLister

	mu      sync.Mutex
	answers map[schema.GroupKind]kindAnswer
}

type kindAnswer struct {
	info KindInfo // Version "" when not served
	at   time.Time
}

// NewKindDetector returns a KindDetector asking mapper, on clk; wanted may be nil.
func NewKindDetector(mapper meta.RESTMapper, clk clock.PassiveClock, wanted map[schema.GroupKind][]string) *KindDetector {
	return &KindDetector{mapper: mapper, clock: clk, wanted: wanted, answers: map[schema.GroupKind]kindAnswer{}}
}

// WithSubresources makes d ask resources (a discovery client) whether a served kind
// has a scale subresource (KindInfo.Scale); it returns d.
func (d *KindDetector) WithSubresources(resources ResourceLister) *KindDetector {
	d.resources = resources
	return d
}

// Version returns the served version of gk (one of its wanted versions when it has
// any), "" when none is served.
func (d *KindDetector) Version(gk schema.GroupKind) (string, error) {
	info, err := d.Info(gk)
	return info.Version, err
}

// Info returns what the API server says of gk; its Version is "" when gk is not
// served (at a version the controller writes).
func (d *KindDetector) Info(gk schema.GroupKind) (KindInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	now := d.clock.Now()
	if a, ok := d.answers[gk]; ok {
		ttl := KindMissingTTL
		if a.info.Version != "" {
			ttl = KindInstalledTTL
		}
		if now.Sub(a.at) < ttl {
			return a.info, nil
		}
	}
	info, err := d.ask(gk)
	if err != nil {
		return KindInfo{}, err
	}
	d.answers[gk] = kindAnswer{info: info, at: now}
	return info, nil
}

// ask asks the API server about gk: the mapper, then the resources' discovery.
func (d *KindDetector) ask(gk schema.GroupKind) (KindInfo, error) {
	m, err := d.mapper.RESTMapping(gk)
	switch {
	case meta.IsNoMatchError(err):
		return KindInfo{}, nil
	case err != nil:
		return KindInfo{}, fmt.Errorf("asking the API server whether %s is served: %w", gk, err)
	}
	if want := d.wanted[gk]; len(want) > 0 && !slices.Contains(want, m.GroupVersionKind.Version) {
		// The preferred version is one the controller does not write: is one it writes served?
		if m, err = d.mapper.RESTMapping(gk, want...); err != nil {
			return KindInfo{}, nil //nolint:nilerr // no version the controller writes is served: as good as missing
		}
	}
	info := KindInfo{Version: m.GroupVersionKind.Version, Resource: m.Resource.Resource,
		Namespaced: m.Scope != nil && m.Scope.Name() == meta.RESTScopeNameNamespace}
	if d.resources == nil {
		return info, nil
	}
	list, err := d.resources.ServerResourcesForGroupVersion(m.GroupVersionKind.GroupVersion().String())
	switch {
	case apierrors.IsNotFound(err):
		// The mapper knew the group version from before: it is gone.
		return KindInfo{}, nil
	case err != nil:
		return KindInfo{}, fmt.Errorf("asking the API server for the resources of %s: %w", m.GroupVersionKind.GroupVersion(), err)
	}
	for _, r := range list.APIResources {
		if r.Name == info.Resource+"/scale" {
			info.Scale = true
		}
	}
	return info, nil
}

// Forget drops what is known of gk: a read failed as if the kind were gone.
func (d *KindDetector) Forget(gk schema.GroupKind) {
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.answers, gk)
}

// ForgetGroup drops what is known of every kind of group: one of its CRDs changed.
func (d *KindDetector) ForgetGroup(group string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for gk := range d.answers {
		if gk.Group == group {
			delete(d.answers, gk)
		}
	}
}
