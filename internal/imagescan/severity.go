package imagescan

import (
	"fmt"
	"math"
	"strings"
)

// Severity is the severity of a finding, on the scale most OSV feeds and CVSS share.
type Severity string

// The severities, worst first.
const (
	SeverityCritical Severity = "Critical"
	SeverityHigh     Severity = "High"
	SeverityMedium   Severity = "Medium"
	SeverityLow      Severity = "Low"
	SeverityUnknown  Severity = "Unknown"
)

// Severities lists every severity, worst first.
var Severities = []Severity{SeverityCritical, SeverityHigh, SeverityMedium, SeverityLow, SeverityUnknown}

// ParseSeverity reads a severity written by a person or a feed: the names above in any
// case, and the feeds' synonyms MODERATE (GitHub) for Medium and NEGLIGIBLE
// (Ubuntu, Debian) for Low.
func ParseSeverity(s string) (Severity, error) {
	switch strings.ToUpper(strings.TrimSpace(s)) {
	case "CRITICAL":
		return SeverityCritical, nil
	case "HIGH", "IMPORTANT":
		return SeverityHigh, nil
	case "MEDIUM", "MODERATE":
		return SeverityMedium, nil
	case "LOW", "NEGLIGIBLE", "UNIMPORTANT":
		return SeverityLow, nil
	case "UNKNOWN":
		return SeverityUnknown, nil
	}
	return "", fmt.Errorf("unknown severity %q: use one of Critical, High, Medium, Low, Unknown", s)
}

// Rank orders severities: Critical 4, High 3, Medium 2, Low 1, Unknown (and anything
// else) 0. A policy's "maxSeverity: High" blocks what ranks above High.
func (s Severity) Rank() int {
	switch s {
	case SeverityCritical:
		return 4
	case SeverityHigh:
		return 3
	case SeverityMedium:
		return 2
	case SeverityLow:
		return 1
	}
	return 0
}

// severityFromScore maps a CVSS base score to the qualitative rating of the CVSS
// specification: 9.0+ Critical, 7.0+ High, 4.0+ Medium, above 0 Low.
func severityFromScore(score float64) Severity {
	switch {
	case score >= 9.0:
		return SeverityCritical
	case score >= 7.0:
		return SeverityHigh
	case score >= 4.0:
		return SeverityMedium
	case score > 0:
		return SeverityLow
	}
	return SeverityUnknown
}

// severityFromV2Score maps a CVSS v2 base score to the rating NVD gives v2 scores
// (v2 has no Critical): 7.0+ High, 4.0+ Medium, above 0 Low.
func severityFromV2Score(score float64) Severity {
	if score >= 9.0 {
		return SeverityHigh
	}
	return severityFromScore(score)
}

// cvss3BaseScore computes the base score of a CVSS v3.0 or v3.1 vector
// ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H") with the formulas of the
// CVSS v3.1 specification, section 7. Temporal and environmental metrics are ignored.
func cvss3BaseScore(vector string) (float64, error) {
	parts := strings.Split(strings.TrimSpace(vector), "/")
	if len(parts) == 0 || (parts[0] != "CVSS:3.0" && parts[0] != "CVSS:3.1") {
		return 0, fmt.Errorf("not a CVSS v3 vector: %q", vector)
	}
	m := map[string]string{}
	for _, p := range parts[1:] {
		k, v, ok := strings.Cut(p, ":")
		if !ok {
			return 0, fmt.Errorf("malformed CVSS v3 metric %q in %q", p, vector)
		}
		m[k] = v
	}
	weights := map[string]map[string]float64{
		"AV": {"N": 0.85, "A": 0.62, "L": 0.55, "P": 0.2},
		"AC": {"L": 0.77, "H": 0.44},
		"UI": {"N": 0.85, "R": 0.62},
		"C":  {"H": 0.56, "L": 0.22, "N": 0},
		"I":  {"H": 0.56, "L": 0.22, "N": 0},
		"A":  {"H": 0.56, "L": 0.22, "N": 0},
	}
	w := map[string]float64{}
	for k, table := range weights {
		v, ok := table[m[k]]
		if !ok {
			return 0, fmt.Errorf("CVSS v3 vector %q lacks a valid %s metric", vector, k)
		}
		w[k] = v
	}
	changed := false
	switch m["S"] {
	case "U":
	case "C":
		changed = true
	default:
		return 0, fmt.Errorf("CVSS v3 vector %q lacks a valid S metric", vector)
	}
	var pr float64
	switch m["PR"] {
	case "N":
		pr = 0.85
	case "L":
		pr = 0.62
		if changed {
			pr = 0.68
		}
	case "H":
		pr = 0.27
		if changed {
			pr = 0.5
		}
	default:
		return 0, fmt.Errorf("CVSS v3 vector %q lacks a valid PR metric", vector)
	}
	iss := 1 - (1-w["C"])*(1-w["I"])*(1-w["A"])
	var impact float64
	if changed {
		impact = 7.52*(iss-0.029) - 3.25*math.Pow(iss-0.02, 15)
	} else {
		impact = 6.42 * iss
	}
	exploitability := 8.22 * w["AV"] * w["AC"] * pr * w["UI"]
	if impact <= 0 {
		return 0, nil
	}
	if changed {
		return roundUp(math.Min(1.08*(impact+exploitability), 10)), nil
	}
	return roundUp(math.Min(impact+exploitability, 10)), nil
}

// roundUp is the CVSS v3.1 Roundup: the smallest number with one decimal that is
// equal to or higher than its input, computed on integers to avoid float error.
func roundUp(x float64) float64 {
	i := int64(math.Round(x * 100000))
	if i%10000 == 0 {
		return float64(i) / 100000
	}
	return float64(i/10000+1) / 10
}
