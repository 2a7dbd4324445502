package kit

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MaxCacheLag is how long WrittenVersions waits for the cache to show a write: past
// it the write is forgotten and the cached copy taken as it is (the cache may have
// relisted past it, or the object been replaced).
const MaxCacheLag = 5 * time.Second

// WrittenVersions remembers the resourceVersion of a controller's last write of each
// of its objects, so that a reconcile can tell that its cached copy is older than that
// write and wait for the cache rather than start from it. A status computed from such
// a copy meets a 409 (the optimistic lock of PatchStatus), and is read again and sent
// again: with many objects reconciled in a burst, hundreds of wasted writes.
//
// Resource versions are compared as the API server's integers
// (resourceversion.CompareResourceVersion); when either is not one (an aggregated API
// server may use another form), the cached copy is taken as current. The zero value
// is ready to use and safe for concurrent use.
type WrittenVersions struct {
	// Now is the clock; time.Now when nil.
	Now func() time.Time

	mu sync.Mutex
	m  map[types.NamespacedName]writtenVersion
}

type writtenVersion struct {
	rv string
	at time.Time
}

// sweepAbove is the count of remembered writes above which Record drops those past
// MaxCacheLag, so that the writes of objects deleted since are not kept for ever.
const sweepAbove = 256

func (w *WrittenVersions) now() time.Time {
	if w.Now != nil {
		return w.Now()
	}
	return time.Now()
}

// Record remembers obj's resourceVersion, as a write of it returned it.
func (w *WrittenVersions) Record(obj client.Object) {
	rv := obj.GetResourceVersion()
	if rv == "" {
		return
	}
	now := w.now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.m == nil {
		w.m = map[types.NamespacedName]writtenVersion{}
	}
	if len(w.m) > sweepAbove {
		for k, v := range w.m {
			if now.Sub(v.at) > MaxCacheLag {
				delete(w.m, k)
			}
		}
	}
	w.m[client.ObjectKeyFromObject(obj)] = writtenVersion{rv: rv, at: now}
}

// Behind reports whether obj, as read from the cache, is older than the last write
// recorded for it, less than MaxCacheLag ago. A write the cache has caught up with,
// or that is older than that, is forgotten.
func (w *WrittenVersions) Behind(obj client.Object) bool {
	key := client.ObjectKeyFromObject(obj)
	w.mu.Lock()
	defer w.mu.Unlock()
	last, ok := w.m[key]
	if !ok {
		return false
	}
	cmp, err := resourceversion.CompareResourceVersion(obj.GetResourceVersion(), last.rv)
	if err == nil && cmp < 0 && w.now().Sub(last.at) <= MaxCacheLag {
		return true
	}
	delete(w.m, key)
	return false
}

// Forget drops what is remembered of key (the object is gone).
func (w *WrittenVersions) Forget(key types.NamespacedName) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.m, key)
}
