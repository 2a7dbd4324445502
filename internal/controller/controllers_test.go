package controller

import (
	"maps"
	"path/filepath"
	"slices"
	"testing"
)

// Every controller package (a directory with a controller.go) is registered, under
// its directory's name, once: a controller that is written but not listed here would
// never run.
func TestEveryControllerPackageIsRegistered(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("*", "*", "controller.go"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no controller packages found; run the test from internal/controller")
	}
	names := map[string]int{}
	for _, c := range All {
		names[c.Name]++
		if c.Setup == nil {
			t.Errorf("controller %q has no Setup", c.Name)
		}
	}
	for _, f := range files {
		pkg := filepath.Base(filepath.Dir(f))
		if names[pkg] != 1 {
			t.Errorf("controller package %s is registered %d times in All, want once", filepath.Dir(f), names[pkg])
		}
		delete(names, pkg)
	}
	if len(names) > 0 {
		t.Errorf("registered controllers without a package of that name: %v", slices.Collect(maps.Keys(names)))
	}
}
