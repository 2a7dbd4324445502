package kit

import (
	"errors"
	"fmt"
	"strings"
	"text/template"
	"text/template/parse"
)

// Templates that users write (a DevDatabase's secretTemplate, a Canary's metric
// queries, strings in a Tenant's resources) run inside the manager, so what they may
// cost is bounded here, once. text/template alone runs `{{range 100000000000}}` for
// hours, recurses exponentially through {{define}} and {{template}}, and lets printf
// double a string at each nested call. A user template therefore has no loops
// ({{range}}), no templates calling templates ({{define}}, {{template}}, {{block}}),
// and every string its functions make counts against a budget of a few times the
// output's bound: the work of one execution is bounded by the template's size and
// that budget.

// ErrTemplateTooLong is returned by Template.Execute when the output, or the strings
// the template's functions make on the way, pass the template's bound.
var ErrTemplateTooLong = errors.New("the template renders to more text than allowed")

// Template is a parsed user template.
type Template struct {
	t   *template.Template
	max int
}

// ParseTemplate parses text as a user template called name whose output may be at
// most maxBytes long. Unknown fields of the data are errors (missingkey=error); the
// functions are text/template's built-ins.
func ParseTemplate(name, text string, maxBytes int) (*Template, error) {
	t, err := template.New(name).Option("missingkey=error").Funcs(boundedFuncs(nil)).Parse(text)
	if err != nil {
		return nil, err
	}
	if len(t.Templates()) > 1 {
		return nil, fmt.Errorf("template: %s: {{define}} and {{block}} are not allowed: write the text where it is used", name)
	}
	if t.Tree != nil && t.Root != nil {
		if err := checkNodes(t.Tree, t.Root.Nodes); err != nil {
			return nil, err
		}
	}
	return &Template{t: t, max: maxBytes}, nil
}

// checkNodes refuses what could make an execution run without bound.
func checkNodes(tree *parse.Tree, nodes []parse.Node) error {
	for _, n := range nodes {
		switch n := n.(type) {
		case *parse.RangeNode:
			at, _ := tree.ErrorContext(n)
			return fmt.Errorf("template: %s: {{range}} is not allowed (a loop could run without end)", at)
		case *parse.TemplateNode:
			at, _ := tree.ErrorContext(n)
			return fmt.Errorf("template: %s: {{template}} is not allowed: write the text where it is used", at)
		case *parse.IfNode:
			if err := checkBranch(tree, &n.BranchNode); err != nil {
				return err
			}
		case *parse.WithNode:
			if err := checkBranch(tree, &n.BranchNode); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkBranch(tree *parse.Tree, b *parse.BranchNode) error {
	for _, l := range []*parse.ListNode{b.List, b.ElseList} {
		if l == nil {
			continue
		}
		if err := checkNodes(tree, l.Nodes); err != nil {
			return err
		}
	}
	return nil
}

// Execute renders the template with data.
func (t *Template) Execute(data any) (string, error) {
	c, err := t.t.Clone()
	if err != nil {
		return "", err
	}
	c.Funcs(boundedFuncs(&budget{left: 4 * t.max}))
	var b strings.Builder
	if err := c.Execute(&limitedWriter{b: &b, n: t.max}, data); err != nil {
		if errors.Is(err, ErrTemplateTooLong) {
			return "", ErrTemplateTooLong
		}
		return "", err
	}
	return b.String(), nil
}

// budget is what the strings made by one execution's functions may add up to.
type budget struct{ left int }

func (b *budget) take(s string) (string, error) {
	if b == nil {
		return s, nil
	}
	if b.left -= len(s); b.left < 0 {
		return "", ErrTemplateTooLong
	}
	return s, nil
}

// boundedFuncs are text/template's built-ins that make strings, charged to b.
func boundedFuncs(b *budget) template.FuncMap {
	return template.FuncMap{
		"print":    func(args ...any) (string, error) { return b.take(fmt.Sprint(args...)) },
		"printf":   func(f string, args ...any) (string, error) { return b.take(fmt.Sprintf(f, args...)) },
		"println":  func(args ...any) (string, error) { return b.take(fmt.Sprintln(args...)) },
		"html":     func(args ...any) (string, error) { return b.take(template.HTMLEscaper(args...)) },
		"js":       func(args ...any) (string, error) { return b.take(template.JSEscaper(args...)) },
		"urlquery": func(args ...any) (string, error) { return b.take(template.URLQueryEscaper(args...)) },
	}
}

// limitedWriter fails once more than n bytes are written.
type limitedWriter struct {
	b *strings.Builder
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.b.Len()+len(p) > l.n {
		return 0, ErrTemplateTooLong
	}
	return l.b.Write(p)
}
