//go:build unix

package devcluster

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Two holders of one lock file (two test runs creating clusters) take turns: the
// second waits, says what for, and gets the lock once the first lets go.
func TestLockFileWaitsForTheHolder(t *testing.T) {
	path := filepath.Join(t.TempDir(), ".create.lock")
	unlock, err := lockFile(path, "creating another cluster", &bytes.Buffer{})
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	acquired := make(chan func())
	go func() {
		u, err := lockFile(path, "creating another cluster", &out)
		if err != nil {
			t.Error(err)
			close(acquired)
			return
		}
		acquired <- u
	}()
	select {
	case <-acquired:
		t.Fatal("the second holder got the lock while the first held it")
	case <-time.After(300 * time.Millisecond):
	}
	unlock()
	select {
	case u := <-acquired:
		if u != nil {
			u()
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second holder did not get the lock once it was free")
	}
	if !strings.Contains(out.String(), "waiting for another orderly process that is creating another cluster") {
		t.Errorf("the waiting holder said %q", out.String())
	}
}
