package placement

import (
	"maps"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

// ck is the cluster "namespace/name", or "name" in the namespace fleet.
func ck(s string) types.NamespacedName {
	if ns, name, ok := strings.Cut(s, "/"); ok {
		return types.NamespacedName{Namespace: ns, Name: name}
	}
	return types.NamespacedName{Namespace: "fleet", Name: s}
}

// byKey and byString convert the tables' maps by ck and back.
func byKey(m map[string]int32) map[types.NamespacedName]int32 {
	if m == nil {
		return nil
	}
	out := map[types.NamespacedName]int32{}
	for k, v := range m {
		out[ck(k)] = v
	}
	return out
}

func byString(m map[types.NamespacedName]int32) map[string]int32 {
	out := map[string]int32{}
	for k, v := range m {
		s := k.String()
		if k.Namespace == "fleet" {
			s = k.Name
		}
		out[s] = v
	}
	return out
}

func cl(name, region string, phase fleetv1alpha1.ClusterPhase) member {
	return member{Key: ck(name), Labels: map[string]string{"region": region}, Phase: phase}
}

const (
	healthy   = fleetv1alpha1.ClusterHealthy
	unhealthy = fleetv1alpha1.ClusterUnhealthy
	failed    = fleetv1alpha1.ClusterFailed
	returning = fleetv1alpha1.ClusterReturning
)

func TestDivide(t *testing.T) {
	byRegion := fleetv1alpha1.PlacementPolicySpec{WeightLabel: "region", Weights: []fleetv1alpha1.Weight{
		{LabelValue: "eu", Weight: 60}, {LabelValue: "us", Weight: 40},
	}}
	byCluster := fleetv1alpha1.PlacementPolicySpec{Weights: []fleetv1alpha1.Weight{
		{Cluster: "a", Weight: 1}, {Cluster: "b", Weight: 1}, {Cluster: "c", Weight: 1},
	}}
	equal := fleetv1alpha1.PlacementPolicySpec{}
	skew := fleetv1alpha1.PlacementPolicySpec{WeightLabel: "region", Weights: []fleetv1alpha1.Weight{
		{LabelValue: "eu", Weight: 90}, {LabelValue: "us", Weight: 10},
	}, Spread: &fleetv1alpha1.Spread{TopologyKey: "region", MaxSkew: 2}}
	byCapacity := fleetv1alpha1.PlacementPolicySpec{CapacityProperty: "cpu.allocatable"}
	capped := func(name string, p fleetv1alpha1.ClusterPhase, milli int64, why string) member {
		m := cl(name, "x", p)
		m.Capacity, m.CapacityErr = milli, why
		return m
	}
	tests := []struct {
		name         string
		total        int32
		spec         *fleetv1alpha1.PlacementPolicySpec
		clusters     []member
		caps         map[string]int32
		want         map[string]int32
		wantUnplaced int32
	}{
		{"60/40 by region", 10, &byRegion, []member{cl("eu1", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 6, "us1": 4}, 0},
		{"60/40 odd total, largest remainder", 5, &byRegion, []member{cl("eu1", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 3, "us1": 2}, 0},
		{"group share split evenly inside the group", 10, &byRegion,
			[]member{cl("eu1", "eu", healthy), cl("eu2", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 3, "eu2": 3, "us1": 4}, 0},
		{"a failed cluster's share stays in its group", 10, &byRegion,
			[]member{cl("eu1", "eu", failed), cl("eu2", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 0, "eu2": 6, "us1": 4}, 0},
		{"a failed group's share goes to the others", 10, &byRegion,
			[]member{cl("eu1", "eu", failed), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 0, "us1": 10}, 0},
		{"unhealthy within hysteresis keeps its share", 10, &byRegion,
			[]member{cl("eu1", "eu", unhealthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 6, "us1": 4}, 0},
		{"returning capped, the rest stays on the others", 10, &byRegion,
			[]member{cl("eu1", "eu", returning), cl("us1", "us", healthy)},
			map[string]int32{"eu1": 2}, map[string]int32{"eu1": 2, "us1": 8}, 0},
		{"returning cap above share is no cap", 10, &byRegion,
			[]member{cl("eu1", "eu", returning), cl("us1", "us", healthy)},
			map[string]int32{"eu1": 9}, map[string]int32{"eu1": 6, "us1": 4}, 0},
		{"equal weights, deterministic remainder by name", 7, &equal,
			[]member{cl("c", "x", healthy), cl("a", "x", healthy), cl("b", "x", healthy)},
			nil, map[string]int32{"a": 3, "b": 2, "c": 2}, 0},
		{"per-cluster weights", 4, &byCluster,
			[]member{cl("a", "x", healthy), cl("b", "x", healthy), cl("c", "x", healthy)},
			nil, map[string]int32{"a": 2, "b": 1, "c": 1}, 0},
		{"cluster with no weight gets nothing", 6, &byRegion,
			[]member{cl("eu1", "eu", healthy), cl("ap1", "ap", healthy)},
			nil, map[string]int32{"eu1": 6, "ap1": 0}, 0},
		{"nothing eligible: all unplaced", 6, &byRegion,
			[]member{cl("eu1", "eu", failed), cl("ap1", "ap", healthy)},
			nil, map[string]int32{"eu1": 0, "ap1": 0}, 6},
		{"zero replicas", 0, &byRegion, []member{cl("eu1", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 0, "us1": 0}, 0},
		{"by reported capacity", 10, &byCapacity,
			[]member{capped("a", healthy, 48000, ""), capped("b", healthy, 32000, "")},
			nil, map[string]int32{"a": 6, "b": 4}, 0},
		{"a cluster without capacity gets nothing", 10, &byCapacity,
			[]member{capped("a", healthy, 48000, ""), capped("b", healthy, 0, "not reported")},
			nil, map[string]int32{"a": 10, "b": 0}, 0},
		{"a failed cluster's capacity does not count", 9, &byCapacity,
			[]member{capped("a", failed, 48000, ""), capped("b", healthy, 1000, ""), capped("c", healthy, 2000, "")},
			nil, map[string]int32{"a": 0, "b": 3, "c": 6}, 0},
		{"no capacity anywhere: all unplaced", 4, &byCapacity,
			[]member{capped("a", healthy, 0, ""), capped("b", healthy, 0, "not a quantity")},
			nil, map[string]int32{"a": 0, "b": 0}, 4},
		{"maxSkew moves replicas to the emptiest domain", 10, &skew,
			[]member{cl("eu1", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 6, "us1": 4}, 0},
		// ClusterProfiles of one name in two namespaces are two clusters.
		{"same name, two namespaces: two clusters, ties by name then namespace", 5, &equal,
			[]member{cl("other/eu1", "eu", healthy), cl("eu1", "eu", healthy)},
			nil, map[string]int32{"eu1": 3, "other/eu1": 2}, 0},
		{"same name, two namespaces: an unreachable one takes nothing from the other", 10, &equal,
			[]member{cl("eu1", "eu", healthy), cl("elsewhere/eu1", "eu", fleetv1alpha1.ClusterUnreachable)},
			nil, map[string]int32{"eu1": 10, "elsewhere/eu1": 0}, 0},
		{"same name, two namespaces: one label-value group", 10, &byRegion,
			[]member{cl("eu1", "eu", healthy), cl("other/eu1", "eu", healthy), cl("us1", "us", healthy)},
			nil, map[string]int32{"eu1": 3, "other/eu1": 3, "us1": 4}, 0},
		{"same name, two namespaces: a weight by name is theirs together", 6, &byCluster,
			[]member{cl("a", "x", healthy), cl("b", "x", healthy), cl("other/b", "x", healthy), cl("c", "x", healthy)},
			nil, map[string]int32{"a": 2, "b": 1, "other/b": 1, "c": 2}, 0},
		{"same name, two namespaces: a failed one's share of the weight goes to the other", 6, &byCluster,
			[]member{cl("a", "x", healthy), cl("b", "x", failed), cl("other/b", "x", healthy), cl("c", "x", healthy)},
			nil, map[string]int32{"a": 2, "b": 0, "other/b": 2, "c": 2}, 0},
		{"same name, two namespaces: caps are per cluster", 10, &equal,
			[]member{cl("eu1", "eu", returning), cl("other/eu1", "eu", healthy)},
			map[string]int32{"eu1": 2}, map[string]int32{"eu1": 2, "other/eu1": 8}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, unplaced := divide(tt.total, tt.spec, tt.clusters, byKey(tt.caps))
			got := byString(out)
			if !maps.Equal(got, tt.want) || unplaced != tt.wantUnplaced {
				t.Errorf("divide = %v (unplaced %d), want %v (unplaced %d)", got, unplaced, tt.want, tt.wantUnplaced)
			}
			var sum int32
			for _, v := range got {
				sum += v
			}
			if sum+unplaced != tt.total {
				t.Errorf("placed %d + unplaced %d != total %d", sum, unplaced, tt.total)
			}
		})
	}
}

func TestLargestRemainderIsDeterministic(t *testing.T) {
	keys := []string{"b", "a", "c"}
	w := []int64{1, 1, 1}
	first := largestRemainder(100, keys, w, strings.Compare)
	for range 20 {
		if got := largestRemainder(100, keys, w, strings.Compare); got[0] != first[0] || got[1] != first[1] || got[2] != first[2] {
			t.Fatalf("largestRemainder changed between calls: %v then %v", first, got)
		}
	}
	if first[1] != 34 { // "a" wins the tie
		t.Errorf("tie went to %v, want a (index 1) to get 34", first)
	}
}

func TestPhaseOf(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	const hold = 60 * time.Second
	tests := []struct {
		name      string
		prev      fleetv1alpha1.ClusterPhase
		prevSince time.Time
		h         health
		reachable bool
		now       time.Time
		want      fleetv1alpha1.ClusterPhase
		wantSince time.Time
	}{
		{"never probed counts as healthy", "", time.Time{}, health{}, true, t0, healthy, time.Time{}},
		{"healthy", healthy, time.Time{}, health{Known: true, Healthy: true, Since: t0}, true, t0, healthy, time.Time{}},
		{"briefly down: hysteresis holds", healthy, time.Time{}, health{Known: true, Since: t0}, true, t0.Add(59 * time.Second), unhealthy, time.Time{}},
		{"down for unhealthyFor: failed", unhealthy, time.Time{}, health{Known: true, Since: t0}, true, t0.Add(hold), failed, t0.Add(hold)},
		{"failed keeps its since", failed, t0.Add(hold), health{Known: true, Since: t0}, true, t0.Add(10 * time.Minute), failed, t0.Add(hold)},
		{"failed, back: returning from now", failed, t0.Add(hold), health{Known: true, Healthy: true, Since: t0.Add(5 * time.Minute)}, true, t0.Add(6 * time.Minute), returning, t0.Add(6 * time.Minute)},
		{"returning stays returning", returning, t0, health{Known: true, Healthy: true, Since: t0}, true, t0.Add(time.Minute), returning, t0},
		{"failed, flapping down again: still failed", failed, t0, health{Known: true, Since: t0.Add(time.Hour)}, true, t0.Add(time.Hour + time.Second), failed, t0},
		{"returning, down again: unhealthy first", returning, t0, health{Known: true, Since: t0.Add(time.Hour)}, true, t0.Add(time.Hour + time.Second), unhealthy, time.Time{}},
		{"no credentials", healthy, time.Time{}, health{Known: true, Healthy: true}, false, t0, fleetv1alpha1.ClusterUnreachable, time.Time{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, since := phaseOf(tt.prev, tt.prevSince, tt.h, tt.reachable, tt.now, hold)
			if got != tt.want || !since.Equal(tt.wantSince) {
				t.Errorf("phaseOf = %s since %v, want %s since %v", got, since, tt.want, tt.wantSince)
			}
		})
	}
}

func TestAllowance(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name      string
		rate      int32
		elapsed   time.Duration
		want      int32
		wantNextS time.Duration
	}{
		{"first batch at once", 2, 0, 2, time.Minute},
		{"still the first minute", 2, 59 * time.Second, 2, time.Minute},
		{"second minute", 2, time.Minute, 4, 2 * time.Minute},
		{"ten minutes", 3, 10*time.Minute + time.Second, 33, 11 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := allowance(tt.rate, t0, t0.Add(tt.elapsed)); got != tt.want {
				t.Errorf("allowance = %d, want %d", got, tt.want)
			}
			if got := nextReturnStep(t0, t0.Add(tt.elapsed)); !got.Equal(t0.Add(tt.wantNextS)) {
				t.Errorf("nextReturnStep = %v, want %v", got, t0.Add(tt.wantNextS))
			}
		})
	}
}

func TestCapacityOf(t *testing.T) {
	props := []clusterinventoryv1alpha1.Property{{Name: "cpu.allocatable", Value: "93500m"}, {Name: "bad", Value: "lots"}, {Name: "neg", Value: "-2"}, {Name: "big", Value: "1E"}}
	for _, tc := range []struct {
		property string
		want     int64
		err      string
	}{
		{"cpu.allocatable", 93500, ""},
		{"bad", 0, `is "lots", not a non-negative quantity`},
		{"neg", 0, "not a non-negative quantity"},
		{"missing", 0, "reports no property missing"},
		{"big", maxCapacity, ""},
	} {
		got, why := capacityOf(props, tc.property)
		if got != tc.want || (tc.err == "") != (why == "") || !strings.Contains(why, tc.err) {
			t.Errorf("%s: got %d %q, want %d %q", tc.property, got, why, tc.want, tc.err)
		}
	}
}
