package audit

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// Formats Render writes.
var Formats = []string{"table", "json", "markdown"}

// Render writes the report as a table, JSON or Markdown. The table and Markdown list
// each operator's checklist answers with their evidence, and every finding that does
// not pass, with its reason; JSON has every check, passed ones too.
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

// controllersText names a group's controllers, marking those found through a wildcard.
func controllersText(g Group) string {
	if len(g.Controllers) == 0 {
		return "none found"
	}
	var out []string
	for _, c := range g.Controllers {
		for _, e := range g.Evidence {
			if e.Workload == c && e.Role == RoleController && e.Wildcard {
				c += " (through a wildcard)"
				break
			}
		}
		out = append(out, c)
	}
	return strings.Join(out, ", ")
}

// maturityText is a group's maturity, or the mix of its user-written kinds'.
func maturityText(g Group) string {
	counts := map[string]int{}
	kinds := gradedKinds(g.CRDs)
	for _, c := range kinds {
		counts[c.Maturity]++
	}
	var parts []string
	for _, m := range []string{Stable, Beta, Alpha, Other} {
		if counts[m] == len(kinds) {
			return m
		}
		if counts[m] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", counts[m], m))
		}
	}
	return strings.Join(parts, ", ")
}

// problems are the findings that cost points or could not be decided.
func problems(fs []Finding) []Finding {
	var out []Finding
	for _, f := range fs {
		if f.Result != Pass && f.Result != NotApplicable {
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

func scoreText(o Operator, category string, score int) string {
	for _, c := range o.Ungraded {
		if c == category {
			return "-"
		}
	}
	return strconv.Itoa(score)
}

func groupsText(o Operator, sep string) string {
	if len(o.Groups) == 0 {
		return "(none tied to it; cluster-admin)"
	}
	return strings.Join(o.Groups, sep)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func headline(o Operator) string {
	s := fmt.Sprintf("%s: grade %s (%d/100), ServiceAccount %s, replicas %d, version %s", o.Ref(), o.Grade, o.Scores.Total, o.ServiceAccount, o.Replicas, orDash(o.Version))
	if o.ClusterAdmin {
		s += ", CLUSTER-ADMIN"
	}
	if len(o.Ungraded) > 0 {
		s += fmt.Sprintf(" (not graded: %s)", strings.Join(o.Ungraded, ", "))
	}
	if len(o.Unknown) > 0 {
		s += fmt.Sprintf(" (partial: unknown %s)", strings.Join(o.Unknown, ", "))
	}
	return s
}

func filterNote(r Report) string {
	if len(r.Filter) == 0 {
		return ""
	}
	return fmt.Sprintf("Only API groups %s (--group), and the operators that control them; each operator is graded on every group it controls, shown or not.\n",
		strings.Join(r.Filter, ", "))
}

func statsNote(r Report) string {
	s := fmt.Sprintf("Audited %d CRDs and %d workloads", r.Stats.CRDs, r.Stats.Workloads)
	if r.Stats.Seconds > 0 {
		s += fmt.Sprintf(" in %.2f s", r.Stats.Seconds)
	}
	return s + ".\n"
}

// maxTableEvidence bounds the evidence lines under each answer in the table; JSON
// and Markdown have them all.
const maxTableEvidence = 4

func renderTable(out io.Writer, r Report) error {
	if n := filterNote(r); n != "" {
		fmt.Fprintln(out, n)
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "OPERATOR\tGRADE\tSCORE\tAPI\tRBAC\tAVAILABILITY\tOBSERVABILITY\tMAINTENANCE\tVERSION\tGROUPS")
	for _, o := range r.Operators {
		fmt.Fprintf(w, "%s\t%s\t%d\t%s\t%d\t%d\t%d\t%d\t%s\t%s\n", o.Ref(), o.Grade, o.Scores.Total, scoreText(o, CategoryAPI, o.Scores.API), o.Scores.RBAC,
			o.Scores.Availability, o.Scores.Observability, o.Scores.Maintenance, orDash(o.Version), groupsText(o, ","))
	}
	if len(r.Operators) == 0 {
		fmt.Fprintln(w, "(no workload found controlling an API group of CRDs, or holding cluster-admin)")
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "API GROUP\tKINDS\tMATURITY\tAPI\tCONTROLLER")
	for _, g := range r.Groups {
		fmt.Fprintf(w, "%s\t%d\t%s\t%d\t%s\n", g.Group, len(g.CRDs), maturityText(g), g.APIScore, controllersText(g))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	for _, o := range r.Operators {
		fmt.Fprintf(out, "\n%s\n", headline(o))
		tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
		for _, a := range o.Checklist {
			fmt.Fprintf(tw, "  %s\t%s\t%s\n", a.Question, a.Answer, a.Summary)
			for i, e := range a.Evidence {
				if i == maxTableEvidence {
					fmt.Fprintf(tw, "  \t\t  ... and %d more (-o json)\n", len(a.Evidence)-i)
					break
				}
				fmt.Fprintf(tw, "  \t\t  - %s\n", e)
			}
		}
		if err := tw.Flush(); err != nil {
			return err
		}
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
	if len(r.Unread) > 0 {
		fmt.Fprintln(out, "\nCould not read (the checks that needed these are unknown; the grades rest on the others):")
		for _, u := range r.Unread {
			fmt.Fprintf(out, "  %s: %s\n", u.Permission(), u.Error)
		}
	}
	fmt.Fprint(out, "\n"+statsNote(r))
	return nil
}

func findingsTable(out io.Writer, fs []Finding) error {
	ps := problems(fs)
	if len(ps) == 0 {
		fmt.Fprintf(out, "  all %d checks passed or do not apply\n", len(fs))
		return nil
	}
	w := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	for _, f := range ps {
		fmt.Fprintf(w, "  %s\t-%d\t%s\t%s\n", f.Result, f.Penalty, checkName(f), f.Message)
	}
	fmt.Fprintf(w, "  (%d other checks passed or do not apply)\n", len(fs)-len(ps))
	return w.Flush()
}

// mdEscape keeps a cell's text from ending the cell or the row.
func mdEscape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", `\|`), "\n", " ")
}

func renderMarkdown(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString("# Operator audit\n\n")
	if n := filterNote(r); n != "" {
		b.WriteString(n + "\n")
	}
	b.WriteString("## Operators\n\n")
	if len(r.Operators) == 0 {
		b.WriteString("No workload found controlling an API group of CRDs, or holding cluster-admin.\n")
	} else {
		b.WriteString("| operator | grade | score | API | RBAC | availability | observability | maintenance | version | groups |\n|---|---|---|---|---|---|---|---|---|---|\n")
		for _, o := range r.Operators {
			fmt.Fprintf(&b, "| %s | **%s** | %d | %s | %d | %d | %d | %d | %s | %s |\n", mdEscape(o.Ref()), o.Grade, o.Scores.Total, scoreText(o, CategoryAPI, o.Scores.API),
				o.Scores.RBAC, o.Scores.Availability, o.Scores.Observability, o.Scores.Maintenance, mdEscape(orDash(o.Version)), mdEscape(groupsText(o, ", ")))
		}
	}
	b.WriteString("\n## API groups\n\n| group | kinds | maturity | API | controller |\n|---|---|---|---|---|\n")
	for _, g := range r.Groups {
		fmt.Fprintf(&b, "| %s | %d | %s | %d | %s |\n", g.Group, len(g.CRDs), maturityText(g), g.APIScore, mdEscape(controllersText(g)))
	}
	findings := func(fs []Finding) {
		ps := problems(fs)
		if len(ps) == 0 {
			fmt.Fprintf(&b, "All %d checks passed or do not apply.\n", len(fs))
			return
		}
		b.WriteString("| result | penalty | check | reason |\n|---|---|---|---|\n")
		for _, f := range ps {
			fmt.Fprintf(&b, "| %s | -%d | `%s` | %s |\n", f.Result, f.Penalty, mdEscape(checkName(f)), mdEscape(f.Message))
		}
		fmt.Fprintf(&b, "\n%d other checks passed or do not apply.\n", len(fs)-len(ps))
	}
	for _, o := range r.Operators {
		fmt.Fprintf(&b, "\n### %s\n\n", mdEscape(headline(o)))
		b.WriteString("| question | answer | why | evidence |\n|---|---|---|---|\n")
		for _, a := range o.Checklist {
			ev := make([]string, len(a.Evidence))
			for i, e := range a.Evidence {
				ev[i] = mdEscape(e)
			}
			fmt.Fprintf(&b, "| %s | **%s** | %s | %s |\n", a.Question, a.Answer, mdEscape(a.Summary), strings.Join(ev, "<br>"))
		}
		b.WriteString("\n")
		findings(o.Findings)
	}
	for _, g := range r.Groups {
		if len(g.Controllers) == 0 {
			fmt.Fprintf(&b, "\n### %s: no controller found (API %d/100)\n\n", g.Group, g.APIScore)
			findings(g.Findings)
		}
	}
	if len(r.Unread) > 0 {
		b.WriteString("\n## Could not read\n\nThe checks that needed these are unknown; the grades rest on the others.\n\n")
		for _, u := range r.Unread {
			fmt.Fprintf(&b, "- %s: %s\n", mdEscape(u.Permission()), mdEscape(u.Error))
		}
	}
	b.WriteString("\n" + statsNote(r))
	_, err := io.WriteString(w, b.String())
	return err
}
