package audit

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Weights of the categories in an operator's total score, out of 100 (docs/audit.md
// says why). RBAC weighs most: with cluster-admin (RBAC 0) an operator scores 65 at
// best, a D, however good the rest.
const (
	WeightAPI           = 20
	WeightRBAC          = 35
	WeightAvailability  = 20
	WeightObservability = 15
	WeightMaintenance   = 10
)

// Options narrow what an audit reports.
type Options struct {
	// Groups limits the report to these API groups and the operators that control
	// them (and to workloads that hold cluster-admin and that nothing ties to a group);
	// empty reports every group. Grades do not depend on it: an operator is graded on
	// every group it controls.
	Groups []string
}

// Grade turns a score into a letter: A from 90, B from 80, C from 70, D from 60, F
// below.
func Grade(total int) string {
	switch {
	case total >= 90:
		return "A"
	case total >= 80:
		return "B"
	case total >= 70:
		return "C"
	case total >= 60:
		return "D"
	}
	return "F"
}

// MissingGroups checks the groups of a --group against the snapshot's CRDs and
// returns an error naming those that no CRD has (with the closest that exists), so
// that a mistyped group is not mistaken for a group without operators.
func MissingGroups(s *Snapshot, groups []string) error {
	have, _ := crdsByGroup(s.CRDs)
	var missing []string
	for _, g := range groups {
		if slices.Contains(have, g) {
			continue
		}
		m := fmt.Sprintf("%q", g)
		if near := closest(g, have); near != "" {
			m += fmt.Sprintf(" (did you mean %s?)", near)
		}
		missing = append(missing, m)
	}
	if len(missing) == 0 {
		return nil
	}
	return fmt.Errorf("--group: no CustomResourceDefinition in API group %s", strings.Join(missing, ", "))
}

// closest returns the name of have nearest to g by edit distance, when it is near
// enough to be a typo (a quarter of its length, at least 2), or one contains the other.
func closest(g string, have []string) string {
	best, bestD := "", math.MaxInt
	for _, h := range have {
		d := editDistance(g, h)
		if strings.Contains(h, g) || strings.Contains(g, h) {
			d = min(d, 1)
		}
		if d < bestD {
			best, bestD = h, d
		}
	}
	if bestD <= max(2, len(g)/4) {
		return best
	}
	return ""
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur := make([]int, len(b)+1)
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev = cur
	}
	return prev[len(b)]
}

// Audit grades the operators and API groups of a snapshot. It is a pure function of it.
func Audit(s *Snapshot, opts Options) Report {
	d := discover(s)
	report := Report{Filter: opts.Groups, Groups: []Group{}, Operators: []Operator{}, Unread: s.Unread,
		Stats: Stats{CRDs: len(s.CRDs), Workloads: len(d.ws)}}
	shown := func(g string) bool { return len(opts.Groups) == 0 || slices.Contains(opts.Groups, g) }

	groups := map[string]Group{}
	for _, g := range d.groups {
		crds := d.by[g]
		grp := Group{Group: g, Controllers: orEmpty(d.controllers[g]), Writers: orEmpty(d.writers[g]), Evidence: d.evidence[g]}
		if grp.Evidence == nil {
			grp.Evidence = []Control{}
		}
		for i := range crds {
			c := summarizeCRD(&crds[i])
			c.ControlledBy = orEmpty(d.kindControllers[crds[i].Name])
			grp.CRDs = append(grp.CRDs, c)
		}
		markUserWritten(g, crds, grp.CRDs, s.ClusterRoles)
		grp.Maturity = groupMaturity(grp.CRDs)
		grp.Findings = groupAPIFindings(g, crds, grp.CRDs)
		grp.APIScore = score(grp.Findings)
		groups[g] = grp
		if shown(g) {
			report.Groups = append(report.Groups, grp)
		}
	}

	for _, i := range d.operatorIndexes() {
		own := d.own[i]
		if len(opts.Groups) > 0 && !slices.ContainsFunc(own, shown) && (len(own) > 0 || !d.clusterAdmin[i]) {
			continue
		}
		report.Operators = append(report.Operators, gradeOperator(d.ws[i], own, d.clusterAdmin[i], groups, s))
	}
	return report
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// gradeOperator grades one operator on every group it controls.
func gradeOperator(w workload, own []string, clusterAdmin bool, groups map[string]Group, s *Snapshot) Operator {
	op := Operator{Kind: w.kind, Namespace: w.namespace, Name: w.name, ServiceAccount: w.namespace + "/" + w.serviceAccount,
		Replicas: w.replicas, Groups: orEmpty(own), ClusterAdmin: clusterAdmin}
	op.Version, _ = versionOf(w)
	var api []Finding
	op.Scores.API = 100
	for _, g := range own {
		api = append(api, groups[g].Findings...)
		// An operator's API is as good as its weakest group's.
		op.Scores.API = min(op.Scores.API, groups[g].APIScore)
	}
	rbac := rbacFindings(w, own)
	avail := availabilityFindings(w, s)
	obs := observabilityFindings(w, s)
	maint := maintenanceFindings(w)
	op.Scores.RBAC, op.Scores.Availability, op.Scores.Observability, op.Scores.Maintenance = score(rbac), score(avail), score(obs), score(maint)
	weighted := []struct {
		category string
		weight   int
		score    int
		graded   bool
	}{
		{CategoryAPI, WeightAPI, op.Scores.API, len(own) > 0},
		{CategoryRBAC, WeightRBAC, op.Scores.RBAC, true},
		{CategoryAvailability, WeightAvailability, op.Scores.Availability, true},
		{CategoryObservability, WeightObservability, op.Scores.Observability, true},
		{CategoryMaintenance, WeightMaintenance, op.Scores.Maintenance, true},
	}
	sum, weights := 0, 0
	for _, c := range weighted {
		if !c.graded {
			op.Ungraded = append(op.Ungraded, c.category)
			continue
		}
		sum += c.weight * c.score
		weights += c.weight
	}
	if len(own) == 0 {
		op.Scores.API = 0 // not graded: nothing ties it to a group
	}
	op.Scores.Total = int(math.Round(float64(sum) / float64(weights)))
	op.Grade = Grade(op.Scores.Total)
	for _, fs := range [][]Finding{api, rbac, avail, obs, maint} {
		op.Findings = append(op.Findings, fs...)
	}
	for _, f := range op.Findings {
		if f.Result == Unknown {
			op.Unknown = append(op.Unknown, f.Check)
		}
	}
	op.Checklist = checklist(op, w, groups)
	return op
}

// score is 100 less the penalties, never below 0.
func score(findings []Finding) int {
	s := 100
	for _, f := range findings {
		s -= f.Penalty
	}
	return max(s, 0)
}
