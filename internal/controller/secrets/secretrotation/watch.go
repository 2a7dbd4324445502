package secretrotation

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// The Secret a SecretRotation names is watched, so that its creation and each change
// of its content are seen when they happen, not at the next look: an external
// Secret created and changed within a minute used to be first seen in its changed
// form, taken as the starting version, and consumers still on the first content were
// never rolled (issue 42).
//
// The Secrets a SecretRotation names are arbitrary (an external one is written by
// cert-manager, External Secrets Operator, a person) and carry no label Orderly
// could select them by, and the manager's cache holds Secrets only in the DevDatabase
// controller's selection (one view per kind). So a cache of this controller's own
// (kit.NewNameCache) watches every Secret as metadata and keeps of each only its
// name, namespace, UID and resourceVersion: no data, labels, annotations or owners, a
// few hundred bytes a Secret whatever its size or whoever wrote it. A metadata watch still reports every
// change of a Secret's data (each one is a new resourceVersion). The content is read
// from the API server by the reconcile that the event triggers, as before.

// secretIndex indexes SecretRotations by the name of the Secret they rotate.
const secretIndex = "spec.secretName"

// secretObject is an empty Secret for the Secrets cache.
func secretObject() *metav1.PartialObjectMetadata {
	return kit.MetadataOf(corev1.SchemeGroupVersion.WithKind("Secret"))
}

// indexSecretName is the secretIndex of a SecretRotation.
func indexSecretName(o client.Object) []string {
	sr, ok := o.(*secretsv1alpha1.SecretRotation)
	if !ok || sr.Spec.SecretName == "" {
		return nil
	}
	return []string{sr.Spec.SecretName}
}

// secretChanged lets through a Secret's creation, deletion, and each change of it
// (a new resourceVersion; resyncs of an unchanged Secret are dropped).
func secretChanged() predicate.Predicate {
	return predicate.Funcs{
		UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld == nil || e.ObjectNew == nil || e.ObjectOld.GetResourceVersion() != e.ObjectNew.GetResourceVersion()
		},
		GenericFunc: func(event.GenericEvent) bool { return false },
	}
}

// rotationsOfSecret maps a Secret to the SecretRotations of its namespace that rotate
// it. Orderly's writes to a rotation's own Secret (<name>-rotation) wake no one: its
// SecretRotation cannot name it.
func (r *Reconciler) rotationsOfSecret(ctx context.Context, o client.Object) []reconcile.Request {
	var list secretsv1alpha1.SecretRotationList
	if err := r.List(ctx, &list, client.InNamespace(o.GetNamespace()), client.MatchingFields{secretIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Listing SecretRotations for Secret", "secret", client.ObjectKeyFromObject(o))
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}
