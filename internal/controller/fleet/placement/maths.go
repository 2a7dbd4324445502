package placement

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

// member is one chosen cluster as the placement maths sees it.
type member struct {
	// Key is the cluster's ClusterProfile.
	Key    types.NamespacedName
	Labels map[string]string
	Phase  fleetv1alpha1.ClusterPhase
	// Since is when the cluster entered Failed or Returning.
	Since time.Time
	// Capacity is the cluster's spec.capacityProperty in milli-units; CapacityErr says
	// why it has none (not reported, not a quantity) when the policy divides by it.
	Capacity    int64
	CapacityErr string
}

// eligible says whether the cluster gets replicas under Divide: a cluster unhealthy
// for less than unhealthyFor keeps its share (hysteresis); a failed or unreachable
// one gets none.
func (m member) eligible() bool {
	return m.Phase == fleetv1alpha1.ClusterHealthy || m.Phase == fleetv1alpha1.ClusterUnhealthy || m.Phase == fleetv1alpha1.ClusterReturning
}

// health is what the prober last wrote on a ClusterProfile.
type health struct {
	// Known is false when no probe result was written yet.
	Known   bool
	Healthy bool
	// Since is when the condition last changed.
	Since time.Time
}

// phaseOf is a cluster's phase now, from its health, the credentials Orderly holds
// for it and its previous phase (the status is the record of a failover in
// progress). done says the Returning cluster got all of its share back.
func phaseOf(prev fleetv1alpha1.ClusterPhase, prevSince time.Time, h health, reachable bool, now time.Time, unhealthyFor time.Duration) (fleetv1alpha1.ClusterPhase, time.Time) {
	switch {
	case !reachable:
		return fleetv1alpha1.ClusterUnreachable, time.Time{}
	case h.Known && !h.Healthy:
		failAt := h.Since.Add(unhealthyFor)
		if !now.Before(failAt) {
			if prev == fleetv1alpha1.ClusterFailed && !prevSince.IsZero() {
				return fleetv1alpha1.ClusterFailed, prevSince
			}
			return fleetv1alpha1.ClusterFailed, failAt
		}
		if prev == fleetv1alpha1.ClusterFailed {
			// Failed, came back briefly and went down again: still failed.
			return fleetv1alpha1.ClusterFailed, prevSince
		}
		return fleetv1alpha1.ClusterUnhealthy, time.Time{}
	case prev == fleetv1alpha1.ClusterFailed:
		return fleetv1alpha1.ClusterReturning, now
	case prev == fleetv1alpha1.ClusterReturning:
		return fleetv1alpha1.ClusterReturning, prevSince
	}
	return fleetv1alpha1.ClusterHealthy, time.Time{}
}

// allowance is how many replicas of one workload a cluster returning since since
// may run at now: rate at once, rate more each minute.
func allowance(rate int32, since, now time.Time) int32 {
	if rate <= 0 {
		rate = 1
	}
	steps := int64(now.Sub(since)/time.Minute) + 1
	if steps < 1 {
		steps = 1
	}
	a := int64(rate) * steps
	if a > 1<<30 {
		a = 1 << 30
	}
	return int32(a)
}

// nextReturnStep is when the allowance of a cluster returning since since grows next.
func nextReturnStep(since, now time.Time) time.Time {
	steps := now.Sub(since)/time.Minute + 1
	return since.Add(steps * time.Minute)
}

// compareKeys orders clusters by name, then namespace: the order ties are broken in,
// the same as before clusters were told apart by namespace.
func compareKeys(a, b types.NamespacedName) int {
	if c := cmp.Compare(a.Name, b.Name); c != 0 {
		return c
	}
	return cmp.Compare(a.Namespace, b.Namespace)
}

// orderKey is a unit key for one cluster that sorts as compareKeys does ("\x00" is
// below every character of a name).
func orderKey(k types.NamespacedName) string {
	return k.Name + "\x00" + k.Namespace
}

