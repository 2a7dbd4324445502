package devdatabase

import (
	"errors"
	"strings"
	"testing"

	"orderly.dev/orderly/internal/database"
)

func TestSecretTemplates(t *testing.T) {
	const password = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
	data := templateData{Host: "db.example", Port: "5432", Database: "orderly_x", Username: "orderly_x", Password: password}
	tests := []struct {
		name      string
		spec      map[string]string
		want      map[string]string
		wantParse string // substring of the parse error; empty: parses
		wantExec  string // substring of the render error; empty: renders
	}{
		{name: "none", spec: nil, want: map[string]string{}},
		{
			name: "DATABASE_URL with escaping and Spring properties",
			spec: map[string]string{
				"DATABASE_URL":           "postgres://{{urlquery .Username}}:{{urlquery .Password}}@{{.Host}}:{{.Port}}/{{.Database}}",
				"application.properties": "spring.datasource.url=jdbc:postgresql://{{.Host}}:{{.Port}}/{{.Database}}\nspring.datasource.username={{.Username}}\nspring.datasource.password={{.Password}}\n",
			},
			want: map[string]string{
				"DATABASE_URL":           "postgres://orderly_x:" + password + "@db.example:5432/orderly_x",
				"application.properties": "spring.datasource.url=jdbc:postgresql://db.example:5432/orderly_x\nspring.datasource.username=orderly_x\nspring.datasource.password=" + password + "\n",
			},
		},
		{name: "urlquery escapes", spec: map[string]string{"k": "{{urlquery \"a b/c?\"}}"}, want: map[string]string{"k": "a+b%2Fc%3F"}},
		{name: "no environment function", spec: map[string]string{"k": `{{env "HOME"}}`}, wantParse: `key k: template: k:1: function "env" not defined`},
		{name: "no file function", spec: map[string]string{"k": `{{readFile "/etc/passwd"}}`}, wantParse: `function "readFile" not defined`},
		{name: "unclosed action", spec: map[string]string{"k": `{{.Password`}, wantParse: "key k"},
		{name: "unknown field", spec: map[string]string{"k": `{{.Secret}}`}, wantExec: `key k cannot be rendered (template: k:1:2: executing "k" at <.Secret>`},
		// Loops and templates calling templates have no bound: refused before anything
		// runs (a namespace's user could hold a manager's worker for hours with
		// {{range 100000000000}}{{end}}, found writing FuzzSecretTemplates).
		{name: "no range", spec: map[string]string{"k": `{{range .Password}}{{end}}`}, wantParse: "key k: template: k:1:8: {{range}} is not allowed"},
		{name: "no range over a number", spec: map[string]string{"k": `{{range 100000000000}}{{end}}`}, wantParse: "{{range}} is not allowed"},
		{name: "no templates calling templates", spec: map[string]string{"k": `{{define "a"}}{{if .}}{{template "a" (slice . 1)}}{{template "a" (slice . 1)}}{{end}}{{end}}{{template "a" .Password}}`}, wantParse: "{{define}} and {{block}} are not allowed"},
		{name: "no block", spec: map[string]string{"k": `{{block "a" .}}x{{end}}`}, wantParse: "are not allowed"},
		{name: "strings made on the way count", spec: map[string]string{"k": `{{$a := printf "%09999d" 0}}{{$a = printf "%s%s" $a $a}}{{$a = printf "%s%s" $a $a}}{{$a = printf "%s%s" $a $a}}{{$a = printf "%s%s" $a $a}}{{$a = printf "%s%s" $a $a}}{{$a = printf "%s%s" $a $a}}{{len $a}}`}, wantExec: "renders to more than 16384 bytes"},
		// text/template's own errors quote values here ("can't call <password>").
		{name: "call of a field hides its cause", spec: map[string]string{"k": `{{if .Password}}{{index .Password 99}}{{end}}`}, wantExec: "the cause is not shown"},
		{name: "call of the password hides its cause", spec: map[string]string{"k": `{{call .Password}}`}, wantExec: "the cause is not shown"},
		{name: "too long", spec: map[string]string{"k": `{{printf "%099999d" 1}}`}, wantExec: "renders to more than 16384 bytes"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ts, err := parseTemplates(tt.spec)
			if tt.wantParse != "" {
				if err == nil || !errors.Is(err, errInvalidTemplate) || !strings.Contains(err.Error(), tt.wantParse) {
					t.Fatalf("parse error %v, want one with %q", err, tt.wantParse)
				}
				return
			}
			if err != nil {
				t.Fatalf("parse: %v", err)
			}
			got, err := ts.render(data)
			if tt.wantExec != "" {
				if err == nil || !errors.Is(err, errInvalidTemplate) || !strings.Contains(err.Error(), tt.wantExec) {
					t.Fatalf("render error %v, want one with %q", err, tt.wantExec)
				}
				if strings.Contains(err.Error(), password) || strings.Contains(err.Error(), password[:8]) {
					t.Fatalf("render error quotes the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("render: %v", err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("rendered %d keys, want %d", len(got), len(tt.want))
			}
			for k, v := range tt.want {
				if string(got[k]) != v {
					t.Errorf("key %s = %q, want %q", k, got[k], v)
				}
			}
		})
	}
}

// A template's keys go beside the standard ones, each Secret rendered with its own
// role; a template cannot replace a standard key.
func TestSecretDataRendersEachRolesValues(t *testing.T) {
	ts, err := parseTemplates(map[string]string{"DATABASE_URL": "{{.Username}}:{{.Password}}", "password": "nope"})
	if err != nil {
		t.Fatal(err)
	}
	srv := database.Server{Host: "h", Port: 5432}
	main, err := secretData(srv, database.Database{Name: "d", Role: "owner", Password: "P1"}, ts)
	if err != nil {
		t.Fatal(err)
	}
	user, err := secretData(srv, database.Database{Name: "d", Role: "owner_reader", Password: "P2"}, ts)
	if err != nil {
		t.Fatal(err)
	}
	if string(main["DATABASE_URL"]) != "owner:P1" || string(user["DATABASE_URL"]) != "owner_reader:P2" {
		t.Fatalf("rendered %q and %q", main["DATABASE_URL"], user["DATABASE_URL"])
	}
	if string(main["password"]) != "P1" || string(main["uri"]) == "" {
		t.Fatalf("standard keys changed: %q", main["password"])
	}
	for _, k := range standardKeys[:7] {
		if _, ok := main[k]; !ok {
			t.Errorf("standard key %s missing", k)
		}
	}
}
