package kit

import (
	"errors"
	"strings"
	"testing"
)

// A user template has no loops and no templates calling templates, and what its
// functions make counts against its bound: text/template ran {{range 100000000000}}
// for hours, and printf doubled a string at each call.
func TestTemplateBounds(t *testing.T) {
	for text, want := range map[string]string{
		`{{range 100000000000}}{{end}}`:             "t:1:8: {{range}} is not allowed",
		`{{if .}}{{range .}}{{end}}{{end}}`:         "{{range}} is not allowed",
		`{{with .}}{{else}}{{template "x"}}{{end}}`: "{{template}} is not allowed",
		`{{define "a"}}x{{end}}{{.}}`:               "{{define}} and {{block}} are not allowed",
	} {
		if _, err := ParseTemplate("t", text, 100); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseTemplate(%q) = %v, want an error with %q", text, err, want)
		}
	}
	for text, data := range map[string]any{
		`{{printf "%0101d" 0}}`: nil,
		`{{$a := printf "%050d" 0}}{{$a = print $a $a}}{{$a = print $a $a}}{{$a = print $a $a}}{{len $a}}`: nil,
		`{{.}}{{.}}{{.}}`: strings.Repeat("x", 40),
	} {
		tpl, err := ParseTemplate("t", text, 100)
		if err != nil {
			t.Fatal(err)
		}
		if out, err := tpl.Execute(data); !errors.Is(err, ErrTemplateTooLong) {
			t.Errorf("Execute(%q) = %q, %v; want ErrTemplateTooLong", text, out, err)
		}
	}
	tpl, err := ParseTemplate("t", `{{ .Namespace }}-{{ printf "%s" .Tenant | urlquery }}`, 100)
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tpl.Execute(templateFuzzData{Namespace: "a", Tenant: "b c"}); err != nil || out != "a-b+c" {
		t.Errorf("Execute = %q, %v", out, err)
	}
}
