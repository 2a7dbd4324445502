package controller

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// maxComplexity is the highest cyclomatic complexity (1 + each if, for, case and
// && or ||) a function under internal/controller may have. Past it, a reconcile step
// is split into named phases; the functions over it today are listed in
// kitExceptions with the issue that splits them.
const maxComplexity = 40

// The rules that TestTheKitIsTheOnlyWay enforces on the controllers' production code.
const (
	ruleStatusWrite = "status-write" // .Status().Update/Patch/Apply: the kit's PatchStatus keeps the optimistic lock
	ruleCondition   = "condition"    // meta.SetStatusCondition/RemoveStatusCondition: kit.Conditions stamps the generation and bounds the message
	ruleWallClock   = "wall-clock"   // time.Now/Since/Until: kit.Deps.Clock, so that tests move time
	ruleSleep       = "sleep"        // time.Sleep/After/NewTimer/Tick/NewTicker/AfterFunc: requeue through the kit instead of blocking a worker
	ruleComplexity  = "complexity"   // over maxComplexity
)

// kitExceptions are the places allowed to break a rule today, by "file function
// rule", each with why. The list is exact: a new violation fails the test, and so
// does an entry whose violation is gone (delete it), so it only shrinks.
var kitExceptions = map[string]string{
	// Elapsed time for a metric or a record is measured on the wall clock on purpose:
	// a fake clock would report how far a test moved time, not how long it took.
	"data/backupverification/restore.go restore wall-clock":                  "measures the restore's duration",
	"delivery/canary/prometheus.go (*promServer).get wall-clock":             "measures a query's latency",
	"fleet/placement/controller.go (*Reconciler).Reconcile wall-clock":       "measures the placement latency metric",
	"fleet/placement/members.go (*memberSyncer).next wall-clock":             "measures the member sync metric",
	"policy/imagescan/controller.go (*Scanner).scan wall-clock":              "measures the scan duration metric",
	"policy/labelpolicy/controller.go (*Reconciler).Reconcile wall-clock":    "measures the audit duration metric",
	"secrets/secretrotation/metrics.go (*sinceCollector).Collect wall-clock": "a metric's age at scrape time",
	"policy/labelpolicy/controller.go (*Reconciler).now wall-clock":          "the fallback when no clock is injected",
	"power/sleepschedule/writes.go (*writePool).afterWrites sleep":           "bounds how long a batch of writes waits for its last answers",
	"data/devdatabase/protection.go (protectionInstaller).Start sleep":       "a runnable's retry loop, not a reconcile",
	"policy/labelpolicy/mode.go (*discoveryWatcher).Start sleep":             "a runnable's discovery poll, not a reconcile",
	"policy/imagescan/controller.go (*Scanner).Start sleep":                  "the scanner's queue loop, a runnable by design (see Scanner)",
}

func TestTheKitIsTheOnlyWay(t *testing.T) {
	var found []string
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// Test-support packages (labelpolicytest, ...) are not controllers.
		if d.IsDir() && path != "." && strings.HasSuffix(d.Name(), "test") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		// This package only lists the controllers.
		if filepath.Dir(path) == "." {
			return nil
		}
		fs, err := kitViolations(path)
		found = append(found, fs...)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) == 0 {
		t.Fatal("no violation found anywhere, not even the listed exceptions: is the test run from internal/controller?")
	}
	seen := map[string]bool{}
	for _, f := range found {
		key := f[:strings.LastIndex(f, " at ")]
		seen[key] = true
		if _, ok := kitExceptions[key]; !ok {
			t.Errorf("%s: write it through the kit (internal/kit; CONTRIBUTING.md), or split the function", f)
		}
	}
	for _, key := range slices.Sorted(maps.Keys(kitExceptions)) {
		if !seen[key] {
			t.Errorf("%q is listed in kitExceptions but no longer breaks its rule: delete the entry", key)
		}
	}
}

// kitViolations parses one file and returns "file function rule at line" for each
// rule it breaks.
func kitViolations(path string) ([]string, error) {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	imports := map[string]string{} // local name -> import path
	for _, im := range f.Imports {
		p, _ := strconv.Unquote(im.Path.Value)
		name := p[strings.LastIndex(p, "/")+1:]
		if im.Name != nil {
			name = im.Name.Name
		}
		imports[name] = p
	}
	var out []string
	report := func(fn string, n ast.Node, rule string) {
		out = append(out, fmt.Sprintf("%s %s %s at line %d", filepath.ToSlash(path), fn, rule, fset.Position(n.Pos()).Line))
	}
	for _, decl := range f.Decls {
		fn := "(package level)"
		var body ast.Node = decl
		if fd, ok := decl.(*ast.FuncDecl); ok {
			fn = funcName(fd)
			if fd.Body == nil {
				continue
			}
			body = fd.Body
			if c := complexity(fd.Body); c > maxComplexity {
				report(fn, fd, ruleComplexity)
			}
		}
		ast.Inspect(body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if rule := callRule(sel, imports); rule != "" {
				report(fn, call, rule)
			}
			return true
		})
	}
	return out, nil
}

// callRule is the rule that a call of sel breaks, or "".
func callRule(sel *ast.SelectorExpr, imports map[string]string) string {
	switch sel.Sel.Name {
	case "Update", "Patch", "Apply":
		if inner, ok := sel.X.(*ast.CallExpr); ok && len(inner.Args) == 0 {
			if s, ok := inner.Fun.(*ast.SelectorExpr); ok && s.Sel.Name == "Status" {
				return ruleStatusWrite
			}
		}
	}
	pkg, ok := sel.X.(*ast.Ident)
	if !ok {
		return ""
	}
	switch imports[pkg.Name] {
	case "k8s.io/apimachinery/pkg/api/meta":
		if sel.Sel.Name == "SetStatusCondition" || sel.Sel.Name == "RemoveStatusCondition" {
			return ruleCondition
		}
	case "time":
		switch sel.Sel.Name {
		case "Now", "Since", "Until":
			return ruleWallClock
		case "Sleep", "After", "NewTimer", "Tick", "NewTicker", "AfterFunc":
			return ruleSleep
		}
	}
	return ""
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := ""
	if s, ok := t.(*ast.StarExpr); ok {
		star, t = "*", s.X
	}
	if g, ok := t.(*ast.IndexExpr); ok {
		t = g.X
	}
	if g, ok := t.(*ast.IndexListExpr); ok {
		t = g.X
	}
	name := "?"
	if id, ok := t.(*ast.Ident); ok {
		name = id.Name
	}
	return "(" + star + name + ")." + fd.Name.Name
}

// complexity is gocyclo's count: 1, plus one for each if, for, range, non-default
// case and select case, && and ||, function literals included.
func complexity(body ast.Node) int {
	c := 1
	ast.Inspect(body, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil {
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil {
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
