// Package tlstest checks, in tests, how Orderly's TLS servers (the webhook server and
// the secure metrics server) negotiate protocols.
package tlstest

import (
	"crypto/tls"
	"net/http"
	"testing"
	"time"

	"github.com/onsi/gomega"
)

// AssertHTTP1Only checks that the TLS server at addr speaks HTTP/1.1 only: a client
// that offers only h2 is refused at the handshake, and one that offers h2 and
// HTTP/1.1 is answered over HTTP/1.1 at path. base verifies the server's certificate
// (RootCAs and ServerName, or InsecureSkipVerify for a self-signed one). It waits up
// to 10 seconds for the server to listen.
func AssertHTTP1Only(t *testing.T, addr string, base *tls.Config, path string) {
	t.Helper()
	g := gomega.NewWithT(t)
	with := func(protos ...string) *tls.Config {
		c := base.Clone()
		c.NextProtos = protos
		c.MinVersion = tls.VersionTLS12
		return c
	}
	g.Eventually(func() error {
		c, err := tls.Dial("tcp", addr, with("http/1.1"))
		if err == nil {
			_ = c.Close()
		}
		return err
	}, 10*time.Second, 50*time.Millisecond).Should(gomega.Succeed(), "the server at %s never answered", addr)

	_, err := tls.Dial("tcp", addr, with("h2"))
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("no application protocol")), "a client that offers only h2 was not refused")

	// get returns the protocol of the answer to a GET by a client that offers h2,
	// and HTTP/1.1 too when http1.
	get := func(http1 bool) (string, error) {
		tr := &http.Transport{TLSClientConfig: with(), Protocols: new(http.Protocols)}
		tr.Protocols.SetHTTP1(http1)
		tr.Protocols.SetHTTP2(true)
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 5 * time.Second}).Get("https://" + addr + path)
		if err != nil {
			return "", err
		}
		_ = resp.Body.Close()
		return resp.Proto, nil
	}
	proto, err := get(true)
	g.Expect(err).NotTo(gomega.HaveOccurred())
	g.Expect(proto).To(gomega.Equal("HTTP/1.1"), "a client that offers h2 and HTTP/1.1")
	_, err = get(false)
	g.Expect(err).To(gomega.HaveOccurred(), "an HTTP/2-only client was answered")
}
