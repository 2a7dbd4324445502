package testmysql

import (
	"os"
	"path/filepath"
	"syscall"

	"orderly.dev/orderly/internal/testing/testtls"
)

// WithTLS serves TLS with a certificate for 127.0.0.1 and localhost signed by a CA
// of the server's own (Server.CACert), and refuses connections over TCP without it
// (require_secure_transport).
func WithTLS() Option { return func(o *options) { o.tls = true } }

// serveTLS writes a CA and a server certificate it signs into dir, readable by the
// server's user, and returns the server's options and the CA's certificate.
func serveTLS(dir string, cred *syscall.Credential) (args []string, caPEM []byte, err error) {
	s, err := testtls.NewServer("orderly test MariaDB CA")
	if err != nil {
		return nil, nil, err
	}
	for name, data := range map[string][]byte{"ca.crt": s.CA, "server.crt": s.Cert, "server.key": s.Key} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, data, 0o600); err != nil {
			return nil, nil, err
		}
		if cred != nil {
			if err := os.Chown(p, int(cred.Uid), int(cred.Gid)); err != nil {
				return nil, nil, err
			}
		}
	}
	return []string{"--ssl-ca=" + filepath.Join(dir, "ca.crt"), "--ssl-cert=" + filepath.Join(dir, "server.crt"),
		"--ssl-key=" + filepath.Join(dir, "server.key"), "--require-secure-transport=ON"}, s.CA, nil
}
