//go:build integration

package registry

import (
	"testing"

	"orderly.dev/orderly/internal/standin"
)

// A persistent registry is found again by the next Run on the same port.
func TestRunPersistent(t *testing.T) {
	port, err := standin.FreePort(false)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: t.TempDir(), Port: port}
	r, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	again, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pid() != r.Pid() || again.Host != r.Host {
		t.Fatalf("a second Run started another registry: pid %d (was %d), host %s (was %s)", again.Pid(), r.Pid(), again.Host, r.Host)
	}
}
