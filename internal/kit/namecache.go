package kit

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// NewNameCache builds a cache of its own, run with the manager, whose objects keep
// only their identity (NameOnly). It is how a controller watches that objects of a
// kind it does not own exist or change (every Service, every Secret) at a few hundred
// bytes an object, whatever their size or whoever wrote them: read and watch it with
// MetadataOf, and read the content, when needed, from the API server.
func NewNameCache(mgr ctrl.Manager) (cache.Cache, error) {
	c, err := cache.New(mgr.GetConfig(), cache.Options{
		HTTPClient: mgr.GetHTTPClient(), Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: NameOnly,
	})
	if err != nil {
		return nil, err
	}
	return c, mgr.Add(c)
}

// NameOnly is a cache transform that keeps of an object's metadata what a cache
// needs to key it and to tell a change (name, namespace, UID, resourceVersion): no
// labels, annotations, owners or managed fields. Anything but metadata passes as it is.
func NameOnly(in any) (any, error) {
	m, ok := in.(*metav1.PartialObjectMetadata)
	if !ok {
		return in, nil
	}
	return &metav1.PartialObjectMetadata{TypeMeta: m.TypeMeta, ObjectMeta: metav1.ObjectMeta{
		Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
	}}, nil
}

// MetadataOf is an empty object of kind gvk, as a name cache holds it.
func MetadataOf(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}
