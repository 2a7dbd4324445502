package main

import (
	"bytes"
	"strings"
	"testing"

	"orderly.dev/orderly/internal/localpg"
)

// Without PostgreSQL, `dev postgres up` says how to install it; with --optional
// (as make run calls it) it does not fail.
func TestDevPostgresUpWithoutPostgreSQL(t *testing.T) {
	t.Setenv(localpg.BinDirEnv, t.TempDir())
	for _, tc := range []struct {
		name    string
		args    []string
		wantErr bool
	}{
		{name: "required", args: []string{"dev", "postgres", "up", "--dir", t.TempDir()}, wantErr: true},
		{name: "optional", args: []string{"dev", "postgres", "up", "--optional", "--dir", t.TempDir()}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			cmd := newRootCommand()
			cmd.SetArgs(tc.args)
			cmd.SetOut(&out)
			cmd.SetErr(&out)
			err := cmd.Execute()
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			text := out.String()
			if err != nil {
				text += err.Error()
			}
			if !strings.Contains(text, localpg.InstallCommand) {
				t.Errorf("output does not say how to install PostgreSQL:\n%s", text)
			}
		})
	}
}
