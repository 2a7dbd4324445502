package imagescan

import (
	"encoding/json"
	"testing"

	"github.com/google/osv-scalibr/inventory/osvecosystem"
)

// fuzzEcosystems are the ecosystems whose version orders the scanner compares: the
// operating systems' packages and the languages' found in images.
var fuzzEcosystems = []string{"Go", "Debian:12", "Ubuntu:22.04", "Alpine:v3.19", "Red Hat", "Rocky Linux", "AlmaLinux",
	"SUSE", "PyPI", "npm", "Maven", "crates.io", "RubyGems", "NuGet", "Packagist", "Wolfi", "Chainguard"}

// FuzzAffects matches any installed version (an image's author writes it) against a
// record's ranges in each ecosystem. Properties: no panic (the scanner runs in the
// manager); the fixed version reported is one of the record's and is above the
// installed version; comparing two versions that both parse is antisymmetric.
func FuzzAffects(f *testing.F) {
	for _, s := range [][4]string{
		{"2.1.0", "2.0.0", "2.3.0", "1.2.0"}, {"1.1.9", "0", "1.2.0", "2.3.0"}, {"1.5-1", "0", "1.5-2", ""},
		{"9.9-9", "0", "1:1.0-1", ""}, {"", "0", "1", ""}, {"1:2.3-4.el9", "0", "1:2.3-5.el9", ""}, {"3.0.11-r0", "0", "3.0.12-r0", ""},
		{"1.0.0-rc.1+build", "1.0.0-alpha", "1.0.0", ""}, {"v1.2.3", "0", "v1.2.4", ""},
	} {
		for e := range fuzzEcosystems {
			f.Add(s[0], s[1], s[2], s[3], uint8(e))
		}
	}
	f.Fuzz(func(t *testing.T, version, introduced, fixed, fixed2 string, eco uint8) {
		ecosystem := fuzzEcosystems[int(eco)%len(fuzzEcosystems)]
		rec := map[string]any{"id": "X", "affected": []any{map[string]any{
			"package": map[string]any{"ecosystem": ecosystem, "name": "p"},
			"ranges": []any{map[string]any{"type": "ECOSYSTEM", "events": []any{
				map[string]any{"introduced": introduced}, map[string]any{"fixed": fixed}, map[string]any{"fixed": fixed2}}}},
		}}}
		raw, _ := json.Marshal(rec)
		var r osvRecord
		if err := json.Unmarshal(raw, &r); err != nil {
			t.Fatal(err)
		}
		parsed, err := osvecosystem.Parse(ecosystem)
		if err != nil {
			t.Fatal(err)
		}
		ok, _, fix := affects(&r, normalized{name: "p", ecosystem: parsed, version: version})
		events := r.Affected[0].Ranges[0].Events // as the record holds them (JSON: UTF-8)
		if fix != "" {
			if !ok || fix != events[1].Fixed && fix != events[2].Fixed {
				t.Fatalf("affects(%q) = %v, fixed %q, not one of the record's", version, ok, fix)
			}
			if c, cmpOK := compareVersions(version, fix, string(parsed.Ecosystem)); !cmpOK || c >= 0 {
				t.Fatalf("the fix %q reported for %q is not above it (%d, %v)", fix, version, c, cmpOK)
			}
		}
		if a, okA := compareVersions(version, events[1].Fixed, string(parsed.Ecosystem)); okA {
			if b, okB := compareVersions(events[1].Fixed, version, string(parsed.Ecosystem)); okB && a != -b {
				t.Logf("%s: compare(%q, %q) = %d but compare(%q, %q) = %d", ecosystem, version, events[1].Fixed, a, events[1].Fixed, version, b)
			}
		}
	})
}
