package certs

import (
	"crypto/x509"
	"net"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestIssueVerifiesForTheServedNames(t *testing.T) {
	m := &Manager{DNSNames: []string{"orderly-webhook.orderly-system.svc"}, IPs: []net.IP{net.ParseIP("127.0.0.1")}}
	b, err := m.issue(nil)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b.caPEM) {
		t.Fatal("CA PEM does not parse")
	}
	for _, name := range []string{"orderly-webhook.orderly-system.svc", "127.0.0.1"} {
		if _, err := b.leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
			t.Errorf("serving certificate does not verify for %s: %v", name, err)
		}
	}
	if _, err := b.leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "evil.example"}); err == nil {
		t.Error("serving certificate verifies for a name it must not serve")
	}
	if m.due(b) {
		t.Error("a fresh certificate is due")
	}
	// The Secret's content round-trips.
	if _, err := decode(b.data()); err != nil {
		t.Errorf("decode(data()) = %v", err)
	}
}

func TestDue(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	m := &Manager{DNSNames: []string{"a.svc"}, Clock: clk}
	b, err := m.issue(nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		at    time.Time
		names []string
		want  bool
	}{
		{"fresh", start.Add(24 * time.Hour), []string{"a.svc"}, false},
		{"ten months on", start.Add(300 * 24 * time.Hour), []string{"a.svc"}, false},
		{"within 30 days of expiry", start.Add(340 * 24 * time.Hour), []string{"a.svc"}, true},
		{"a new name to serve", start, []string{"a.svc", "b.svc"}, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			clk.SetTime(tc.at)
			m.DNSNames = tc.names
			if got := m.due(b); got != tc.want {
				t.Errorf("due = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestRenewalKeepsTheCA(t *testing.T) {
	m := &Manager{DNSNames: []string{"a.svc"}}
	first, err := m.issue(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.DNSNames = []string{"a.svc", "b.svc"}
	second, err := m.issue(first)
	if err != nil {
		t.Fatal(err)
	}
	if string(second.caPEM) != string(first.caPEM) {
		t.Error("renewing the serving certificate replaced the CA, which invalidates every caBundle")
	}
	if err := second.leaf.CheckSignatureFrom(first.ca); err != nil {
		t.Errorf("renewed certificate is not signed by the kept CA: %v", err)
	}
	if second.leaf.SerialNumber.Cmp(first.leaf.SerialNumber) == 0 {
		t.Error("renewal reissued the same serial")
	}
}
