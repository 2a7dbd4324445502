package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"
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

func TestEveryControllerIsSelectable(t *testing.T) {
	cmd := newManagerCommand()
	def := cmd.Flags().Lookup("controllers").DefValue
	for _, name := range controllerNames() {
		if !strings.Contains(def, name) {
			t.Errorf("controller %q is not in --controllers' default %s", name, def)
		}
		if !strings.Contains(cmd.Long, name) {
			t.Errorf("controller %q is not listed in `orderly manager --help`", name)
		}
	}
}

// webhookDefaults are the webhook flags' defaults, changed by mod.
func webhookDefaults(mod func(*webhookOptions)) webhookOptions {
	var w webhookOptions
	addWebhookFlags(pflag.NewFlagSet("test", pflag.ContinueOnError), &w)
	mod(&w)
	return w
}
