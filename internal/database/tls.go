package database

import (
	"crypto/x509"
	"fmt"
)

// RootCAs is the pool of the certificates a DatabaseServer's CA (s.CACert, from its
// caSecretRef) holds, which are then the only roots a connection to it trusts: nil
// when there is no CA. A CA that holds no PEM certificate is refused with
// ErrCredentials rather than dropped, so that a connection never goes ahead without
// the verification its server asked for. Every connection Orderly makes to a server
// takes its roots from here.
func RootCAs(pemCerts []byte) (*x509.CertPool, error) {
	if len(pemCerts) == 0 {
		return nil, nil
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pemCerts) {
		return nil, fmt.Errorf("%w: the CA Secret's key %s holds no PEM certificate", ErrCredentials, CAKey)
	}
	return roots, nil
}
