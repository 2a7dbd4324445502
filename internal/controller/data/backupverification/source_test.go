package backupverification

import (
	"regexp"
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
