package judge

import (
	"math"
	"math/rand/v2"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

// The p-values are checked against references computed independently: R's
// wilcox.test documentation example (W = 35, p = 0.1272), and a brute-force
// enumeration of all arrangements and the textbook tie-corrected formula, by hand.
func TestMannWhitneyAgainstReferences(t *testing.T) {
	tests := []struct {
		name      string
		x, y      []float64
		wantU     float64
		wantP     float64
		wantExact bool
	}{
		{
			// R: x <- c(0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46);
			// y <- c(1.15, 0.88, 0.90, 0.74, 1.21); wilcox.test(x, y, alternative = "g")
			// gives W = 35, p-value = 0.1272 (exact: 382/3003 arrangements).
			name:  "R documentation example",
			x:     []float64{0.80, 0.83, 1.89, 1.04, 1.45, 1.38, 1.91, 1.64, 0.73, 1.46},
			y:     []float64{1.15, 0.88, 0.90, 0.74, 1.21},
			wantU: 35, wantP: 0.1272061272, wantExact: true,
		},
		{
			// Every x above every y: only 1 of C(10,5) = 252 arrangements is as extreme.
			name:  "complete separation",
			x:     []float64{6, 7, 8, 9, 10},
			y:     []float64{1, 2, 3, 4, 5},
			wantU: 25, wantP: 1.0 / 252, wantExact: true,
		},
		{
			name:  "x below y: p near 1",
			x:     []float64{1, 2, 3, 4, 5},
			y:     []float64{6, 7, 8, 9, 10},
			wantU: 0, wantP: 1, wantExact: true,
		},
		{
			// Ties: U = 47; tie term 786 (nine 0s, four 1s, one 2, two 3s: 720+60+0+6);
			// var = 8·8/12·(17 − 786/240) = 73.2; z = (47 − 32 − 0.5)/√73.2 = 1.69478;
			// p = 1 − Φ(z) = 0.045059. (R: wilcox.test(x, y, "g", exact = FALSE).)
			name:  "ties: normal approximation with tie and continuity corrections",
			x:     []float64{0, 0, 0, 1, 1, 2, 3, 3},
			y:     []float64{0, 0, 0, 0, 0, 1, 0, 1},
			wantU: 47, wantP: 0.0450589031, wantExact: false,
		},
		{
			name:  "all values equal: no evidence",
			x:     []float64{0, 0, 0, 0},
			y:     []float64{0, 0, 0, 0},
			wantU: 8, wantP: 1, wantExact: false,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := MannWhitneyGreater(tt.x, tt.y)
			if got.U != tt.wantU || !near(got.P, tt.wantP, 1e-8) || got.Exact != tt.wantExact {
				t.Errorf("got U=%v p=%.10f exact=%v, want U=%v p=%.10f exact=%v", got.U, got.P, got.Exact, tt.wantU, tt.wantP, tt.wantExact)
			}
		})
	}
}

// Beyond the exact limit the normal approximation is used; it agrees with the exact
// distribution's tail at the limit.
func TestNormalApproximationCloseToExactAtTheLimit(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	x, y := make([]float64, exactLimit), make([]float64, exactLimit)
	for i := range x {
		x[i] = rng.NormFloat64() + 0.5
		y[i] = rng.NormFloat64()
	}
	exact := MannWhitneyGreater(x, y)
	if !exact.Exact {
		t.Fatal("expected the exact test at the limit")
	}
	bigger := MannWhitneyGreater(append(x, 100), y) // 26 values: approximation
	if bigger.Exact {
		t.Fatal("expected the approximation above the limit")
	}
	// Approximation of the same data, computed from U directly.
	n1, n2 := float64(len(x)), float64(len(y))
	z := (exact.U - n1*n2/2 - 0.5) / math.Sqrt(n1*n2*(n1+n2+1)/12)
	if approx := normalUpperTail(z); !near(approx, exact.P, 0.01) {
		t.Errorf("exact p=%v, approximation %v", exact.P, approx)
	}
}

func TestHodgesLehmann(t *testing.T) {
	// Differences of {3, 5} and {1, 2}: 2, 1, 4, 3 → median 2.5.
	if got := HodgesLehmann([]float64{3, 5}, []float64{1, 2}); got != 2.5 {
		t.Errorf("HL = %v, want 2.5", got)
	}
	// A pure shift is recovered exactly.
	y := []float64{1, 4, 2, 8, 5, 7}
	x := make([]float64, len(y))
	for i := range y {
		x[i] = y[i] + 3
	}
	if got := HodgesLehmann(x, y); got != 3 {
		t.Errorf("HL of a shift by 3 = %v", got)
	}
}

func samples(rng *rand.Rand, n int, mean, sd float64) []float64 {
	out := make([]float64, n)
	for i := range out {
		out[i] = mean + sd*rng.NormFloat64()
	}
	return out
}

