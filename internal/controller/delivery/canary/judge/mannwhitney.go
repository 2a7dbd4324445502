// Package judge holds the statistics of canary analysis: the Mann-Whitney U test
// (exact for small samples without ties, tie-corrected normal approximation
// otherwise), the Hodges-Lehmann estimate of the shift between two samples, and the
// verdicts built on them. It is pure: values in, values out.
package judge

import (
	"math"
	"slices"
)

// exactLimit is the largest sample size (each side) for which the exact distribution
// of U is computed; beyond it, or with ties, the normal approximation is close enough
// and the exact table grows as n1·n2·(n1+n2).
const exactLimit = 25

// UTest is the result of a one-sided Mann-Whitney U test of "x tends to be greater
// than y".
type UTest struct {
	// U is the Mann-Whitney statistic of x: the number of pairs (xi, yj) with xi > yj,
	// ties counting one half.
	U float64
	// P is the one-sided p-value of U under the hypothesis that x and y come from one
	// distribution.
	P float64
	// Exact says whether P comes from the exact distribution of U (small samples
	// without ties) rather than the normal approximation.
	Exact bool
	// Z is the normal approximation's z-score (with tie and continuity corrections);
	// zero when Exact.
	Z float64
}

// MannWhitneyGreater tests whether x is stochastically greater than y. Both need at
// least one value; NaNs must have been removed by the caller.
func MannWhitneyGreater(x, y []float64) UTest {
	n1, n2 := len(x), len(y)
	if n1 == 0 || n2 == 0 {
		return UTest{P: 1}
	}
	ranks, tieTerm := rank(x, y)
	var r1 float64
	for i := range n1 {
		r1 += ranks[i]
	}
	u := r1 - float64(n1*(n1+1))/2
	if tieTerm == 0 && n1 <= exactLimit && n2 <= exactLimit {
		return UTest{U: u, P: exactUpperTail(n1, n2, u), Exact: true}
	}
	fn1, fn2 := float64(n1), float64(n2)
	n := fn1 + fn2
	mean := fn1 * fn2 / 2
	// The variance of U with ties (Lehmann): the tie term is sum(t^3 - t) over groups
	// of t equal values.
	variance := fn1 * fn2 / 12 * ((n + 1) - tieTerm/(n*(n-1)))
	if variance <= 0 {
		// Every value is the same: no evidence either way.
		return UTest{U: u, P: 1}
	}
	// Continuity correction towards the mean: U moves in steps of one half with ties.
	z := (u - mean - 0.5) / math.Sqrt(variance)
	return UTest{U: u, P: normalUpperTail(z), Z: z}
}

// rank returns the mid-ranks (1-based) of x followed by y in their pooled order, and
// the tie term sum(t^3 - t) over groups of t equal values.
func rank(x, y []float64) (ranks []float64, tieTerm float64) {
	n := len(x) + len(y)
	type item struct {
		v float64
		i int
	}
	items := make([]item, 0, n)
	for i, v := range x {
		items = append(items, item{v, i})
	}
	for i, v := range y {
		items = append(items, item{v, len(x) + i})
	}
	slices.SortFunc(items, func(a, b item) int {
		switch {
		case a.v < b.v:
			return -1
		case a.v > b.v:
			return 1
		}
		return 0
	})
	ranks = make([]float64, n)
	for start := 0; start < n; {
		end := start + 1
		for end < n && items[end].v == items[start].v {
			end++
		}
		// Positions start..end-1 hold equal values: each gets the mean of ranks
		// start+1..end.
		mid := float64(start+1+end) / 2
		for k := start; k < end; k++ {
			ranks[items[k].i] = mid
		}
		if t := float64(end - start); t > 1 {
			tieTerm += t*t*t - t
		}
		start = end
	}
	return ranks, tieTerm
}

// exactUpperTail is P(U >= u) for samples of sizes n1 and n2 without ties. Of the
// arrangements of m x's and n y's, the largest value is an x with probability
// m/(m+n), adding n to U, and a y otherwise, adding nothing:
//
//	P[m,n](v) = m/(m+n)·P[m-1,n](v-n) + n/(m+n)·P[m,n-1](v)
//
// computed one n at a time as probabilities (no counts to overflow), in two reused
// tables of (n1+1)·(n1·n2+1) values.
func exactUpperTail(n1, n2 int, u float64) float64 {
	maxU := n1 * n2
	table := func() [][]float64 {
		t := make([][]float64, n1+1)
		for m := range t {
			t[m] = make([]float64, maxU+1)
		}
		return t
	}
	prev, cur := table(), table()
	// n = 0: U is 0 with certainty for every m.
	for m := 0; m <= n1; m++ {
		prev[m][0] = 1
	}
	for n := 1; n <= n2; n++ {
		cur[0][0] = 1 // m = 0: U is 0
		for m := 1; m <= n1; m++ {
			pm := float64(m) / float64(m+n)
			pn := float64(n) / float64(m+n)
			for v := 0; v <= m*n; v++ {
				p := pn * prev[m][v]
				if v >= n {
					p += pm * cur[m-1][v-n]
				}
				cur[m][v] = p
			}
		}
		prev, cur = cur, prev
	}
	dist := prev[n1]
	var tail float64
	for v := max(int(math.Ceil(u-1e-9)), 0); v <= maxU; v++ {
		tail += dist[v]
	}
	return math.Min(1, tail)
}

// normalUpperTail is P(Z >= z) for a standard normal Z.
func normalUpperTail(z float64) float64 {
	return 0.5 * math.Erfc(z/math.Sqrt2)
}

// HodgesLehmann is the Hodges-Lehmann estimate of the shift of x from y: the median of
// all differences xi - yj. Both need at least one value.
func HodgesLehmann(x, y []float64) float64 {
	diffs := make([]float64, 0, len(x)*len(y))
	for _, a := range x {
		for _, b := range y {
			diffs = append(diffs, a-b)
		}
	}
	return Median(diffs)
}

// Median of values (which it sorts); NaN for none.
func Median(values []float64) float64 {
	n := len(values)
	if n == 0 {
		return math.NaN()
	}
	slices.Sort(values)
	if n%2 == 1 {
		return values[n/2]
	}
	return (values[n/2-1] + values[n/2]) / 2
}
