package images

import (
	"archive/zip"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Vuln is one OSV record for one package.
type Vuln struct {
	ID      string
	Aliases []string
	// Ecosystem as OSV writes it in affected[].package.ecosystem: "Debian:12",
	// "Alpine:v3.20", "Go".
	Ecosystem, Package string
	// Introduced is the first affected version ("" means all before Fixed); Fixed the
	// first fixed one ("" means no fix yet).
	Introduced, Fixed string
	// Severity is CRITICAL, HIGH, MODERATE or LOW (written as database_specific.severity,
	// as GitHub does), a CVSS v3 vector ("CVSS:3.1/AV:N/...", written in severity[]),
	// or "" for none.
	Severity string
}

// record renders vulns sharing an ID as one OSV record (schema 1.6).
func record(vulns []Vuln) map[string]any {
	v0 := vulns[0]
	rec := map[string]any{
		"schema_version": "1.6.0",
		"id":             v0.ID,
		"modified":       "2026-01-01T00:00:00Z",
		"published":      "2026-01-01T00:00:00Z",
		"summary":        "test vulnerability " + v0.ID,
	}
	if len(v0.Aliases) > 0 {
		rec["aliases"] = v0.Aliases
	}
	var affected []map[string]any
	for _, v := range vulns {
		introduced := v.Introduced
		if introduced == "" {
			introduced = "0"
		}
		events := []map[string]string{{"introduced": introduced}}
		if v.Fixed != "" {
			events = append(events, map[string]string{"fixed": v.Fixed})
		}
		rangeType := "ECOSYSTEM"
		if v.Ecosystem == "Go" {
			rangeType = "SEMVER"
		}
		affected = append(affected, map[string]any{
			"package": map[string]string{"ecosystem": v.Ecosystem, "name": v.Package},
			"ranges":  []map[string]any{{"type": rangeType, "events": events}},
		})
	}
	rec["affected"] = affected
	switch s := v0.Severity; {
	case strings.HasPrefix(s, "CVSS:3"):
		rec["severity"] = []map[string]string{{"type": "CVSS_V3", "score": s}}
	case s != "":
		rec["database_specific"] = map[string]string{"severity": s}
	}
	return rec
}

// WriteOSV writes the records as OSV's export does: <dir>/<Ecosystem>/all.zip with one
// <ID>.json per record, the ecosystem being the part of Vuln.Ecosystem before the
// colon. Vulns with the same ID and ecosystem become one record with several affected
// packages. Every archive is replaced whole (written aside, then renamed), and the
// archives of ecosystems not named are left alone.
func WriteOSV(dir string, vulns ...Vuln) error {
	byEco := map[string]map[string][]Vuln{}
	for _, v := range vulns {
		if v.ID == "" || v.Ecosystem == "" || v.Package == "" {
			return fmt.Errorf("OSV test record %+v needs an ID, an Ecosystem and a Package", v)
		}
		base, _, _ := strings.Cut(v.Ecosystem, ":")
		if byEco[base] == nil {
			byEco[base] = map[string][]Vuln{}
		}
		byEco[base][v.ID] = append(byEco[base][v.ID], v)
	}
	for eco, byID := range byEco {
		ids := make([]string, 0, len(byID))
		for id := range byID {
			ids = append(ids, id)
		}
		sort.Strings(ids)
		d := filepath.Join(dir, eco)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		tmp, err := os.CreateTemp(d, ".all.zip-")
		if err != nil {
			return err
		}
		zw := zip.NewWriter(tmp)
		for _, id := range ids {
			b, err := json.MarshalIndent(record(byID[id]), "", "  ")
			if err != nil {
				return err
			}
			w, err := zw.Create(id + ".json")
			if err != nil {
				return err
			}
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		if err := zw.Close(); err != nil {
			_ = tmp.Close()
			return err
		}
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), filepath.Join(d, "all.zip")); err != nil {
			return err
		}
	}
	return nil
}

// WriteEmptyOSV writes an archive without records for each ecosystem ("Debian",
// "Go"): a database that knows the ecosystem and has nothing against it.
func WriteEmptyOSV(dir string, ecosystems ...string) error {
	for _, eco := range ecosystems {
		d := filepath.Join(dir, eco)
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
		f, err := os.Create(filepath.Join(d, "all.zip"))
		if err != nil {
			return err
		}
		if err := zip.NewWriter(f).Close(); err != nil {
			_ = f.Close()
			return err
		}
		if err := f.Close(); err != nil {
			return err
		}
	}
	return nil
}
