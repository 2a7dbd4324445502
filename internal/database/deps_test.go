package database

import (
	"testing"

	"orderly.dev/orderly/internal/kit"
)

func TestConnectorOf(t *testing.T) {
	engines := Engines{}
	for _, tc := range []struct {
		name    string
		deps    kit.Deps
		want    Connector
		wantErr bool
	}{
		{name: "none", deps: kit.Deps{}},
		{name: "a connector", deps: kit.Deps{Databases: engines}, want: engines},
		{name: "something else", deps: kit.Deps{Databases: "postgres://"}, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ConnectorOf(tc.deps)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v", err)
			}
			if tc.want == nil && got != nil {
				t.Errorf("got %v, want none", got)
			}
			if tc.want != nil && got == nil {
				t.Error("got none")
			}
		})
	}
}
