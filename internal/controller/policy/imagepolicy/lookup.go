package imagepolicy

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
)

// CacheLookup reads ImageScans from a cache-backed reader with
// imagescan.TagIndex registered: a Get by name for a digest, an index lookup for a
// tag. Nothing here leaves the process.
type CacheLookup struct {
	Ctx    context.Context
	Reader client.Reader
}

// ByDigest implements Lookup.
func (c CacheLookup) ByDigest(repository, digest string) *policyv1alpha1.ImageScan {
	var s policyv1alpha1.ImageScan
	if err := c.Reader.Get(c.Ctx, client.ObjectKey{Name: imagescan.ScanName(repository, digest)}, &s); err != nil {
		return nil
	}
	return &s
}

// ByTag implements Lookup. When several ImageScans list the tag (it moved and the
// inventory has not caught up), the most recently created wins.
func (c CacheLookup) ByTag(repository, tag string) (scan, pending *policyv1alpha1.ImageScan) {
	var list policyv1alpha1.ImageScanList
	if err := c.Reader.List(c.Ctx, &list, client.MatchingFields{imagescan.TagIndex: imagescan.TagKey(repository, tag)}); err == nil {
		for i := range list.Items {
			s := &list.Items[i]
			if scan == nil || scan.CreationTimestamp.Before(&s.CreationTimestamp) {
				scan = s
			}
		}
	}
	var p policyv1alpha1.ImageScan
	if err := c.Reader.Get(c.Ctx, client.ObjectKey{Name: imagescan.PendingName(repository, tag)}, &p); err == nil {
		pending = &p
	}
	return scan, pending
}
