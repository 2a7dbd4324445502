package imagescan

import (
	"fmt"
	"strings"

	cvss30 "github.com/pandatix/go-cvss/30"
	cvss31 "github.com/pandatix/go-cvss/31"
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

// cvss3BaseScore is the base score of a CVSS v3.0 or v3.1 vector
// ("CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"), through go-cvss; temporal and
// environmental metrics are parsed but do not change it.
func cvss3BaseScore(vector string) (float64, error) {
	vector = strings.TrimSpace(vector)
	switch {
	case strings.HasPrefix(vector, "CVSS:3.1/"):
		v, err := cvss31.ParseVector(vector)
		if err != nil {
			return 0, fmt.Errorf("CVSS v3.1 vector %q: %w", vector, err)
		}
		return v.BaseScore(), nil
	case strings.HasPrefix(vector, "CVSS:3.0/"):
		v, err := cvss30.ParseVector(vector)
		if err != nil {
			return 0, fmt.Errorf("CVSS v3.0 vector %q: %w", vector, err)
		}
		return v.BaseScore(), nil
	}
	return 0, fmt.Errorf("not a CVSS v3 vector: %q", vector)
}
