package tests3

import (
	"os"
	"path/filepath"

	"orderly.dev/orderly/internal/testing/testtls"
)

// serverCert makes a CA of the test's own and a certificate it signs for
// 127.0.0.1 and localhost, writes the certificate and key into dir, and returns
// their paths and the CA's PEM certificate (what a client must trust).
func serverCert(dir string) (certFile, keyFile string, caPEM []byte, err error) {
	s, err := testtls.NewServer("orderly tests3 CA")
	if err != nil {
		return "", "", nil, err
	}
	certFile, keyFile = filepath.Join(dir, "server.crt"), filepath.Join(dir, "server.key")
	if err := os.WriteFile(certFile, s.Cert, 0o600); err != nil {
		return "", "", nil, err
	}
	if err := os.WriteFile(keyFile, s.Key, 0o600); err != nil {
		return "", "", nil, err
	}
	return certFile, keyFile, s.CA, nil
}
