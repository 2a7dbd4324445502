package testpg

import (
	"orderly.dev/orderly/internal/localpg"
	"orderly.dev/orderly/internal/testing/testtls"
)

// serveTLS writes a CA's server certificate (for 127.0.0.1 and localhost) into the
// cluster's directory, and returns the settings that serve it and the CA's
// certificate.
func serveTLS(c *localpg.Cluster) (settings []string, caPEM []byte, err error) {
	s, err := testtls.NewServer("orderly test CA")
	if err != nil {
		return nil, nil, err
	}
	certFile, err := c.WriteFile("server.crt", s.Cert)
	if err != nil {
		return nil, nil, err
	}
	keyFile, err := c.WriteFile("server.key", s.Key)
	if err != nil {
		return nil, nil, err
	}
	return []string{"ssl=on", "ssl_cert_file=" + certFile, "ssl_key_file=" + keyFile}, s.CA, nil
}

// OtherCA returns the PEM certificate of a new CA that signed nothing: a CA that
// does not vouch for any test server.
func OtherCA() ([]byte, error) { return testtls.OtherCA() }
