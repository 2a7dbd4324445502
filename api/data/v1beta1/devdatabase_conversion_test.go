package v1beta1_test

import (
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	datav1beta1 "orderly.dev/orderly/api/data/v1beta1"
	"orderly.dev/orderly/internal/testing/testconversion"
)

// TestDevDatabaseRoundTrip: random DevDatabases go from v1alpha1 to v1beta1 and back, and the
// other way, unchanged.
func TestDevDatabaseRoundTrip(t *testing.T) {
	testconversion.RoundTrip(t,
		func() conversion.Hub { return &datav1alpha1.DevDatabase{} },
		func() conversion.Convertible { return &datav1beta1.DevDatabase{} })
}
