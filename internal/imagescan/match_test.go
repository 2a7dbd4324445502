package imagescan

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/google/osv-scalibr/extractor"
	dpkgmeta "github.com/google/osv-scalibr/extractor/filesystem/os/dpkg/metadata"
	"github.com/google/osv-scalibr/inventory/osvecosystem"
	"github.com/google/osv-scalibr/purl"
)

func TestAffects(t *testing.T) {
	const twoIntervals = `{"id":"X","affected":[{"package":{"ecosystem":"Go","name":"m"},"ranges":[{"type":"SEMVER","events":[
		{"introduced":"2.0.0"},{"fixed":"2.3.0"},{"introduced":"0"},{"fixed":"1.2.0"}]}]}]}`
	const lastAffected = `{"id":"X","affected":[{"package":{"ecosystem":"Debian:12","name":"p"},"ranges":[{"type":"ECOSYSTEM","events":[
		{"introduced":"0"},{"last_affected":"1.5-1"}]}]}]}`
	const versionsOnly = `{"id":"X","affected":[{"package":{"ecosystem":"Debian","name":"p"},"versions":["1.0-1"]}]}`
	const withdrawn = `{"id":"X","withdrawn":"2026-01-01T00:00:00Z","affected":[{"package":{"ecosystem":"Debian:12","name":"p"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"}]}]}]}`
	const otherRelease = `{"id":"X","affected":[{"package":{"ecosystem":"Debian:11","name":"p"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"}]}]}]}`
	const epoch = `{"id":"X","affected":[{"package":{"ecosystem":"Debian:12","name":"p"},"ranges":[{"type":"ECOSYSTEM","events":[{"introduced":"0"},{"fixed":"1:1.0-1"}]}]}]}`
	tests := []struct {
		name, rec, eco, version string
		want                    bool
		wantFixed               string
	}{
		{"second interval", twoIntervals, "Go", "2.1.0", true, "2.3.0"},
		{"first interval", twoIntervals, "Go", "1.1.9", true, "1.2.0"},
		{"between intervals", twoIntervals, "Go", "1.5.0", false, ""},
		{"at a fix", twoIntervals, "Go", "2.3.0", false, ""},
		{"at last_affected", lastAffected, "Debian:12", "1.5-1", true, ""},
		{"after last_affected", lastAffected, "Debian:12", "1.5-2", false, ""},
		{"listed version", versionsOnly, "Debian:12", "1.0-1", true, ""},
		{"unlisted version", versionsOnly, "Debian:12", "1.0-2", false, ""},
		{"withdrawn", withdrawn, "Debian:12", "1", false, ""},
		{"other release", otherRelease, "Debian:12", "1", false, ""},
		{"epoch orders above any version without one", epoch, "Debian:12", "9.9-9", true, "1:1.0-1"},
		{"no version: assumed affected", otherRelease, "Debian:11", "", true, ""},
	}
	for _, tt := range tests {
		var r osvRecord
		if err := json.Unmarshal([]byte(tt.rec), &r); err != nil {
			t.Fatal(err)
		}
		pkgName := "p"
		if tt.eco == "Go" {
			pkgName = "m"
		}
		got, _, fixed := affects(&r, normalized{name: pkgName, ecosystem: osvecosystem.MustParse(tt.eco), version: tt.version})
		if got != tt.want || fixed != tt.wantFixed {
			t.Errorf("%s: affected %v fixed %q, want %v %q", tt.name, got, fixed, tt.want, tt.wantFixed)
		}
	}
}

func TestNormalize(t *testing.T) {
	debBinary := &extractor.Package{Name: "libssl3", Version: "3.0.11-1", PURLType: purl.TypeDebian,
		Metadata: &dpkgmeta.Metadata{PackageName: "libssl3", SourceName: "openssl", OSID: "debian", OSVersionID: "12"}}
	if n := normalize(debBinary); n.name != "openssl" || n.ecosystem.String() != "Debian:12" {
		t.Errorf("a Debian binary package is looked up as %+v, want its source openssl in Debian:12", n)
	}
	if n := normalize(&extractor.Package{Name: "go", Version: "1.22.1", PURLType: purl.TypeGolang}); n.name != "stdlib" {
		t.Errorf("the Go toolchain is looked up as %q, want stdlib", n.name)
	}
	if n := normalize(&extractor.Package{Name: "Foo_Bar.baz", Version: "1", PURLType: purl.TypePyPi}); n.name != "foo-bar-baz" {
		t.Errorf("a PyPI name is looked up as %q, want foo-bar-baz", n.name)
	}
}

func TestMergeAliases(t *testing.T) {
	got := mergeAliases([]Finding{
		{ID: "GO-2022-1059", Aliases: []string{"CVE-2022-32149", "GHSA-69ch-w2m2-3vjp"}, Package: "golang.org/x/text", Ecosystem: "Go", Installed: "0.3.7", Fixed: "0.3.8", Severity: SeverityUnknown},
		{ID: "GHSA-69ch-w2m2-3vjp", Aliases: []string{"CVE-2022-32149"}, Package: "golang.org/x/text", Ecosystem: "Go", Installed: "0.3.7", Fixed: "0.3.8", Severity: SeverityHigh},
		{ID: "GO-2099-0001", Package: "golang.org/x/text", Ecosystem: "Go", Installed: "0.3.7", Severity: SeverityLow},
		{ID: "GHSA-69ch-w2m2-3vjp", Package: "golang.org/x/net", Ecosystem: "Go", Installed: "0.1.0", Severity: SeverityHigh},
	})
	want := []Finding{
		{ID: "GHSA-69ch-w2m2-3vjp", Aliases: []string{"CVE-2022-32149", "GO-2022-1059"}, Package: "golang.org/x/text", Ecosystem: "Go", Installed: "0.3.7", Fixed: "0.3.8", Severity: SeverityHigh},
		{ID: "GO-2099-0001", Package: "golang.org/x/text", Ecosystem: "Go", Installed: "0.3.7", Severity: SeverityLow},
		{ID: "GHSA-69ch-w2m2-3vjp", Package: "golang.org/x/net", Ecosystem: "Go", Installed: "0.1.0", Severity: SeverityHigh},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("merged:\n got %+v\nwant %+v", got, want)
	}
}
