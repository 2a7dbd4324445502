package judge

import (
	"fmt"
	"math"
	"slices"
	"strconv"
)

// Verdict is the outcome of judging one metric.
type Verdict string

// Values of Verdict.
const (
	Pass         Verdict = "Pass"
	Fail         Verdict = "Fail"
	Inconclusive Verdict = "Inconclusive"
)

// Summary describes one sample.
type Summary struct {
	Count                  int
	Mean, Median, Min, Max float64
}

// Summarize describes values (it does not change them).
func Summarize(values []float64) Summary {
	s := Summary{Count: len(values), Mean: math.NaN(), Median: math.NaN(), Min: math.NaN(), Max: math.NaN()}
	if len(values) == 0 {
		return s
	}
	sorted := slices.Clone(values)
	s.Median = Median(sorted)
	s.Min, s.Max = sorted[0], sorted[len(sorted)-1]
	var sum float64
	for _, v := range values {
		sum += v
	}
	s.Mean = sum / float64(len(values))
	return s
}

// Result is how one metric was judged.
type Result struct {
	Verdict Verdict
	// Canary and Baseline summarise the samples (Baseline is zero for a threshold).
	Canary, Baseline Summary
	// Tested says whether the fields of the Mann-Whitney test below are set.
	Tested bool
	// U is the Mann-Whitney statistic of the canary (pairs in which the canary's
	// value is the greater, ties counting one half).
	U float64
	// P is the one-sided p-value of "the canary is worse".
	P float64
	// Exact says whether P is exact (small samples without ties).
	Exact bool
	// Effect is the Hodges-Lehmann shift of the canary from the baseline, in the worse
	// direction (positive: worse).
	Effect float64
	// Allowed is the largest effect accepted.
	Allowed float64
	// Reason says why, in words.
	Reason string
}

// ThresholdRule bounds the mean of the canary's samples; nil means unbounded.
type ThresholdRule struct {
	Min, Max *float64
}

// BaselineRule compares the canary with the baseline.
type BaselineRule struct {
	// HigherIsWorse: higher values (errors, latency) are worse; else lower ones are.
	HigherIsWorse bool
	// MaxRelativeShift is the allowed shift as a fraction of |baseline median|.
	MaxRelativeShift float64
	// MaxAbsoluteShift is the allowed shift in the metric's unit.
	MaxAbsoluteShift float64
	// Alpha is the significance level.
	Alpha float64
}

// Clean drops the values that are not samples: NaN (such as an error ratio over no
// requests) and infinities.
func Clean(values []float64) []float64 {
	out := make([]float64, 0, len(values))
	for _, v := range values {
		if !math.IsNaN(v) && !math.IsInf(v, 0) {
			out = append(out, v)
		}
	}
	return out
}

// Threshold judges the mean of the canary's samples against rule. Fewer than
// minSamples samples are inconclusive, never a pass.
func Threshold(canary []float64, rule ThresholdRule, minSamples int) Result {
	r := Result{Canary: Summarize(canary)}
	if len(canary) < minSamples {
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("the canary has %d samples, %d needed", len(canary), minSamples)
		return r
	}
	mean := r.Canary.Mean
	switch {
	case rule.Max != nil && mean > *rule.Max:
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("canary mean %s is above the maximum %s", Format(mean), Format(*rule.Max))
	case rule.Min != nil && mean < *rule.Min:
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("canary mean %s is below the minimum %s", Format(mean), Format(*rule.Min))
	default:
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("canary mean %s is within the threshold", Format(mean))
	}
	return r
}

// Compare judges the canary against the baseline by the size of the difference (the
// Hodges-Lehmann shift, in the worse direction) and its significance (one-sided
// Mann-Whitney U):
//
//   - a shift within the allowed effect, max(MaxAbsoluteShift, MaxRelativeShift ×
//     |baseline median|), passes;
//   - a larger shift with p < Alpha fails;
//   - a larger shift without significance is inconclusive: small samples cannot tell
//     it from chance, and a pass would be a guess.
//
// Either side with fewer than minSamples samples is inconclusive, never a pass.
func Compare(canary, baseline []float64, rule BaselineRule, minSamples int) Result {
	r := Result{Canary: Summarize(canary), Baseline: Summarize(baseline)}
	if len(canary) < minSamples || len(baseline) < minSamples {
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("the canary has %d samples and the primary %d, %d each needed", len(canary), len(baseline), minSamples)
		return r
	}
	r.Tested = true
	var test UTest
	if rule.HigherIsWorse {
		test = MannWhitneyGreater(canary, baseline)
		r.U = test.U
		r.Effect = HodgesLehmann(canary, baseline)
	} else {
		test = MannWhitneyGreater(baseline, canary)
		r.U = float64(len(canary)*len(baseline)) - test.U
		r.Effect = HodgesLehmann(baseline, canary)
	}
	r.P, r.Exact = test.P, test.Exact
	r.Allowed = math.Max(rule.MaxAbsoluteShift, rule.MaxRelativeShift*math.Abs(r.Baseline.Median))
	significant := r.P < rule.Alpha
	switch {
	case r.Effect <= r.Allowed:
		r.Verdict = Pass
		r.Reason = fmt.Sprintf("within the allowed shift: %s ≤ %s (p = %s)", Format(r.Effect), Format(r.Allowed), Format(r.P))
	case significant:
		r.Verdict = Fail
		r.Reason = fmt.Sprintf("the canary is worse than the primary: shift %s beyond the allowed %s, p = %s < %s",
			Format(r.Effect), Format(r.Allowed), Format(r.P), Format(rule.Alpha))
	default:
		// It looks worse, but the samples cannot tell it from chance: more are needed,
		// which a longer window gives. Not a pass.
		r.Verdict = Inconclusive
		r.Reason = fmt.Sprintf("the canary looks worse (shift %s beyond the allowed %s) but not significantly: p = %s ≥ %s",
			Format(r.Effect), Format(r.Allowed), Format(r.P), Format(rule.Alpha))
	}
	return r
}

// Format writes a number compactly for a person: 4 significant digits.
func Format(v float64) string {
	if math.IsNaN(v) {
		return "NaN"
	}
	return strconv.FormatFloat(v, 'g', 4, 64)
}
