//go:build integration

package prom

import (
	"context"
	"testing"
	"time"

	"orderly.dev/orderly/internal/standin"
	"orderly.dev/orderly/internal/standin/canaryapp"
)

// A persistent server is found again by the next Run with the same configuration,
// started afresh for another one, and its jobs' relabelling renames the series (as
// the Canary sample of `make run` reads canaryapp's series as http_requests_total of
// pods).
func TestRunPersistentWithRelabel(t *testing.T) {
	app, err := canaryapp.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.Set("shop", "web", "canary", canaryapp.Behaviour{})
	port, err := standin.FreePort(false)
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Dir: t.TempDir(), Port: port, Jobs: []Job{{Name: "apps", Targets: []string{app.Address}, Relabel: []Relabel{
		{SourceLabels: []string{"target", "variant"}, Separator: "-", Regex: "(.+)", TargetLabel: "pod", Replacement: "${1}-0"},
		{SourceLabels: []string{"__name__"}, Regex: "canaryapp_(.*)", TargetLabel: "__name__", Replacement: "http_${1}"},
	}}}}
	s, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitForData(ctx, `http_requests_total{namespace="shop",pod="web-canary-0"}`); err != nil {
		t.Fatal(err)
	}
	again, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	if again.Pid() != s.Pid() {
		t.Errorf("the same configuration started another server: pid %d, was %d", again.Pid(), s.Pid())
	}
	o.ScrapeInterval = 2 * time.Second
	changed, err := Run(o)
	if err != nil {
		t.Fatal(err)
	}
	defer changed.Close()
	if changed.Pid() == s.Pid() || changed.URL != s.URL {
		t.Errorf("another configuration: pid %d (was %d), URL %s (was %s); want a new server on the same port", changed.Pid(), s.Pid(), changed.URL, s.URL)
	}
}
