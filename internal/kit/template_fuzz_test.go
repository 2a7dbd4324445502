package kit

import (
	"strings"
	"testing"
	"text/template"
	"time"
)

type templateFuzzData struct{ Namespace, Tenant, Password string }

// FuzzTemplate parses and runs any text as a user template with a bound of 4096
// bytes. Properties: it returns in bounded time; a refusal is an error with a
// message; the output is within the bound; and what renders renders exactly as
// text/template renders it (the bounded functions change no output).
func FuzzTemplate(f *testing.F) {
	for _, s := range []string{
		"{{ .Namespace }}", "{{ .Tenant }}/x", "plain", "{{ .Cluster }}", "{{ .Namespace ", `{{urlquery "a b/c?"}}`,
		"postgres://{{urlquery .Tenant}}:{{urlquery .Password}}@{{.Namespace}}", `{{env "HOME"}}`, `{{call .Password}}`,
		`{{printf "%099999d" 1}}`, `{{range 100000000000}}{{end}}`, `{{range .Password}}{{end}}`,
		`{{define "a"}}{{if .}}{{template "a" (slice . 1)}}{{template "a" (slice . 1)}}{{end}}{{end}}{{template "a" .Password}}`,
		`{{block "a" .}}x{{end}}`, `{{$a := printf "%0999d" 0}}{{$a = printf "%s%s" $a $a}}{{$a = printf "%s%s" $a $a}}{{len $a}}`,
		`{{if eq .Namespace "a"}}{{html .Tenant}}{{else if .Tenant}}{{js .Tenant}}{{else}}{{println 1 2}}{{end}}`,
		`{{with $x := index .Password 1}}{{print $x}}{{end}}`, `{{/* a comment */}}{{- .Tenant -}}`,
	} {
		f.Add(s, "acme-dev", "acme")
	}
	f.Fuzz(func(t *testing.T, text, ns, tenant string) {
		const max = 4096
		data := templateFuzzData{Namespace: ns, Tenant: tenant, Password: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
		type result struct {
			out      string
			parseErr error
			execErr  error
		}
		done := make(chan result, 1)
		go func() {
			tpl, err := ParseTemplate("t", text, max)
			if err != nil {
				done <- result{parseErr: err}
				return
			}
			out, err := tpl.Execute(data)
			done <- result{out: out, execErr: err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(fuzzTimeout):
			t.Fatalf("the template %q did not run within %s", text, fuzzTimeout)
		}
		switch {
		case r.parseErr != nil:
			if r.parseErr.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		case r.execErr != nil:
			if r.execErr.Error() == "" {
				t.Fatal("a failure without a message")
			}
			return
		case len(r.out) > max:
			t.Fatalf("the template %q renders %d bytes, more than the bound of %d", text, len(r.out), max)
		}
		// What rendered within the bounds renders the same with text/template itself.
		plain, err := template.New("t").Option("missingkey=error").Parse(text)
		if err != nil {
			t.Fatalf("text/template refuses %q, which the user template parsed: %v", text, err)
		}
		var b strings.Builder
		if err := plain.Execute(&b, data); err != nil {
			t.Fatalf("text/template fails on %q, which the user template rendered: %v", text, err)
		}
		if b.String() != r.out {
			t.Fatalf("the template %q renders %q, text/template %q", text, r.out, b.String())
		}
	})
}
