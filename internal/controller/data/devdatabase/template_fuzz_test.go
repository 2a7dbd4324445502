package devdatabase

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzSecretTemplates parses and renders any spec.secretTemplate value. Properties:
// it returns in bounded time; a refusal is errInvalidTemplate naming the key; a
// rendering error never quotes the password; a rendered value is within the bound.
func FuzzSecretTemplates(f *testing.F) {
	for _, s := range []string{
		"postgres://{{urlquery .Username}}:{{urlquery .Password}}@{{.Host}}:{{.Port}}/{{.Database}}",
		"spring.datasource.url=jdbc:postgresql://{{.Host}}:{{.Port}}/{{.Database}}\nspring.datasource.password={{.Password}}\n",
		"{{urlquery \"a b/c?\"}}", `{{env "HOME"}}`, `{{readFile "/etc/passwd"}}`, `{{.Password`, `{{.Secret}}`,
		`{{range .Password}}{{end}}`, `{{call .Password}}`, `{{printf "%099999d" 1}}`, `{{range 100000000000}}{{end}}`,
		`{{define "a"}}{{if .}}{{template "a" (slice . 1)}}{{template "a" (slice . 1)}}{{end}}{{end}}{{template "a" .Password}}`,
		`{{index .Password 99}}`, `{{slice .Password 3 1}}`, `{{printf "%s" .Password | printf "%q%v"}}`,
	} {
		f.Add("DATABASE_URL", s)
	}
	const password = "QWERTYUIOPASDFGHJKLZXCVBNM"
	data := templateData{Host: "db.example", Port: "5432", Database: "orderly_x", Username: "orderly_x", Password: password}
	f.Fuzz(func(t *testing.T, key, value string) {
		done := make(chan error, 1)
		var out map[string][]byte
		go func() {
			ts, err := parseTemplates(map[string]string{key: value})
			if err != nil {
				if !errors.Is(err, errInvalidTemplate) || !strings.Contains(err.Error(), "key "+key) {
					t.Errorf("parse error %q is not errInvalidTemplate naming key %q", err, key)
				}
				done <- nil
				return
			}
			out, err = ts.render(data)
			done <- err
		}()
		var err error
		select {
		case err = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the template %q did not render within 30s", value)
		}
		if err != nil {
			if !errors.Is(err, errInvalidTemplate) || !strings.Contains(err.Error(), "key "+key) {
				t.Fatalf("render error %q is not errInvalidTemplate naming key %q", err, key)
			}
			if strings.Contains(err.Error(), password[:8]) && !strings.Contains(value, password[:8]) && !strings.Contains(key, password[:8]) {
				t.Fatalf("render error quotes the password: %v", err)
			}
			return
		}
		if len(out[key]) > maxRenderedBytes {
			t.Fatalf("%q rendered %d bytes, more than %d", value, len(out[key]), maxRenderedBytes)
		}
	})
}
