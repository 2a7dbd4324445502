package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/controller/policy/labelpolicy"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/webhook/certs"
	"orderly.dev/orderly/internal/webhook/tlstest"
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

// The webhook server speaks HTTP/1.1 only (HTTP/2 was the way into the 2023 rapid-reset
// denial of service): a client that offers only h2 is refused at the handshake, and
// one that offers both gets HTTP/1.1.
func TestWebhookServerRefusesHTTP2(t *testing.T) {
	// A manager with a certificate from cert-manager (--webhook-cert-dir), on an API
	// server without MutatingAdmissionPolicy: the discovery answer is all it asks.
	apiServer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/apis/admissionregistration.k8s.io/v1" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"admissionregistration.k8s.io/v1","resources":[]}`))
	}))
	defer apiServer.Close()
	dir, caPEM := certDir(t)
	port := freePort(t)
	s, err := Prepare(context.Background(), &rest.Config{Host: apiServer.URL}, validOptions(func(o *Options) {
		o.Host, o.Port, o.CertDir, o.URL = "127.0.0.1", port, dir, fmt.Sprintf("https://127.0.0.1:%d", port)
	}), "orderly-system", []kit.Controller{{Name: labelpolicy.Name}})
	if err != nil {
		t.Fatal(err)
	}
	if !s.serve {
		t.Fatal("the manager serves no webhook")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := s.NewServer()
	srv.Register("/ping", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("pong")) }))
	go func() { _ = srv.Start(ctx) }()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("no CA certificate")
	}
	tlstest.AssertHTTP1Only(t, fmt.Sprintf("127.0.0.1:%d", port), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", MinVersion: tls.VersionTLS12}, "/ping")
}

// certDir writes a CA and a serving certificate for 127.0.0.1 into a directory, as
// cert-manager would, and returns it with the CA certificate.
func certDir(t *testing.T) (string, []byte) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	m := &certs.Manager{Client: c, Reader: c, Namespace: "orderly-system", Name: "tls", IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	if err := m.Ensure(context.Background()); err != nil {
		t.Fatal(err)
	}
	var secret corev1.Secret
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: "orderly-system", Name: "tls"}, &secret); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, k := range []string{certs.KeyCACert, corev1.TLSCertKey, corev1.TLSPrivateKeyKey} {
		if err := os.WriteFile(filepath.Join(dir, k), secret.Data[k], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir, secret.Data[certs.KeyCACert]
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
