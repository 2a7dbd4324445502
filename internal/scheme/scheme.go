// Package scheme builds the runtime.Scheme that knows Kubernetes' built-in kinds and
// every Orderly kind: the manager, the CLI, and the tests all use it.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	datav1beta1 "orderly.dev/orderly/api/data/v1beta1"
	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	powerv1beta1 "orderly.dev/orderly/api/power/v1beta1"
	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// New returns a scheme with Kubernetes' built-in kinds and every Orderly kind.
func New() *runtime.Scheme {
	s := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(s))
	utilruntime.Must(tenancyv1alpha1.AddToScheme(s))
	utilruntime.Must(policyv1alpha1.AddToScheme(s))
	utilruntime.Must(datav1alpha1.AddToScheme(s))
	utilruntime.Must(datav1beta1.AddToScheme(s))
	utilruntime.Must(powerv1alpha1.AddToScheme(s))
	utilruntime.Must(powerv1beta1.AddToScheme(s))
	utilruntime.Must(deliveryv1alpha1.AddToScheme(s))
	utilruntime.Must(secretsv1alpha1.AddToScheme(s))
	utilruntime.Must(networkv1alpha1.AddToScheme(s))
	utilruntime.Must(fleetv1alpha1.AddToScheme(s))
	utilruntime.Must(clusterinventoryv1alpha1.AddToScheme(s))
	return s
}
