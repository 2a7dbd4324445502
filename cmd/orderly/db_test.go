package main

import (
	"testing"
	"time"
)

func TestExtendedTTL(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		ttl, by time.Duration
		now     time.Time
		wantTTL time.Duration
	}{
		{name: "before expiry: from the current expiry", ttl: 24 * time.Hour, by: 24 * time.Hour, now: created.Add(time.Hour), wantTTL: 48 * time.Hour},
		{name: "after expiry: from now", ttl: time.Hour, by: 2 * time.Hour, now: created.Add(5 * time.Hour), wantTTL: 7 * time.Hour},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := extendedTTL(created, tc.ttl, tc.by, tc.now); got != tc.wantTTL {
				t.Errorf("extendedTTL = %s, want %s", got, tc.wantTTL)
			}
		})
	}
}
