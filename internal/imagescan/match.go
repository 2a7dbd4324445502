package imagescan

import (
	"encoding/json"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/google/osv-scalibr/extractor"
	archivemeta "github.com/google/osv-scalibr/extractor/filesystem/language/java/archive/metadata"
	apkmeta "github.com/google/osv-scalibr/extractor/filesystem/os/apk/metadata"
	dpkgmeta "github.com/google/osv-scalibr/extractor/filesystem/os/dpkg/metadata"
	rpmmeta "github.com/google/osv-scalibr/extractor/filesystem/os/rpm/metadata"
	"github.com/google/osv-scalibr/inventory/osvecosystem"
	"github.com/google/osv-scalibr/purl"
	"github.com/google/osv-scalibr/semantic"
	cvss20 "github.com/pandatix/go-cvss/20"
	cvss40 "github.com/pandatix/go-cvss/40"
)

// The matching below follows osv-scalibr's local matcher (enricher/vulnmatch/osvlocal,
// v0.5.2) rule for rule: the same package name normalisation (a Debian binary package
// is matched by its source package, an Alpine one by its origin, Go's toolchain as
// "stdlib", PyPI names normalised), the same ecosystem equality ("Debian:12" matches
// "Debian:12" and "Debian"), the same ECOSYSTEM/SEMVER range walk with scalibr's
// per-ecosystem version ordering (package semantic). It is not called directly
// because that enricher re-reads every archive on each scan and links osv-scalibr's
// network clients (gRPC, about 10 MB of binary) into the manager.

var (
	pythonNormalization = regexp.MustCompile(`[-_.]+`)
	goMajorSuffix       = regexp.MustCompile(`(v[0-9]+)`)
)

// normalized is a package as OSV names it.
type normalized struct {
	name      string
	ecosystem osvecosystem.Parsed
	version   string
}

func normalize(p *extractor.Package) normalized {
	eco := p.Ecosystem()
	n := normalized{name: p.Name, ecosystem: eco, version: p.Version}
	switch {
	case eco.Ecosystem == "Go" && p.Name == "go":
		n.name = "stdlib"
	case eco.Ecosystem == "PyPI":
		n.name = strings.ToLower(pythonNormalization.ReplaceAllLiteralString(p.Name, "-"))
	}
	switch m := p.Metadata.(type) {
	case *dpkgmeta.Metadata:
		if m.SourceName != "" {
			n.name = m.SourceName
		}
	case *apkmeta.Metadata:
		if m.OriginName != "" {
			n.name = m.OriginName
		}
	case *rpmmeta.Metadata:
		// The extractor's version is version-release; OSV's RPM ecosystems write
		// epoch:version-release where the epoch is not 0, and a missing epoch compares
		// as 0 (below any epoch 1 fix).
		if m.Epoch > 0 {
			n.version = strconv.Itoa(m.Epoch) + ":" + p.Version
		}
	case *archivemeta.Metadata:
		if m.GroupID != "" && m.ArtifactID != "" {
			n.name = m.GroupID + ":" + m.ArtifactID
		}
	}
	if eco.Ecosystem == "Go" && p.PURL() != nil && p.PURL().Subpath != "" {
		if match := goMajorSuffix.FindStringSubmatch(p.PURL().Subpath); match != nil {
			n.name = p.Name + "/" + match[1]
		}
	}
	if p.PURL() != nil && p.PURL().Type == purl.TypeBrew && p.SourceCode != nil {
		n.name = strings.ToLower(p.SourceCode.Repo)
	}
	return n
}

// compareVersions orders a and b in an ecosystem; ok is false when either does not
// parse.
func compareVersions(a, b, ecosystem string) (int, bool) {
	v, err := semantic.Parse(a, ecosystem)
	if err != nil {
		return 0, false
	}
	c, err := v.CompareStr(b)
	if err != nil {
		return 0, false
	}
	return c, true
}

func eventVersion(e osvEvent) string {
	switch {
	case e.Introduced != "":
		return e.Introduced
	case e.Fixed != "":
		return e.Fixed
	case e.Limit != "":
		return e.Limit
	}
	return e.LastAffected
}

// rangeContains reports whether version lies in the range, and the fixed version
// that ends the affected interval it lies in ("" when none is known).
func rangeContains(r osvRange, version, ecosystem string) (bool, string) {
	if (r.Type != "ECOSYSTEM" && r.Type != "SEMVER") || len(r.Events) == 0 {
		return false, ""
	}
	events := slices.Clone(r.Events)
	sort.SliceStable(events, func(i, j int) bool {
		if events[i].Introduced == "0" {
			return events[j].Introduced != "0"
		}
		if events[j].Introduced == "0" {
			return false
		}
		c, _ := compareVersions(eventVersion(events[i]), eventVersion(events[j]), ecosystem)
		return c < 0
	})
	affected := false
	for _, e := range events {
		if affected {
			switch {
			case e.Fixed != "":
				c, ok := compareVersions(version, e.Fixed, ecosystem)
				affected = !ok || c < 0
			case e.LastAffected != "":
				c, ok := compareVersions(version, e.LastAffected, ecosystem)
				affected = e.LastAffected == version || !ok || c <= 0
			}
		} else if e.Introduced != "" {
			c, ok := compareVersions(version, e.Introduced, ecosystem)
			affected = e.Introduced == "0" || !ok || c >= 0
		}
	}
	if !affected {
		return false, ""
	}
	// The fix for this interval is the first fixed event above the version.
	for _, e := range events {
		if e.Fixed == "" {
			continue
		}
		if c, ok := compareVersions(version, e.Fixed, ecosystem); ok && c < 0 {
			return true, e.Fixed
		}
	}
	return true, ""
}

