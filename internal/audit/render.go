package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

// Formats Render writes.
var Formats = []string{"table", "json", "markdown"}

// Render writes the report as a table, JSON or Markdown. The table and Markdown list
// every finding that costs points, with its reason; JSON has every check, passed ones
// too.
func Render(w io.Writer, r Report, format string) error {
	switch format {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "table", "":
		return renderTable(w, r)
	case "markdown":
		return renderMarkdown(w, r)
	}
	return fmt.Errorf("unknown output format %q: one of %s", format, strings.Join(Formats, ", "))
}

func controllersText(g Group) string {
	if len(g.Controllers) == 0 {
		return "none found"
	}
	return strings.Join(g.Controllers, ", ")
}

// problems are the findings that cost points.
func problems(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Result != Pass {
			out = append(out, f)
		}
	}
	return out
}

func checkName(f Finding) string {
	if f.Subject != "" {
		return f.Check + " (" + f.Subject + ")"
	}
	return f.Check
}

func renderTable(out io.Writer, r Report) error {
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "OPERATOR\tGRADE\tSCORE\tAPI\tRBAC\tAVAILABILITY\tOBSERVABILITY\tGROUPS")
	for _, o := range r.Operators {
		fmt.Fprintf(w, "%s\t%s\t%d\t%d\t%d\t%d\t%d\t%s\n", o.Ref(), o.Grade, o.Scores.Total, o.Scores.API, o.Scores.RBAC,
			o.Scores.Availability, o.Scores.Observability, strings.Join(o.Groups, ","))
	}
	if len(r.Operators) == 0 {
		fmt.Fprintln(w, "(no workload found controlling an API group of CRDs)")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "API GROUP\tKINDS\tMATURITY\tAPI\tCONTROLLER")
	for _, g := range r.Groups {
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\n", g.Group, len(g.CRDs), g.Maturity, g.APIScore, controllersText(g))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, o := range r.Operators {
		fmt.Fprintf(out, "\n%s: grade %s (%d/100), ServiceAccount %s, replicas %d\n", o.Ref(), o.Grade, o.Scores.Total, o.ServiceAccount, o.Replicas)
		if err := findingsTable(out, o.Findings); err != nil {
			return err
		}
	}
	for _, g := range r.Groups {
		if len(g.Controllers) > 0 {
			continue // its findings are its controller's
		}
		fmt.Fprintf(out, "\n%s: API %d/100, no controller found", g.Group, g.APIScore)
		if len(g.Writers) > 0 {
			fmt.Fprintf(out, " (written by %s)", strings.Join(g.Writers, ", "))
		}
		fmt.Fprintln(out)
		if err := findingsTable(out, g.Findings); err != nil {
			return err
		}
	}
	return nil
}

func findingsTable(out io.Writer, fs []Finding) error {
	ps := problems(fs)
	if len(ps) == 0 {
		fmt.Fprintf(out, "  all %d checks passed\n", len(fs))
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, f := range ps {
		fmt.Fprintf(w, "  %s\t-%d\t%s\t%s\n", f.Result, f.Penalty, checkName(f), f.Message)
	}
	fmt.Fprintf(w, "  (%d other checks passed)\n", len(fs)-len(ps))
	return w.Flush()
}

// mdEscape keeps a cell's text from ending the cell.
func mdEscape(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func renderMarkdown(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString("# Operator audit\n\n## Operators\n\n")
	if len(r.Operators) == 0 {
		b.WriteString("No workload found controlling an API group of CRDs.\n")
	} else {
		b.WriteString("| operator | grade | score | API | RBAC | availability | observability | groups |\n|---|---|---|---|---|---|---|---|\n")
		for _, o := range r.Operators {
			fmt.Fprintf(&b, "| %s | **%s** | %d | %d | %d | %d | %d | %s |\n", mdEscape(o.Ref()), o.Grade, o.Scores.Total, o.Scores.API, o.Scores.RBAC,
				o.Scores.Availability, o.Scores.Observability, mdEscape(strings.Join(o.Groups, ", ")))
		}
	}
	b.WriteString("\n## API groups\n\n| group | kinds | maturity | API | controller |\n|---|---|---|---|---|\n")
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s |\n", g.Group, len(g.CRDs), g.Maturity, g.APIScore, mdEscape(controllersText(g)))
	}
	section := func(title string, fs []Finding) {
		fmt.Fprintf(&b, "\n### %s\n\n", title)
		ps := problems(fs)
		if len(ps) == 0 {
			fmt.Fprintf(&b, "All %d checks passed.\n", len(fs))
			return
		}
		b.WriteString("| result | penalty | check | reason |\n|---|---|---|---|\n")
		for _, f := range ps {
			fmt.Fprintf(&b, "| %s | -%d | `%s` | %s |\n", f.Result, f.Penalty, mdEscape(checkName(f)), mdEscape(f.Message))
		}
		fmt.Fprintf(&b, "\n%d other checks passed.\n", len(fs)-len(ps))
	}
	for _, o := range r.Operators {
		section(fmt.Sprintf("%s: grade %s (%d/100)", o.Ref(), o.Grade, o.Scores.Total), o.Findings)
	}
	for _, g := range r.Groups {
		if len(g.Controllers) == 0 {
			section(fmt.Sprintf("%s: no controller found (API %d/100)", g.Group, g.APIScore), g.Findings)
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
