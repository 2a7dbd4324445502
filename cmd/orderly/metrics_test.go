package main

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"github.com/spf13/pflag"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/client-go/rest"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"orderly.dev/orderly/internal/webhook/tlstest"
)

// fakeAuthAPIServer answers TokenReviews and SubjectAccessReviews as an API server
// would: token "reader-token" is system:serviceaccount:monitoring:prometheus, who may
// get /metrics; token "nobody-token" is a user who may not; any other token is not
// valid.
func fakeAuthAPIServer(t *testing.T) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			switch tr.Spec.Token {
			case "reader-token":
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "system:serviceaccount:monitoring:prometheus"}}
			case "nobody-token":
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "nobody"}}
			}
			_ = json.NewEncoder(w).Encode(tr)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			na := sar.Spec.NonResourceAttributes
			sar.Status.Allowed = sar.Spec.User == "system:serviceaccount:monitoring:prometheus" && na != nil && na.Path == "/metrics" && na.Verb == "get"
			_ = json.NewEncoder(w).Encode(sar)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// startMetricsServer runs the manager's metrics server with the given flags on a free
// loopback port and returns its address.
func startMetricsServer(t *testing.T, args ...string) string {
	t.Helper()
	var o managerOptions
	f := pflag.NewFlagSet("test", pflag.ContinueOnError)
	addManagerFlags(f, &o)
	if err := f.Parse(args); err != nil {
		t.Fatal(err)
	}
	if err := o.metrics.validate(); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	_ = l.Close()
	cfg := &rest.Config{Host: fakeAuthAPIServer(t).URL}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := metricsserver.NewServer(o.metrics.serverOptions(addr), cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Start(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return addr
}

func scrape(g Gomega, url, token string) (int, string) {
	req, err := http.NewRequest(http.MethodGet, url, http.NoBody)
	g.Expect(err).NotTo(HaveOccurred())
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{InsecureSkipVerify: true, MinVersion: tls.VersionTLS12}, //nolint:gosec // the server's certificate is self-signed
	}}
	resp, err := c.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(body)
}

// With --metrics-secure, metrics are served over HTTPS (HTTP/1.1 only) to a client
// whose token may get /metrics, and refused to everyone else.
func TestSecureMetrics(t *testing.T) {
	g := NewWithT(t)
	addr := startMetricsServer(t, "--metrics-secure")
	url := "https://" + addr + "/metrics"
	g.Eventually(func(g Gomega) {
		code, _ := scrape(g, url, "reader-token")
		g.Expect(code).To(Equal(http.StatusOK))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
	// A token the API server does not know is refused too: controller-runtime's
	// filter answers 500 ("Authentication failed") there rather than 401.
	for token, want := range map[string][]int{
		"":             {http.StatusUnauthorized},
		"forged-token": {http.StatusUnauthorized, http.StatusInternalServerError},
		"nobody-token": {http.StatusForbidden},
	} {
		code, body := scrape(g, url, token)
		g.Expect(code).To(BeElementOf(want), "token %q", token)
		g.Expect(body).NotTo(ContainSubstring("# HELP"), "token %q", token)
	}
	code, body := scrape(g, url, "reader-token")
	g.Expect(code).To(Equal(http.StatusOK))
	g.Expect(body).To(ContainSubstring("# HELP"))
	// Plain HTTP gets Go's "client sent an HTTP request to an HTTPS server", no metrics.
	if resp, err := http.Get("http://" + addr + "/metrics"); err == nil {
		body, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusBadRequest), "plain HTTP is served as well")
		g.Expect(string(body)).NotTo(ContainSubstring("# HELP"))
	}

	tlstest.AssertHTTP1Only(t, addr, &tls.Config{InsecureSkipVerify: true}, "/metrics") //nolint:gosec // self-signed
}

// By default metrics stay plain HTTP for anyone who reaches the address (the local
// development cluster, the e2e tests and the benchmarks scrape them so, on loopback).
func TestPlainMetricsByDefault(t *testing.T) {
	g := NewWithT(t)
	addr := startMetricsServer(t)
	g.Eventually(func(g Gomega) {
		resp, err := http.Get("http://" + addr + "/metrics")
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	}, 10*time.Second, 50*time.Millisecond).Should(Succeed())
}

func TestMetricsCertDirNeedsSecure(t *testing.T) {
	err := metricsOptions{certDir: "/certs"}.validate()
	if err == nil || !strings.Contains(err.Error(), "--metrics-cert-dir needs --metrics-secure") {
		t.Errorf("err = %v", err)
	}
	if err := (metricsOptions{certDir: "/certs", secure: true}).validate(); err != nil {
		t.Errorf("err = %v", err)
	}
}
