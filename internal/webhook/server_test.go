package webhook

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
)

func validOptions(mod func(*Options)) Options {
	o := Options{Mutation: "auto", Port: 9443, Service: "orderly-webhook", Secret: "orderly-webhook-tls", FailurePolicy: "Ignore", TimeoutSeconds: 5}
	mod(&o)
	return o
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name     string
		opts     Options
		wantMode admission.Mode
		wantErr  string
	}{
		{"defaults", validOptions(func(*Options) {}), admission.Auto, ""},
		{"empty mode is auto", validOptions(func(o *Options) { o.Mutation = "" }), admission.Auto, ""},
		{"webhook with a URL", validOptions(func(o *Options) { o.Mutation, o.URL = "webhook", "https://127.0.0.1:9443" }), admission.Webhook, ""},
		{"unknown mode", validOptions(func(o *Options) { o.Mutation = "magic" }), "", `unknown LabelPolicy mutation mode "magic"`},
		{"unknown failure policy", validOptions(func(o *Options) { o.FailurePolicy = "Maybe" }), "", `unknown --webhook-failure-policy "Maybe"`},
		{"timeout out of range", validOptions(func(o *Options) { o.TimeoutSeconds = 0 }), "", "--webhook-timeout-seconds 0"},
		{"URL without TLS", validOptions(func(o *Options) { o.URL = "http://127.0.0.1:9443" }), "", "must be an https:// URL"},
		{"URL without a host", validOptions(func(o *Options) { o.URL = "https:///path" }), "", "must be an https:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			mode, err := tt.opts.Validate()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || mode != tt.wantMode {
				t.Errorf("Validate() = %q, %v; want %q", mode, err, tt.wantMode)
			}
		})
	}
}

func TestServesWebhook(t *testing.T) {
	tests := []struct {
		mode      admission.Mode
		mapServed bool
		want      bool
	}{
		{admission.Auto, false, true},
		{admission.Auto, true, false},
		{admission.Webhook, true, true},
		{admission.Webhook, false, true},
		{admission.Native, true, false},
		{admission.Native, false, false},
		{admission.Off, false, false},
	}
	for _, tt := range tests {
		if got := servesWebhook(tt.mode, tt.mapServed); got != tt.want {
			t.Errorf("servesWebhook(%s, MAP served %v) = %v, want %v", tt.mode, tt.mapServed, got, tt.want)
		}
	}
}

func TestEndpoint(t *testing.T) {
	t.Run("through the Service", func(t *testing.T) {
		e, dns, ips := validOptions(func(*Options) {}).endpoint("orderly-system")
		if e.URL != "" || e.Service == nil || e.Service.Namespace != "orderly-system" || e.Service.Name != "orderly-webhook" || *e.Service.Port != 443 {
			t.Errorf("endpoint = %+v", e)
		}
		if e.FailurePolicy != admissionv1.Ignore || e.TimeoutSeconds != 5 {
			t.Errorf("failure policy %s, timeout %d", e.FailurePolicy, e.TimeoutSeconds)
		}
		if !slices.Equal(dns, []string{"orderly-webhook.orderly-system.svc", "orderly-webhook.orderly-system.svc.cluster.local"}) || len(ips) != 0 {
			t.Errorf("certificate names %v, IPs %v", dns, ips)
		}
	})
	t.Run("at an IP", func(t *testing.T) {
		e, dns, ips := validOptions(func(o *Options) { o.URL = "https://127.0.0.1:9443" }).endpoint("orderly-system")
		if e.URL != "https://127.0.0.1:9443" || e.Service != nil {
			t.Errorf("endpoint = %+v", e)
		}
		if len(dns) != 0 || len(ips) != 1 || !ips[0].Equal(net.ParseIP("127.0.0.1")) {
			t.Errorf("certificate names %v, IPs %v", dns, ips)
		}
	})
	t.Run("at a host name", func(t *testing.T) {
		_, dns, ips := validOptions(func(o *Options) { o.URL = "https://orderly.example:9443" }).endpoint("orderly-system")
		if !slices.Equal(dns, []string{"orderly.example"}) || len(ips) != 0 {
			t.Errorf("certificate names %v, IPs %v", dns, ips)
		}
	})
}

// A manager that does not run the LabelPolicy controller asks the API server nothing
// (a nil config would fail) and serves no webhook, whatever the mode.
func TestPrepareWithoutLabelPolicy(t *testing.T) {
	for _, mode := range []string{"auto", "webhook"} {
		s, err := Prepare(context.Background(), nil, validOptions(func(o *Options) { o.Mutation = mode }), "orderly-system", []kit.Controller{{Name: "tenant"}})
		if err != nil {
			t.Fatal(err)
		}
		if s.serve || s.Admission.Webhook != nil || s.Admission.MAPServed {
			t.Errorf("mode %s: serves %v, endpoint %+v, MAP served %v", mode, s.serve, s.Admission.Webhook, s.Admission.MAPServed)
		}
		if err := s.Register(context.Background(), nil); err != nil {
			t.Errorf("Register without a webhook to serve: %v", err)
		}
	}
	if _, err := Prepare(context.Background(), nil, validOptions(func(o *Options) { o.Mutation = "magic" }), "orderly-system", nil); err == nil {
		t.Error("Prepare accepted an unknown mode")
	}
}
