package main

import (
	"strings"
	"testing"
)

// The arithmetic and the maxTTL rule are tested with devdatabase.Extend; the CLI
// refuses an extension that is not one before it contacts any cluster.
func TestDBExtendRefusesANonPositiveExtension(t *testing.T) {
	for _, by := range []string{"0s", "-1h"} {
		cmd := newRootCommand()
		cmd.SetArgs([]string{"db", "extend", "app", "--by", by, "--kubeconfig", "/nonexistent"})
		err := cmd.Execute()
		if err == nil || !strings.Contains(err.Error(), "--by must be positive") {
			t.Errorf("--by %s: err = %v, want one saying it must be positive", by, err)
		}
	}
}
