package kit

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKindDetector(t *testing.T) {
	route := schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}
	cert := schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	gv := schema.GroupVersion{Group: route.Group, Version: "v1beta1"}
	cv := schema.GroupVersion{Group: cert.Group, Version: "v1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv, cv})
	mapper.Add(gv.WithKind(route.Kind), meta.RESTScopeNamespace)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }

	version := func(d *KindDetector, gk schema.GroupKind) string {
		t.Helper()
		v, err := d.Version(gk)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(NewKindDetector(mapper, clock, nil), route); v != "v1beta1" {
		t.Errorf("any version: got %q, want v1beta1", v)
	}
	if v := version(NewKindDetector(mapper, clock, map[schema.GroupKind][]string{route: {"v1", "v1beta1"}}), route); v != "v1beta1" {
		t.Errorf("v1 or v1beta1 with v1beta1 served: got %q", v)
	}
	if v := version(NewKindDetector(mapper, clock, map[schema.GroupKind][]string{route: {"v1"}}), route); v != "" {
		t.Errorf("only v1 wanted, only v1beta1 served: got %q, want none", v)
	}

	// A missing kind is asked about again after KindMissingTTL; an installed one is
	// trusted for KindInstalledTTL unless forgotten.
	d := NewKindDetector(mapper, clock, nil)
	if v := version(d, cert); v != "" {
		t.Fatalf("cert-manager not installed: got %q", v)
	}
	mapper.AddSpecific(cv.WithKind(cert.Kind), cv.WithResource("certificates"), cv.WithResource("certificate"), meta.RESTScopeNamespace)
	if v := version(d, cert); v != "" {
		t.Errorf("within KindMissingTTL the answer is kept: got %q", v)
	}
	now = now.Add(KindMissingTTL)
	if v := version(d, cert); v != "v1" {
		t.Errorf("after KindMissingTTL: got %q, want v1", v)
	}
	d.Forget(cert)
	if v := version(d, cert); v != "v1" {
		t.Errorf("after Forget: got %q, want v1", v)
	}
}
