package testtls

import (
	"crypto/tls"
	"crypto/x509"
	"testing"
)

func TestServerCertificateIsTrustedOnlyThroughItsCA(t *testing.T) {
	s, err := NewServer("test CA")
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(s.Cert, s.Key)
	if err != nil {
		t.Fatalf("certificate and key do not match: %v", err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	verify := func(caPEM []byte, host string) error {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(caPEM) {
			t.Fatal("CA PEM does not parse")
		}
		_, err := leaf.Verify(x509.VerifyOptions{Roots: pool, DNSName: host})
		return err
	}
	for _, host := range []string{"127.0.0.1", "localhost"} {
		if err := verify(s.CA, host); err != nil {
			t.Errorf("%s through its own CA: %v", host, err)
		}
	}
	if err := verify(s.CA, "example.com"); err == nil {
		t.Error("a certificate for 127.0.0.1 and localhost verified for example.com")
	}
	other, err := OtherCA()
	if err != nil {
		t.Fatal(err)
	}
	if err := verify(other, "127.0.0.1"); err == nil {
		t.Error("the certificate verified through a CA that did not sign it")
	}
}
