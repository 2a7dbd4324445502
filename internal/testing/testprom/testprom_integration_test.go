//go:build integration

package testprom

import (
	"context"
	"net/http"
	"testing"
	"time"

	"orderly.dev/orderly/internal/standin/canaryapp"
)

// A server scrapes its targets, becomes unreachable when stopped, and comes back on
// the same port with the same data.
func TestServerScrapesStopsAndComesBack(t *testing.T) {
	app, err := canaryapp.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close()
	app.Set("ns", "web", "canary", canaryapp.Behaviour{})
	s, err := Start(Options{Targets: []string{app.Address}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.WaitForData(ctx, `canaryapp_requests_total{target="web"}`); err != nil {
		t.Fatal(err)
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(s.URL + "/-/ready"); err == nil { //nolint:noctx // loopback
		resp.Body.Close()
		t.Fatal("still answering after Stop")
	}
	if err := s.StartAgain(); err != nil {
		t.Fatal(err)
	}
	if err := s.WaitForData(ctx, `canaryapp_requests_total{target="web"}[1h]`); err != nil {
		t.Fatalf("data lost across the restart: %v", err)
	}
}
