package kit

import (
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Requests returns a reconcile request for each of items (a list's Items), as a
// watch's map function returns them for the objects it found concerned.
func Requests[T any, P interface {
	*T
	client.Object
}](items []T) []reconcile.Request {
	reqs := make([]reconcile.Request, 0, len(items))
	for i := range items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(P(&items[i]))})
	}
	return reqs
}
