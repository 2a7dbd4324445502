package kit

import (
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestKindDetector(t *testing.T) {
	route := schema.GroupKind{Group: "gateway.networking.k8s.io", Kind: "HTTPRoute"}
	cert := schema.GroupKind{Group: "cert-manager.io", Kind: "Certificate"}
	gv := schema.GroupVersion{Group: route.Group, Version: "v1beta1"}
	cv := schema.GroupVersion{Group: cert.Group, Version: "v1"}
	mapper := meta.NewDefaultRESTMapper([]schema.GroupVersion{gv, cv})
	mapper.Add(gv.WithKind(route.Kind), meta.RESTScopeNamespace)
	clk := clocktesting.NewFakePassiveClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))

	version := func(d *KindDetector, gk schema.GroupKind) string {
		t.Helper()
		v, err := d.Version(gk)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	if v := version(NewKindDetector(mapper, clk, nil), route); v != "v1beta1" {
		t.Errorf("any version: got %q, want v1beta1", v)
	}
	if v := version(NewKindDetector(mapper, clk, map[schema.GroupKind][]string{route: {"v1", "v1beta1"}}), route); v != "v1beta1" {
		t.Errorf("v1 or v1beta1 with v1beta1 served: got %q", v)
	}
	if v := version(NewKindDetector(mapper, clk, map[schema.GroupKind][]string{route: {"v1"}}), route); v != "" {
		t.Errorf("only v1 wanted, only v1beta1 served: got %q, want none", v)
	}

	// A missing kind is asked about again after KindMissingTTL on the clock given; an
	// installed one is trusted for KindInstalledTTL unless forgotten.
	d := NewKindDetector(mapper, clk, nil)
	if v := version(d, cert); v != "" {
		t.Fatalf("cert-manager not installed: got %q", v)
	}
	mapper.AddSpecific(cv.WithKind(cert.Kind), cv.WithResource("certificates"), cv.WithResource("certificate"), meta.RESTScopeNamespace)
	if v := version(d, cert); v != "" {
		t.Errorf("within KindMissingTTL the answer is kept: got %q", v)
	}
	clk.SetTime(clk.Now().Add(KindMissingTTL))
	if v := version(d, cert); v != "v1" {
		t.Errorf("after KindMissingTTL: got %q, want v1", v)
	}
	d.Forget(cert)
	if v := version(d, cert); v != "v1" {
		t.Errorf("after Forget: got %q, want v1", v)
	}
}

// countingMapper serves the kinds in served, counting the questions.
type countingMapper struct {
	meta.RESTMapper
	served map[schema.GroupKind]string
	scope  meta.RESTScope
	asked  int
}

func (f *countingMapper) RESTMapping(gk schema.GroupKind, _ ...string) (*meta.RESTMapping, error) {
	f.asked++
	v, ok := f.served[gk]
	if !ok {
		return nil, &meta.NoKindMatchError{GroupKind: gk}
	}
	return &meta.RESTMapping{GroupVersionKind: gk.WithVersion(v), Scope: f.scope,
		Resource: schema.GroupVersionResource{Group: gk.Group, Version: v, Resource: "widgets"}}, nil
}

type resourcesFunc func(string) (*metav1.APIResourceList, error)

func (f resourcesFunc) ServerResourcesForGroupVersion(gv string) (*metav1.APIResourceList, error) {
	return f(gv)
}

// Made WithSubresources, the detector tells whether a served kind has a scale
// subresource, and a kind installed after it was found missing is found again on the
// clock it was given (time.Now plays no part), or at once when its group is forgotten.
func TestKindDetectorSubresources(t *testing.T) {
	gk := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	other := schema.GroupKind{Group: "other.example.com", Kind: "Gadget"}
	m := &countingMapper{served: map[schema.GroupKind]string{}, scope: meta.RESTScopeNamespace}
	resources := []metav1.APIResource{{Name: "widgets"}, {Name: "widgets/status"}}
	var discoveryErr error
	clk := clocktesting.NewFakePassiveClock(time.Unix(0, 0))
	d := NewKindDetector(m, clk, nil).WithSubresources(resourcesFunc(func(gv string) (*metav1.APIResourceList, error) {
		if gv != "example.com/v1" {
			t.Errorf("asked for the resources of %s", gv)
		}
		return &metav1.APIResourceList{APIResources: resources}, discoveryErr
	}))
	info := func() KindInfo {
		t.Helper()
		in, err := d.Info(gk)
		if err != nil {
			t.Fatal(err)
		}
		return in
	}
	if in := info(); in.Version != "" {
		t.Fatalf("missing kind: %+v", in)
	}
	m.served[gk] = "v1"
	if in := info(); in.Version != "" || m.asked != 1 {
		t.Fatalf("answer not shared within its TTL: %+v, asked %d", in, m.asked)
	}
	d.ForgetGroup(other.Group)
	if in := info(); in.Version != "" {
		t.Fatalf("another group forgotten: %+v", in)
	}
	d.ForgetGroup(gk.Group)
	if in := info(); in != (KindInfo{Version: "v1", Resource: "widgets", Namespaced: true}) {
		t.Fatalf("installed kind without scale: %+v", in)
	}

	resources = append(resources, metav1.APIResource{Name: "widgets/scale"})
	if in := info(); in.Scale {
		t.Fatalf("within KindInstalledTTL the answer is kept: %+v", in)
	}
	clk.SetTime(clk.Now().Add(KindInstalledTTL))
	if in := info(); !in.Scale {
		t.Fatalf("after KindInstalledTTL: %+v, want a scale subresource", in)
	}

	// Discovery failing is an error, not a missing kind; its group version gone is.
	d.Forget(gk)
	discoveryErr = errors.New("discovery down")
	if _, err := d.Info(gk); err == nil {
		t.Error("a discovery failure is not reported")
	}
	discoveryErr = apierrors.NewNotFound(schema.GroupResource{}, "example.com/v1")
	if in := info(); in.Version != "" {
		t.Errorf("a group version discovery no longer knows: %+v, want missing", in)
	}

	m.scope = meta.RESTScopeRoot
	d.Forget(gk)
	discoveryErr = nil
	if in := info(); in.Namespaced || in.Version != "v1" {
		t.Errorf("cluster-scoped kind: %+v", in)
	}
}
