package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	controllers "orderly.dev/orderly/internal/controller"
	"orderly.dev/orderly/internal/kit"
)

func TestRunManagerRejectsBadFlags(t *testing.T) {
	tests := []struct {
		name    string
		opts    managerOptions
		wantErr string
	}{
		{"unknown controller", managerOptions{controllers: []string{"tenant", "nope"}, logFormat: "json"}, `unknown controller "nope"`},
		{"unknown log level", managerOptions{logLevel: "loud", logFormat: "json"}, `unknown --log-level "loud"`},
		{"unknown log format", managerOptions{logFormat: "xml"}, `unknown --log-format "xml"`},
		{"unknown mutation mode", managerOptions{logFormat: "json", webhook: webhookDefaults(func(w *webhookOptions) { w.mutation = "magic" })}, `unknown LabelPolicy mutation mode "magic"`},
		{"unknown failure policy", managerOptions{logFormat: "json", webhook: webhookDefaults(func(w *webhookOptions) { w.failurePolicy = "Maybe" })}, `unknown --webhook-failure-policy "Maybe"`},
		{"webhook timeout out of range", managerOptions{logFormat: "json", webhook: webhookDefaults(func(w *webhookOptions) { w.timeoutSeconds = 60 })}, `--webhook-timeout-seconds 60`},
		{"renew deadline not under the lease duration", managerOptions{logFormat: "json", webhook: webhookDefaults(nil), leaseDuration: 10 * time.Second, renewDeadline: 10 * time.Second}, `--leader-elect-renew-deadline (10s) must be less than --leader-elect-lease-duration (10s)`},
		{"renew deadline within one retry", managerOptions{logFormat: "json", webhook: webhookDefaults(nil), renewDeadline: 2 * time.Second, retryPeriod: 2 * time.Second}, `must be more than 1.2 times --leader-elect-retry-period (2s)`},
		{"negative lease timing", managerOptions{logFormat: "json", webhook: webhookDefaults(nil), retryPeriod: -time.Second}, `must be positive`},
		{"webhook URL without TLS", managerOptions{logFormat: "json", webhook: webhookDefaults(func(w *webhookOptions) { w.url = "http://127.0.0.1:9443" })}, `must be an https:// URL`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := runManager(context.Background(), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

// TestEveryControllerCacheRuleMerges starts nothing: it checks that the cache rules of
// all controllers together are one view per kind, as the manager requires at start.
func TestEveryControllerCacheRuleMerges(t *testing.T) {
	if _, err := kit.MergeCache(newScheme(), controllers.All); err != nil {
		t.Fatal(err)
	}
}

func TestControllersFlag(t *testing.T) {
	all := make([]string, 0, len(controllers.All))
	for _, c := range controllers.All {
		all = append(all, c.Name)
	}
	tests := []struct {
		name    string
		args    []string
		want    []string
		wantErr string
	}{
		{"every registered controller by default", nil, all, ""},
		{"a subset", []string{"--controllers=tenant,labelpolicy"}, []string{"tenant", "labelpolicy"}, ""},
		{"an unknown one is refused", []string{"--controllers=tenant,nope"}, nil, `unknown controller "nope"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var o managerOptions
			f := pflag.NewFlagSet("test", pflag.ContinueOnError)
			addManagerFlags(f, &o)
			if err := f.Parse(tt.args); err != nil {
				t.Fatal(err)
			}
			got, err := selectControllers(o.controllers)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.Name)
			}
			if !slices.Equal(slices.Sorted(slices.Values(names)), slices.Sorted(slices.Values(tt.want))) {
				t.Errorf("selected %v, want %v", names, tt.want)
			}
		})
	}
	if help := newManagerCommand().Long; !strings.Contains(help, strings.Join(controllerNames(), ", ")) {
		t.Errorf("`orderly manager --help` does not list the controllers: %s", help)
	}
}

// webhookDefaults are the webhook flags' defaults, changed by mod.
func webhookDefaults(mod func(*webhookOptions)) webhookOptions {
	var w webhookOptions
	addWebhookFlags(pflag.NewFlagSet("test", pflag.ContinueOnError), &w)
	if mod != nil {
		mod(&w)
	}
	return w
}
