package certs

import (
	"bytes"
	"context"
	"crypto/x509"
	"net"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clocktesting "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"orderly.dev/orderly/internal/scheme"
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
	if m.leafDue(b) {
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
			if got := m.leafDue(b); got != tc.want {
				t.Errorf("leafDue = %v, want %v", got, tc.want)
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

// A replica picks up a CA that another replica re-issued (here after the Secret was
// deleted) within minutes, not the hour it used to wait: until it does, it serves a
// certificate that the configurations' new caBundle no longer trusts.
func TestReplicaPicksUpAReissuedCAWithinMinutes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	clk := clocktesting.NewFakeClock(time.Now())
	newReplica := func() *Manager {
		return &Manager{Client: c, Reader: c, Namespace: "orderly-system", Name: "orderly-webhook-tls", DNSNames: []string{"a.svc"}, Clock: clk}
	}
	first, replica := newReplica(), newReplica()
	if err := first.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if err := replica.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	old, _ := replica.CABundle()
	done := make(chan error, 1)
	go func() { done <- replica.Start(ctx) }()
	g := NewWithT(t)
	g.Eventually(clk.HasWaiters, 10*time.Second, 10*time.Millisecond).Should(BeTrue(), "the replica's ticker")

	// The CA is re-issued: the Secret is deleted and another replica writes a new one.
	if err := c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "orderly-system", Name: "orderly-webhook-tls"}}); err != nil {
		t.Fatal(err)
	}
	if err := first.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	reissued, _ := first.CABundle()
	if bytes.Equal(reissued, old) {
		t.Fatal("the CA was not re-issued")
	}

	clk.Step(2 * time.Minute)
	g.Eventually(func() string {
		got, _ := replica.CABundle()
		return string(got)
	}, 10*time.Second, 10*time.Millisecond).Should(Equal(string(reissued)), "the replica still serves the old CA's certificate")
	cert, err := replica.GetCertificate(nil)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cert.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := leaf.CheckSignatureFrom(mustParse(t, reissued)); err != nil {
		t.Errorf("the replica serves a certificate the re-issued CA did not sign: %v", err)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Start: %v", err)
	}
}

// A CA in its last year is replaced in two steps: first staged beside the current one
// in the caBundle (the serving certificate unchanged), then, CAStageFor later, used to
// sign; the replaced CA stays in the caBundle until it expires. At no step does a
// replica serve a certificate that the caBundle published one step earlier does not
// trust.
func TestCARotationIsStagedThroughTheCABundle(t *testing.T) {
	ctx := context.Background()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	clk := clocktesting.NewFakePassiveClock(start)
	m := &Manager{Client: c, Reader: c, Namespace: "orderly-system", Name: "orderly-webhook-tls", DNSNames: []string{"a.svc"}, Clock: clk}
	ensure := func() {
		t.Helper()
		if err := m.Ensure(ctx); err != nil {
			t.Fatal(err)
		}
	}
	served := func() *x509.Certificate {
		t.Helper()
		pair, err := m.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		leaf, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			t.Fatal(err)
		}
		return leaf
	}
	trusts := func(bundle []byte, leaf *x509.Certificate) bool {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(bundle) {
			t.Fatal("caBundle does not parse")
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: "a.svc", CurrentTime: clk.Now(), KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		return err == nil
	}
	countCAs := func(bundle []byte) int { return bytes.Count(bundle, []byte("BEGIN CERTIFICATE")) }

	ensure()
	firstBundle, _ := m.CABundle()
	firstLeaf := served()
	if countCAs(firstBundle) != 1 {
		t.Fatalf("a fresh Secret publishes %d CAs, want 1", countCAs(firstBundle))
	}

	// Nine years and a month on, the CA is in its last year: a next CA is staged.
	clk.SetTime(start.Add(9*365*24*time.Hour + 30*24*time.Hour))
	ensure()
	staged, _ := m.CABundle()
	if countCAs(staged) != 2 {
		t.Fatalf("after staging the caBundle holds %d CAs, want the current and the next", countCAs(staged))
	}
	if !bytes.HasPrefix(staged, firstBundle) {
		t.Error("staging dropped the current CA from the caBundle")
	}
	// The serving certificate is renewed yearly; here it is due too, and must still
	// come from the current CA, which is all the configurations trusted a step ago.
	stagedLeaf := served()
	if stagedLeaf.Equal(firstLeaf) {
		t.Error("the serving certificate, due for renewal, was not renewed")
	}
	if !trusts(firstBundle, stagedLeaf) {
		t.Error("while the next CA is only staged, the serving certificate must come from the current CA")
	}

	// Before CAStageFor has passed nothing changes.
	clk.SetTime(clk.Now().Add(CAStageFor / 2))
	ensure()
	if !served().Equal(stagedLeaf) {
		t.Error("the staged CA was used before CAStageFor")
	}

	// After CAStageFor the staged CA signs; the old CA stays published.
	clk.SetTime(clk.Now().Add(CAStageFor))
	ensure()
	promotedLeaf := served()
	if promotedLeaf.Equal(stagedLeaf) {
		t.Fatal("the staged CA was not promoted after CAStageFor")
	}
	if trusts(firstBundle, promotedLeaf) {
		t.Error("the promoted serving certificate still comes from the old CA")
	}
	if !trusts(staged, promotedLeaf) {
		t.Error("the promoted serving certificate is not trusted by the caBundle published while staging")
	}
	promoted, _ := m.CABundle()
	if !trusts(promoted, stagedLeaf) {
		t.Error("after promotion the caBundle no longer trusts the old CA's certificate, which other replicas serve until their next check")
	}

	// A replica that starts now reads the same state from the Secret.
	other := &Manager{Client: c, Reader: c, Namespace: m.Namespace, Name: m.Name, DNSNames: m.DNSNames, Clock: clk}
	if err := other.Ensure(ctx); err != nil {
		t.Fatal(err)
	}
	if got, _ := other.CABundle(); !bytes.Equal(got, promoted) {
		t.Error("another replica publishes a different caBundle from the same Secret")
	}

	// Once the old CA expires it leaves the caBundle.
	clk.SetTime(start.Add(10*365*24*time.Hour + 24*time.Hour))
	ensure()
	if got, _ := m.CABundle(); countCAs(got) != 1 || !trusts(got, served()) {
		t.Errorf("after the old CA expired the caBundle holds %d CAs, want only the one that signs", countCAs(got))
	}
}

func mustParse(t *testing.T, pemBytes []byte) *x509.Certificate {
	t.Helper()
	c, err := parseCert(pemBytes)
	if err != nil {
		t.Fatal(err)
	}
	return c
}
