package devcluster

import (
	"context"
	"strings"
	"testing"
)

// The Gateway API CRDs come from the module, through the module proxy or Go's module
// cache: only CRDs (the ValidatingAdmissionPolicy beside them is left out), HTTPRoute
// among them.
func TestGatewayAPIManifestsAreTheStandardCRDs(t *testing.T) {
	docs, err := GatewayAPIManifests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	crds, others, err := splitManifests(docs)
	if err != nil {
		t.Fatal(err)
	}
	if len(others) != 0 {
		t.Errorf("not only CRDs: %v", manifestNames(others))
	}
	names := strings.Join(manifestNames(crds), " ")
	for _, want := range []string{"httproutes.gateway.networking.k8s.io", "gateways.gateway.networking.k8s.io"} {
		if !strings.Contains(names, want) {
			t.Errorf("%s missing from %s", want, names)
		}
	}
}