// affects reports whether the record affects the package, with the fixed version.
func affects(r *osvRecord, p normalized) (bool, *osvAffected, string) {
	if r.Withdrawn != "" {
		return false, nil, ""
	}
	for i := range r.Affected {
		a := &r.Affected[i]
		if a.Package.Name != p.name {
			continue
		}
		ae, err := osvecosystem.Parse(a.Package.Ecosystem)
		if err != nil || !ae.Equal(p.ecosystem) {
			continue
		}
		if len(a.Ranges) == 0 && len(a.Versions) == 0 {
			continue
		}
		if slices.Contains(a.Versions, p.version) {
			return true, a, fixedOf(a, p)
		}
		for _, rg := range a.Ranges {
			if rg.Type != "ECOSYSTEM" && rg.Type != "SEMVER" {
				break
			}
			if ok, fixed := rangeContains(rg, p.version, string(p.ecosystem.Ecosystem)); ok {
				return true, a, fixed
			}
		}
		// A package without a version is assumed affected: a false positive beats a
		// false negative.
		if p.version == "" {
			return true, a, ""
		}
	}
	return false, nil, ""
}

func fixedOf(a *osvAffected, p normalized) string {
	for _, rg := range a.Ranges {
		if ok, fixed := rangeContains(rg, p.version, string(p.ecosystem.Ecosystem)); ok {
			return fixed
		}
	}
	return ""
}

// recordSeverity applies the package's severity rule (see the package doc) to a
// record matched through one of its affected entries.
func recordSeverity(r *osvRecord, a *osvAffected) Severity {
	for _, raw := range []json.RawMessage{a.EcosystemSpecific, a.DatabaseSpecific, r.DatabaseSpecific} {
		if s, ok := severityField(raw); ok {
			return s
		}
	}
	for _, list := range [][]osvSeverity{a.Severity, r.Severity} {
		if sev := severityOfList(list); sev != SeverityUnknown {
			return sev
		}
	}
	return SeverityUnknown
}

// severityOfList is the higher of the highest rating among the CVSS vectors of the
// newest version in list (v4, then v3.x, then v2: a feed that scored a record again
// with a newer version means that score) and the highest Ubuntu priority. Vectors
// that do not parse are skipped.
func severityOfList(list []osvSeverity) Severity {
	best := map[string]Severity{}
	for _, s := range list {
		var sev Severity
		switch s.Type {
		case "CVSS_V4":
			v, err := cvss40.ParseVector(s.Score)
			if err != nil {
				continue
			}
			sev = severityFromScore(v.Score())
		case "CVSS_V3":
			score, err := cvss3BaseScore(s.Score)
			if err != nil {
				continue
			}
			sev = severityFromScore(score)
		case "CVSS_V2":
			v, err := cvss20.ParseVector(s.Score)
			if err != nil {
				continue
			}
			sev = severityFromV2Score(v.BaseScore())
		case "Ubuntu":
			var err error
			if sev, err = ParseSeverity(s.Score); err != nil {
				continue
			}
		default:
			continue
		}
		if sev.Rank() > best[s.Type].Rank() {
			best[s.Type] = sev
		}
	}
	sev := SeverityUnknown
	if u, ok := best["Ubuntu"]; ok {
		sev = u
	}
	for _, t := range []string{"CVSS_V4", "CVSS_V3", "CVSS_V2"} {
		if v, ok := best[t]; ok && v != SeverityUnknown {
			if v.Rank() > sev.Rank() {
				sev = v
			}
			break
		}
	}
	return sev
}

// severityField reads {"severity": "HIGH"} (GitHub, Alpine secdb, many OS feeds) or
// a numeric CVSS score under "cvss_score".
func severityField(raw json.RawMessage) (Severity, bool) {
	if len(raw) == 0 {
		return "", false
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(raw, &m) != nil {
		return "", false
	}
	if v, ok := m["severity"]; ok {
		var s string
		if json.Unmarshal(v, &s) == nil {
			if sev, err := ParseSeverity(s); err == nil && sev != SeverityUnknown {
				return sev, true
			}
		}
	}
	if v, ok := m["cvss_score"]; ok {
		var f float64
		if json.Unmarshal(v, &f) == nil && f > 0 {
			return severityFromScore(f), true
		}
		var s string
		if json.Unmarshal(v, &s) == nil {
			if f, err := strconv.ParseFloat(s, 64); err == nil && f > 0 {
				return severityFromScore(f), true
			}
		}
	}
	return "", false
}
