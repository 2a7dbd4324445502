package kit

import (
	"strings"
	"testing"
	"time"
)

func TestLoadLocation(t *testing.T) {
	for name, want := range map[string]string{"": "UTC", "UTC": "UTC", "Europe/Berlin": "Europe/Berlin", "America/Havana": "America/Havana"} {
		loc, err := LoadLocation(name)
		if err != nil || loc.String() != want {
			t.Errorf("LoadLocation(%q) = %v, %v; want %s", name, loc, err, want)
		}
	}
	for _, bad := range []string{"Local", "Mars/Olympus_Mons", "../../etc/passwd", "Europe/Berlin "} {
		if _, err := LoadLocation(bad); err == nil || !strings.Contains(err.Error(), "use an IANA name") {
			t.Errorf("LoadLocation(%q): err = %v, want a refusal that says what to write", bad, err)
		}
	}
	if loc, _ := LoadLocation("Asia/Kolkata"); time.Date(2026, 1, 1, 0, 0, 0, 0, loc).UTC().Hour() != 18 {
		t.Error("Asia/Kolkata is not UTC+5:30")
	}
}
