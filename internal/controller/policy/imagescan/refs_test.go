package imagescan

import (
	"strings"
	"testing"
)

// A digest of another algorithm than sha256 parsed, and made an ImageScan name with
// a ':' in it, which the API server refuses (found by FuzzParseRef).
func TestParseRefRefusesOtherDigests(t *testing.T) {
	_, err := ParseRef("registry.example.com/app@sha512:" + strings.Repeat("b", 128))
	if err == nil || !strings.Contains(err.Error(), "only sha256 digests are supported") {
		t.Fatalf("ParseRef of a sha512 digest: %v", err)
	}
	r, err := ParseRef("registry.example.com/app@sha256:" + strings.Repeat("a", 64))
	if err != nil || ScanName(r.Repository, r.Digest) != "sha256-"+strings.Repeat("a", 40)+"-"+shortHash(r.Repository, 8) {
		t.Fatalf("ParseRef of a sha256 digest: %+v, %v", r, err)
	}
}
