package imagescan

import (
	"encoding/json"
	"testing"
)

func TestCVSS3BaseScore(t *testing.T) {
	// Scores as the NVD calculator gives them.
	tests := []struct {
		vector  string
		want    float64
		wantErr bool
	}{
		{vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", want: 9.8},
		{vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:C/C:H/I:H/A:H", want: 10.0},
		{vector: "CVSS:3.0/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:N/A:N", want: 7.5},
		{vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:R/S:C/C:L/I:L/A:N", want: 6.1},
		{vector: "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:H", want: 5.5},
		{vector: "CVSS:3.1/AV:N/AC:H/PR:H/UI:R/S:U/C:L/I:N/A:N", want: 2.0},
		{vector: "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:C/C:H/I:H/A:H", want: 8.8},
		{vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:N/I:N/A:N", want: 0},
		{vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H/E:P/RL:O", want: 9.8},
		{vector: "AV:N/AC:L/Au:N/C:P/I:P/A:P", wantErr: true},
		{vector: "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N", wantErr: true},
		{vector: "CVSS:3.1/AV:X/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H", wantErr: true},
		{vector: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/C:H/I:H/A:H", wantErr: true},
		{vector: "CVSS:3.1/AV:N/AC:L/PRN/UI:N/S:U/C:H/I:H/A:H", wantErr: true},
	}
	for _, tt := range tests {
		got, err := cvss3BaseScore(tt.vector)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error %v, want error %v", tt.vector, err, tt.wantErr)
			continue
		}
		if got != tt.want {
			t.Errorf("%s: %v, want %v", tt.vector, got, tt.want)
		}
	}
}

func TestParseSeverityAndRank(t *testing.T) {
	for in, want := range map[string]Severity{
		"CRITICAL": SeverityCritical, "high": SeverityHigh, "Moderate": SeverityMedium, "MEDIUM": SeverityMedium,
		"low": SeverityLow, "negligible": SeverityLow, "Unknown": SeverityUnknown, "Important": SeverityHigh,
	} {
		got, err := ParseSeverity(in)
		if err != nil || got != want {
			t.Errorf("ParseSeverity(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := ParseSeverity("severe"); err == nil {
		t.Error("ParseSeverity(severe) accepted")
	}
	for i := 1; i < len(Severities); i++ {
		if Severities[i-1].Rank() <= Severities[i].Rank() {
			t.Errorf("%s ranks %d, not above %s (%d)", Severities[i-1], Severities[i-1].Rank(), Severities[i], Severities[i].Rank())
		}
	}
	if Severity("bogus").Rank() != 0 {
		t.Error("an unknown severity ranks above 0")
	}
}

func TestRecordSeverity(t *testing.T) {
	const critical = "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"
	const medium = "CVSS:3.1/AV:L/AC:L/PR:L/UI:N/S:U/C:N/I:N/A:H"
	const v4Critical = "CVSS:4.0/AV:N/AC:L/AT:N/PR:N/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"
	const v4High = "CVSS:4.0/AV:L/AC:L/AT:N/PR:L/UI:N/VC:H/VI:H/VA:H/SC:N/SI:N/SA:N"
	tests := []struct {
		name string
		rec  string
		want Severity
	}{
		{"ecosystem_specific first", `{"affected":[{"ecosystem_specific":{"severity":"LOW"},"database_specific":{"severity":"HIGH"}}],"database_specific":{"severity":"CRITICAL"},"severity":[{"type":"CVSS_V3","score":"` + critical + `"}]}`, SeverityLow},
		{"affected database_specific", `{"affected":[{"database_specific":{"severity":"HIGH"}}],"database_specific":{"severity":"CRITICAL"}}`, SeverityHigh},
		{"GitHub's MODERATE", `{"affected":[{}],"database_specific":{"severity":"MODERATE"},"severity":[{"type":"CVSS_V3","score":"` + critical + `"}]}`, SeverityMedium},
		{"numeric cvss_score", `{"affected":[{"database_specific":{"cvss_score":7.1}}]}`, SeverityHigh},
		{"highest CVSS v3 vector", `{"affected":[{}],"severity":[{"type":"CVSS_V3","score":"` + medium + `"},{"type":"CVSS_V3","score":"` + critical + `"}]}`, SeverityCritical},
		{"affected's CVSS before the record's", `{"affected":[{"severity":[{"type":"CVSS_V3","score":"` + medium + `"}]}],"severity":[{"type":"CVSS_V3","score":"` + critical + `"}]}`, SeverityMedium},
		{"Ubuntu priority", `{"affected":[{}],"severity":[{"type":"Ubuntu","score":"high"}]}`, SeverityHigh},
		// v4 scores from the CVSS v4.0 calculator: 9.3 and 8.5.
		{"CVSS v4 critical", `{"affected":[{}],"severity":[{"type":"CVSS_V4","score":"` + v4Critical + `"}]}`, SeverityCritical},
		{"CVSS v4 high", `{"affected":[{}],"severity":[{"type":"CVSS_V4","score":"` + v4High + `"}]}`, SeverityHigh},
		{"CVSS v4 before v3", `{"affected":[{}],"severity":[{"type":"CVSS_V3","score":"` + critical + `"},{"type":"CVSS_V4","score":"` + v4High + `"}]}`, SeverityHigh},
		// v2 base scores 10.0, 7.5 and 4.3; NVD rates v2 10.0 High.
		{"CVSS v2 10.0 is High", `{"affected":[{}],"severity":[{"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:C/I:C/A:C"}]}`, SeverityHigh},
		{"CVSS v2 7.5", `{"affected":[{}],"severity":[{"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:P/I:P/A:P"}]}`, SeverityHigh},
		{"CVSS v2 4.3", `{"affected":[{}],"severity":[{"type":"CVSS_V2","score":"AV:N/AC:M/Au:N/C:N/I:P/A:N"}]}`, SeverityMedium},
		{"CVSS v3 before v2", `{"affected":[{}],"severity":[{"type":"CVSS_V2","score":"AV:N/AC:L/Au:N/C:C/I:C/A:C"},{"type":"CVSS_V3","score":"` + medium + `"}]}`, SeverityMedium},
		{"unparsable v4 falls back to v3", `{"affected":[{}],"severity":[{"type":"CVSS_V4","score":"CVSS:4.0/AV:X"},{"type":"CVSS_V3","score":"` + medium + `"}]}`, SeverityMedium},
		{"Ubuntu priority above the CVSS", `{"affected":[{}],"severity":[{"type":"Ubuntu","score":"high"},{"type":"CVSS_V3","score":"` + medium + `"}]}`, SeverityHigh},
		{"unparsable severity word falls through to CVSS", `{"affected":[{}],"database_specific":{"severity":"urgent"},"severity":[{"type":"CVSS_V3","score":"` + medium + `"}]}`, SeverityMedium},
		{"nothing", `{"affected":[{}]}`, SeverityUnknown},
	}
	for _, tt := range tests {
		var r osvRecord
		if err := json.Unmarshal([]byte(tt.rec), &r); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if got := recordSeverity(&r, &r.Affected[0]); got != tt.want {
			t.Errorf("%s: %s, want %s", tt.name, got, tt.want)
		}
	}
}