func TestCompare(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	latency := BaselineRule{HigherIsWorse: true, MaxRelativeShift: 0.1, Alpha: 0.05}
	tests := []struct {
		name         string
		canary, base []float64
		rule         BaselineRule
		minSamples   int
		want         Verdict
	}{
		{"identical distributions pass", samples(rng, 30, 100, 5), samples(rng, 30, 100, 5), latency, 10, Pass},
		{"the very same samples pass", []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, latency, 10, Pass},
		// 100 ms baseline, allowed 10%: a 30 ms shift is beyond it.
		{"shifted by 30% fails", samples(rng, 30, 130, 5), samples(rng, 30, 100, 5), latency, 10, Fail},
		// Significant (n is large) but within the allowed 10%: passes.
		{"shifted by 3% passes: within the allowed effect", samples(rng, 200, 103, 2), samples(rng, 200, 100, 2), latency, 10, Pass},
		{"better is never worse", samples(rng, 30, 70, 5), samples(rng, 30, 100, 5), latency, 10, Pass},
		{"lower is worse: a drop fails", samples(rng, 30, 0.7, 0.02), samples(rng, 30, 0.99, 0.005),
			BaselineRule{MaxRelativeShift: 0.05, Alpha: 0.05}, 10, Fail},
		{"lower is worse: a rise passes", samples(rng, 30, 0.999, 0.0005), samples(rng, 30, 0.99, 0.005),
			BaselineRule{MaxRelativeShift: 0.05, Alpha: 0.05}, 10, Pass},
		{"error rate from a zero baseline fails past the absolute margin",
			[]float64{0.2, 0.25, 0.18, 0.22, 0.3, 0.21, 0.19, 0.24, 0.2, 0.23},
			[]float64{0, 0, 0, 0.01, 0, 0, 0, 0, 0.01, 0},
			BaselineRule{HigherIsWorse: true, MaxRelativeShift: 0.1, MaxAbsoluteShift: 0.01, Alpha: 0.05}, 10, Fail},
		// Three samples a side cannot reach p < 0.05 (the smallest exact p is 1/20).
		{"worse but too few samples to be significant is inconclusive", []float64{130, 131, 132}, []float64{100, 101, 102}, latency, 3, Inconclusive},
		{"too few canary samples are inconclusive", samples(rng, 5, 130, 5), samples(rng, 30, 100, 5), latency, 10, Inconclusive},
		{"too few baseline samples are inconclusive", samples(rng, 30, 130, 5), samples(rng, 9, 100, 5), latency, 10, Inconclusive},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Compare(tt.canary, tt.base, tt.rule, tt.minSamples)
			if got.Verdict != tt.want {
				t.Errorf("verdict %s, want %s (%s; U=%v p=%v effect=%v allowed=%v)", got.Verdict, tt.want, got.Reason, got.U, got.P, got.Effect, got.Allowed)
			}
			if got.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}

// The stated effect size is the boundary: with the same noise, a shift just inside it
// passes and one just beyond it fails.
func TestCompareFailsAtTheStatedEffectSize(t *testing.T) {
	base := make([]float64, 40)
	for i := range base {
		base[i] = 100 + float64(i%10) // median 104.5, spread 0..9
	}
	rule := BaselineRule{HigherIsWorse: true, MaxRelativeShift: 0.2, Alpha: 0.05} // allowed 20.9
	shifted := func(by float64) []float64 {
		out := make([]float64, len(base))
		for i := range base {
			out[i] = base[i] + by
		}
		return out
	}
	if r := Compare(shifted(20), base, rule, 10); r.Verdict != Pass || r.Effect != 20 {
		t.Errorf("shift 20 (allowed %v): %s, effect %v: %s", r.Allowed, r.Verdict, r.Effect, r.Reason)
	}
	if r := Compare(shifted(22), base, rule, 10); r.Verdict != Fail || r.Effect != 22 {
		t.Errorf("shift 22 (allowed %v): %s, effect %v: %s", r.Allowed, r.Verdict, r.Effect, r.Reason)
	}
}

func TestThreshold(t *testing.T) {
	maxErr := 0.01
	minRate := 0.95
	tests := []struct {
		name   string
		canary []float64
		rule   ThresholdRule
		want   Verdict
	}{
		{"below max passes", []float64{0, 0.005, 0.01, 0, 0}, ThresholdRule{Max: &maxErr}, Pass},
		{"mean above max fails", []float64{0, 0.05, 0.01, 0, 0}, ThresholdRule{Max: &maxErr}, Fail},
		{"mean below min fails", []float64{0.9, 0.91, 0.99, 0.9, 0.9}, ThresholdRule{Min: &minRate}, Fail},
		{"too few samples are inconclusive", []float64{0.5, 0.5}, ThresholdRule{Max: &maxErr}, Inconclusive},
	}
	for _, tt := range tests {
		if got := Threshold(tt.canary, tt.rule, 3); got.Verdict != tt.want {
			t.Errorf("%s: %s (%s), want %s", tt.name, got.Verdict, got.Reason, tt.want)
		}
	}
}

func TestCleanDropsNaNAndInfinities(t *testing.T) {
	got := Clean([]float64{1, math.NaN(), math.Inf(1), 2, math.Inf(-1)})
	if len(got) != 2 || got[0] != 1 || got[1] != 2 {
		t.Errorf("Clean = %v", got)
	}
	if s := Summarize(nil); s.Count != 0 || !math.IsNaN(s.Mean) {
		t.Errorf("Summarize(nil) = %+v", s)
	}
}
