package audit

import (
	"math"
	"slices"
)

// Weights of the categories in an operator's total score, out of 100 (docs/audit.md
// says why RBAC weighs most).
const (
	WeightAPI           = 25
	WeightRBAC          = 35
	WeightAvailability  = 25
	WeightObservability = 15
)

// Options narrow an audit.
type Options struct {
	// Groups limits the audit to these API groups and the operators that control
	// them; empty audits every group.
	Groups []string
}

// Grade turns a total score into a letter: A from 90, B from 80, C from 70, D from
// 60, F below.
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

// Audit grades the operators and API groups of a snapshot. It is a pure function of it.
func Audit(s *Snapshot, opts Options) Report {
	idx := newRBACIndex(s)
	ws := workloads(s, idx)
	names, by := crdsByGroup(s.CRDs)
	if len(opts.Groups) > 0 {
		names = slices.DeleteFunc(names, func(g string) bool { return !slices.Contains(opts.Groups, g) })
	}

	report := Report{Groups: []Group{}, Operators: []Operator{}}
	controlled := make([][]string, len(ws)) // the groups each workload controls
	apiScores := map[string]int{}
	apiFindings := map[string][]Finding{}
	for _, g := range names {
		crds := by[g]
		grp := Group{Group: g, Controllers: []string{}, Writers: []string{}}
		for i := range crds {
			grp.CRDs = append(grp.CRDs, summarizeCRD(&crds[i]))
		}
		grp.Maturity = groupMaturity(grp.CRDs)
		grp.Findings = groupAPIFindings(g, crds, grp.CRDs)
		grp.APIScore = score(grp.Findings)
		for i, w := range ws {
			switch evidenceFor(w, crds) {
			case controlsGroup:
				grp.Controllers = append(grp.Controllers, w.ref())
				controlled[i] = append(controlled[i], g)
			case writesResources:
				grp.Writers = append(grp.Writers, w.ref())
			case throughWildcard:
				grp.Writers = append(grp.Writers, w.ref()+" (through a wildcard)")
			}
		}
		apiScores[g], apiFindings[g] = grp.APIScore, grp.Findings
		report.Groups = append(report.Groups, grp)
	}

	for i, w := range ws {
		own := controlled[i]
		if len(own) == 0 {
			continue
		}
		op := Operator{Kind: w.kind, Namespace: w.namespace, Name: w.name, ServiceAccount: w.namespace + "/" + w.serviceAccount, Replicas: w.replicas, Groups: own}
		// An operator's API is as good as its weakest group's.
		op.Scores.API = 100
		for _, g := range own {
			op.Findings = append(op.Findings, apiFindings[g]...)
			op.Scores.API = min(op.Scores.API, apiScores[g])
		}
		rbac := rbacFindings(w, own)
		avail := availabilityFindings(w, s)
		obs := observabilityFindings(w, s)
		op.Findings = append(op.Findings, rbac...)
		op.Findings = append(op.Findings, avail...)
		op.Findings = append(op.Findings, obs...)
		op.Scores.RBAC, op.Scores.Availability, op.Scores.Observability = score(rbac), score(avail), score(obs)
		op.Scores.Total = int(math.Round(float64(WeightAPI*op.Scores.API+WeightRBAC*op.Scores.RBAC+
			WeightAvailability*op.Scores.Availability+WeightObservability*op.Scores.Observability) / 100))
		op.Grade = Grade(op.Scores.Total)
		report.Operators = append(report.Operators, op)
	}
	return report
}
