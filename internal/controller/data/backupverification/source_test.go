package backupverification

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestNewest(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	objs := []Backup{
		{Key: "n/orders-20260103T000000Z.dump.gz", LastModified: t0},
		{Key: "n/orders-20260103T000000Z.dump.gz.sha256", LastModified: t0.Add(3 * time.Hour)},
		{Key: "n/orders-20260102T000000Z.dump.gz", LastModified: t0.Add(2 * time.Hour)}, // copied later, older by name
		{Key: "n/README", LastModified: t0.Add(time.Hour)},
		{Key: "n/", LastModified: t0.Add(5 * time.Hour)},
	}
	tests := []struct {
		name    string
		pattern string
		objs    []Backup
		wantKey string
		wantOK  bool
	}{
		{"newest by modification, .sha256 and folders skipped", "", objs, "n/orders-20260102T000000Z.dump.gz", true},
		{"newest by the ts group", `orders-(?P<ts>\d{8}T\d{6}Z)\.dump\.gz$`, objs, "n/orders-20260103T000000Z.dump.gz", true},
		{"pattern without ts: newest match by modification", `\.dump\.gz$`, objs, "n/orders-20260102T000000Z.dump.gz", true},
		{"nothing matches", `\.sql$`, objs, "", false},
		{"empty", "", nil, "", false},
		{"ties go to the greater key", "", []Backup{{Key: "a", LastModified: t0}, {Key: "b", LastModified: t0}}, "b", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var re *regexp.Regexp
			if tt.pattern != "" {
				re = regexp.MustCompile(tt.pattern)
			}
			got, ok := newest(tt.objs, re)
			if ok != tt.wantOK || got.Key != tt.wantKey {
				t.Errorf("newest = %q, %v; want %q, %v", got.Key, ok, tt.wantKey, tt.wantOK)
			}
		})
	}
}

func TestParseChecksum(t *testing.T) {
	sum := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
	tests := []struct {
		in      string
		want    string
		wantErr bool
	}{
		{sum + "  orders.dump.gz\n", sum, false},
		{sum + "\n", sum, false},
		{"9F86D081884C7D659A2FEAA0C55AD015A3BF4F1B2B0B822CD15D6C15B0F00A08 *x", sum, false},
		{"", "", true},
		{"abc  x", "", true},
		{sum[:62] + "zz  x", "", true},
	}
	for _, tt := range tests {
		got, err := parseChecksum([]byte(tt.in))
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("parseChecksum(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestCompilePatternRefusesBadRegexp(t *testing.T) {
	if _, err := compilePattern(`(`); err == nil {
		t.Fatal("want an error")
	}
}

// A certificate the client refuses is CertificateNotTrusted, naming the CA Secret it
// was checked against; other connection errors stay SourceUnreachable.
func TestClassifyUntrustedCertificate(t *testing.T) {
	refused := &url.Error{Op: "Get", URL: "https://127.0.0.1:9000/backups", Err: &tls.CertificateVerificationError{Err: x509.UnknownAuthorityError{}}}
	tests := []struct {
		name       string
		src        s3Source
		err        error
		wantReason string
		wantInMsg  string
	}{
		{"unknown authority, CA given", s3Source{bucket: "b", caSecret: "store-ca"}, fmt.Errorf("operation error S3: ListObjectsV2: %w", refused), ReasonCertificateNotTrusted, "the CA in Secret store-ca"},
		{"unknown authority, system roots", s3Source{bucket: "b"}, refused, ReasonCertificateNotTrusted, "set spec.source.s3.caSecretRef"},
		{"wrong host name", s3Source{bucket: "b", caSecret: "ca"}, &url.Error{Op: "Get", URL: "https://x", Err: x509.HostnameError{Certificate: &x509.Certificate{}, Host: "s3.example.com"}}, ReasonCertificateNotTrusted, "s3.example.com"},
		{"connection refused", s3Source{bucket: "b"}, &url.Error{Op: "Get", URL: "https://x", Err: errors.New("connect: connection refused")}, ReasonSourceUnreachable, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var se *sourceError
			if !errors.As(tt.src.classify(tt.err, "listing"), &se) || se.reason != tt.wantReason || !strings.Contains(se.msg, tt.wantInMsg) {
				t.Errorf("classify: %+v; want reason %s and %q in the message", se, tt.wantReason, tt.wantInMsg)
			}
		})
	}
}
