//go:build integration

package servicedomain

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/testing/testenv"
)

// The samples in config/samples are accepted by the API server as they are.
func TestSamplesAreValid(t *testing.T) {
	ctx := context.Background()
	read := func(name string, into client.Object) {
		b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", name))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		NewWithT(t).Expect(yaml.UnmarshalStrict(b, into)).To(Succeed())
	}
	var zone networkv1alpha1.DomainZone
	read("network_v1alpha1_domainzone.yaml", &zone)
	NewWithT(t).Expect(k.Create(ctx, &zone, client.DryRunAll)).To(Succeed())
	var sd networkv1alpha1.ServiceDomain
	read("network_v1alpha1_servicedomain.yaml", &sd)
	NewWithT(t).Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sd.Namespace}})).To(Succeed())
	NewWithT(t).Expect(k.Create(ctx, &sd, client.DryRunAll)).To(Succeed())

	// And what the zone's CEL rules refuse.
	bad := zone.DeepCopy()
	bad.ResourceVersion = ""
	bad.Spec.DNS.Provider = networkv1alpha1.ProviderExternalDNS
	NewWithT(t).Expect(k.Create(ctx, bad, client.DryRunAll)).NotTo(Succeed(), "rfc2136 settings with provider ExternalDNS")
	bad = zone.DeepCopy()
	bad.Spec.Target = networkv1alpha1.Target{From: networkv1alpha1.TargetFromFixed}
	NewWithT(t).Expect(k.Create(ctx, bad, client.DryRunAll)).NotTo(Succeed(), "from Fixed without addresses")
	bad = zone.DeepCopy()
	bad.Spec.Zone = "Int.Example.com."
	NewWithT(t).Expect(k.Create(ctx, bad, client.DryRunAll)).NotTo(Succeed(), "a zone that is not a lower-case DNS name")
}