// unit is one share of weight: a named cluster, or the clusters with one label value.
type unit struct {
	key     string
	weight  int64
	members []types.NamespacedName
}

// units groups the eligible clusters by spec's weights. Every cluster counts once:
// a cluster named by a weight is its own unit even when its label value has one.
// A weight names a cluster by name: profiles of that name in several namespaces
// share it as a group.
func units(spec *fleetv1alpha1.PlacementPolicySpec, clusters []member) []unit {
	if spec.CapacityProperty != "" {
		var out []unit
		for _, c := range clusters {
			if c.CapacityErr == "" && c.Capacity > 0 {
				out = append(out, unit{key: "cluster/" + orderKey(c.Key), weight: c.Capacity, members: []types.NamespacedName{c.Key}})
			}
		}
		return out
	}
	if len(spec.Weights) == 0 {
		out := make([]unit, 0, len(clusters))
		for _, c := range clusters {
			out = append(out, unit{key: "cluster/" + orderKey(c.Key), weight: 1, members: []types.NamespacedName{c.Key}})
		}
		return out
	}
	named := map[string]bool{}
	for _, w := range spec.Weights {
		if w.Cluster != "" {
			named[w.Cluster] = true
		}
	}
	var out []unit
	seen := map[string]bool{}
	for _, w := range spec.Weights {
		if w.Weight <= 0 {
			continue
		}
		u := unit{weight: int64(w.Weight)}
		if w.Cluster != "" {
			u.key = "cluster/" + w.Cluster
			for _, c := range clusters {
				if c.Key.Name == w.Cluster {
					u.members = append(u.members, c.Key)
				}
			}
		} else {
			u.key = "value/" + w.LabelValue
			for _, c := range clusters {
				if !named[c.Key.Name] && c.Labels[spec.WeightLabel] == w.LabelValue {
					u.members = append(u.members, c.Key)
				}
			}
		}
		if len(u.members) == 0 || seen[u.key] {
			continue
		}
		seen[u.key] = true
		slices.SortFunc(u.members, compareKeys)
		out = append(out, u)
	}
	return out
}

// capacityOf reads property from a ClusterProfile's properties as milli-units, or
// says why it cannot.
func capacityOf(props []clusterinventoryv1alpha1.Property, property string) (int64, string) {
	for _, p := range props {
		if p.Name != property {
			continue
		}
		q, err := resource.ParseQuantity(p.Value)
		if err != nil || q.Sign() < 0 {
			return 0, fmt.Sprintf("its property %s is %q, not a non-negative quantity: no replicas (capacityProperty)", property, p.Value)
		}
		if q.AsApproximateFloat64()*1000 >= maxCapacity {
			return maxCapacity, "" // MilliValue would overflow first
		}
		return q.MilliValue(), ""
	}
	return 0, fmt.Sprintf("it reports no property %s: no replicas (capacityProperty)", property)
}

// maxCapacity caps a capacity so that total replicas times capacity cannot overflow
// in largestRemainder (replicas are at most 2^31).
const maxCapacity = 1 << 31

// largestRemainder splits total by weights: each gets the floor of its exact share,
// and the replicas left go one each to the largest remainders (ties by key, in
// compare's order).
func largestRemainder[K any](total int32, keys []K, weights []int64, compare func(a, b K) int) []int32 {
	out := make([]int32, len(keys))
	var sum int64
	for _, w := range weights {
		sum += w
	}
	if sum <= 0 || total <= 0 {
		return out
	}
	type rem struct {
		i   int
		num int64
	}
	rems := make([]rem, len(keys))
	var given int32
	for i, w := range weights {
		exact := int64(total) * w
		out[i] = int32(exact / sum)
		given += out[i]
		rems[i] = rem{i: i, num: exact % sum}
	}
	slices.SortStableFunc(rems, func(a, b rem) int {
		if c := cmp.Compare(b.num, a.num); c != 0 {
			return c
		}
		return compare(keys[a.i], keys[b.i])
	})
	for j := 0; given < total; j++ {
		out[rems[j%len(rems)].i]++
		given++
	}
	return out
}

