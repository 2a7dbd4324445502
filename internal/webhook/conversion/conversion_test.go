package conversion

import (
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/utils/ptr"

	"orderly.dev/orderly/internal/admission"
)

func TestDesiredAndSame(t *testing.T) {
	service := &admission.Endpoint{Service: &admissionv1.ServiceReference{Namespace: "orderly-system", Name: "orderly-webhook", Port: ptr.To(int32(443))}}
	loopback := &admission.Endpoint{URL: "https://127.0.0.1:9443"}
	ca, renewed := []byte("CA 1"), []byte("CA 2")

	s := Desired(service, ca)
	if s.Webhook.ClientConfig.URL != nil || s.Webhook.ClientConfig.Service.Name != "orderly-webhook" ||
		*s.Webhook.ClientConfig.Service.Path != "/convert" || *s.Webhook.ClientConfig.Service.Port != 443 {
		t.Errorf("through the Service: %+v", s.Webhook.ClientConfig)
	}
	l := Desired(loopback, ca)
	if *l.Webhook.ClientConfig.URL != "https://127.0.0.1:9443/convert" || l.Webhook.ClientConfig.Service != nil {
		t.Errorf("at the URL: %+v", l.Webhook.ClientConfig)
	}
	cases := []struct {
		name     string
		have     bool
		wantSame bool
	}{
		{"none written yet (None)", false, false},
		{"the same", true, true},
	}
	for _, tc := range cases {
		have := Desired(service, ca)
		if !tc.have {
			have = nil
		}
		if got := Same(have, Desired(service, ca)); got != tc.wantSame {
			t.Errorf("%s: Same = %v", tc.name, got)
		}
	}
	if Same(Desired(service, ca), Desired(service, renewed)) {
		t.Error("a renewed CA is not written")
	}
	if Same(Desired(service, ca), Desired(loopback, ca)) {
		t.Error("a move from the Service to a URL is not written")
	}
}

// A manager without a webhook wants the strategy None: a CRD pointed at a webhook (a
// server that may be gone) differs from it, one with None or none set does not.
func TestSameNone(t *testing.T) {
	none := &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.NoneConverter}
	pointed := Desired(&admission.Endpoint{URL: "https://127.0.0.1:9443"}, []byte("CA"))
	if Same(pointed, none) {
		t.Error("a CRD pointed at a webhook counts as None")
	}
	if !Same(none, none) || !Same(nil, none) {
		t.Error("a CRD with None, or without a conversion, does not count as None")
	}
	if Same(none, pointed) {
		t.Error("a CRD with None counts as pointed at the webhook")
	}
}
