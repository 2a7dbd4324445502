package database

import (
	"encoding/pem"
	"errors"
	"strings"
	"testing"

	"orderly.dev/orderly/internal/testing/testtls"
)

// A CA that holds no certificate is refused with a message that says where to look,
// never dropped (which would let the connection go ahead unverified).
func TestRootCAs(t *testing.T) {
	ca, err := testtls.OtherCA()
	if err != nil {
		t.Fatal(err)
	}
	junk := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: []byte("not DER")})
	for _, tc := range []struct {
		name      string
		pem       []byte
		wantRoots bool
		wantErr   bool
	}{
		{name: "no CA", pem: nil},
		{name: "a CA", pem: ca, wantRoots: true},
		{name: "not PEM", pem: []byte("not a certificate"), wantErr: true},
		{name: "a PEM block that is no certificate", pem: junk, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			roots, err := RootCAs(tc.pem)
			if (roots != nil) != tc.wantRoots {
				t.Errorf("roots = %v, want some: %v", roots, tc.wantRoots)
			}
			if !tc.wantErr {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, ErrCredentials) || !strings.Contains(err.Error(), "key ca.crt holds no PEM certificate") {
				t.Errorf("err = %v, want ErrCredentials saying the key holds no PEM certificate", err)
			}
		})
	}
}