// split divides total over the clusters by the units' weights; inside a label-value
// unit evenly.
func split(total int32, us []unit) map[types.NamespacedName]int32 {
	out := map[types.NamespacedName]int32{}
	keys := make([]string, len(us))
	weights := make([]int64, len(us))
	for i, u := range us {
		keys[i], weights[i] = u.key, u.weight
	}
	for i, n := range largestRemainder(total, keys, weights, cmp.Compare[string]) {
		ones := make([]int64, len(us[i].members))
		for j := range ones {
			ones[j] = 1
		}
		for j, m := range largestRemainder(n, us[i].members, ones, compareKeys) {
			out[us[i].members[j]] = m
		}
	}
	return out
}

// divide splits one workload's total replicas over the clusters under Divide: only
// eligible clusters get replicas, a Returning cluster at most caps[key] (the rest
// goes to the others), and spread's maxSkew holds across its label's values.
// unplaced is what no cluster could take (no eligible cluster has weight).
func divide(total int32, spec *fleetv1alpha1.PlacementPolicySpec, clusters []member, caps map[types.NamespacedName]int32) (out map[types.NamespacedName]int32, unplaced int32) {
	var free []member
	for _, c := range clusters {
		if c.eligible() {
			free = append(free, c)
		}
	}
	fixed := map[types.NamespacedName]int32{}
	for {
		var used int32
		for _, n := range fixed {
			used += n
		}
		alloc := split(total-used, units(spec, free))
		changed := false
		var rest []member
		for _, c := range free {
			if cp, ok := caps[c.Key]; ok && alloc[c.Key] > cp {
				fixed[c.Key] = cp
				changed = true
				continue
			}
			rest = append(rest, c)
		}
		if !changed {
			out = map[types.NamespacedName]int32{}
			for _, c := range clusters {
				out[c.Key] = 0
			}
			var placed int32
			for k, v := range alloc {
				out[k] = v
			}
			for k, v := range fixed {
				out[k] = v
			}
			for _, v := range out {
				placed += v
			}
			if spec.Spread != nil {
				applySpread(out, spec.Spread, free, caps)
			}
			return out, total - placed
		}
		free = rest
	}
}

// applySpread moves replicas one at a time from the fullest domain (cluster label
// value) to the emptiest until their difference is at most maxSkew. Clusters without
// the label are outside every domain.
func applySpread(out map[types.NamespacedName]int32, s *fleetv1alpha1.Spread, eligible []member, caps map[types.NamespacedName]int32) {
	domains := map[string][]types.NamespacedName{}
	for _, c := range eligible {
		if v, ok := c.Labels[s.TopologyKey]; ok {
			domains[v] = append(domains[v], c.Key)
		}
	}
	if len(domains) < 2 {
		return
	}
	names := slices.Sorted(func(yield func(string) bool) {
		for k := range domains {
			if !yield(k) {
				return
			}
		}
	})
	sum := func(d string) int32 {
		var n int32
		for _, c := range domains[d] {
			n += out[c]
		}
		return n
	}
	for range 1 << 16 {
		maxD, minD := names[0], names[0]
		for _, d := range names {
			if sum(d) > sum(maxD) {
				maxD = d
			}
			if sum(d) < sum(minD) {
				minD = d
			}
		}
		if sum(maxD)-sum(minD) <= s.MaxSkew {
			return
		}
		var from, to types.NamespacedName
		for _, c := range domains[maxD] {
			if from.Name == "" || out[c] > out[from] {
				from = c
			}
		}
		for _, c := range domains[minD] {
			if cp, ok := caps[c]; ok && out[c] >= cp {
				continue
			}
			if to.Name == "" || out[c] < out[to] {
				to = c
			}
		}
		if to.Name == "" || out[from] == 0 {
			return
		}
		out[from]--
		out[to]++
	}
}

func timeOrZero(t *metav1.Time) time.Time {
	if t == nil {
		return time.Time{}
	}
	return t.Time
}
