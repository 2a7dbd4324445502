package placement

import (
	"context"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// The phases of one placement, in the order place runs them: choose the clusters,
// read the hub's objects, plan each cluster's copies, settle the returning clusters,
// hand the plans to the members' queues, release the clusters no longer selected,
// publish the decision.

// place chooses the clusters, plans each one's copies and hands the plans to the
// members' queues. wake is when the placement changes by itself next (a cluster
// reaching unhealthyFor, a return step).
func (r *Reconciler) place(ctx context.Context, pp *fleetv1alpha1.PlacementPolicy) (*observation, time.Time, error) {
	now := r.Clock.Now()
	obs := &observation{}
	var wake wakeup
	prev := previousClusters(pp)
	chosen, err := r.chooseClusters(ctx, pp, prev, now, obs, &wake)
	if err != nil {
		return obs, wake.at, err
	}

	objs, err := selectResources(ctx, r.APIReader, pp)
	if err != nil {
		obs.selectErr = err
	}
	obs.resources = int32(len(objs))

	copies := planCopies(pp, chosen.members, objs, now, obs)
	settleReturns(pp, chosen.members, copies.returnDone, now, &wake)
	r.handOutPlans(pp, chosen, copies, obs)
	r.releaseUnselected(ctx, pp, prev, chosen.members, obs)
	slices.SortFunc(obs.clusters, func(a, b fleetv1alpha1.ClusterStatus) int { return compareKeys(clusterKey(a), clusterKey(b)) })
	if len(obs.clusters) > 100 {
		obs.clusters = obs.clusters[:100]
	}

	if err := r.writeDecision(ctx, pp, chosen.members); err != nil {
		obs.decision = err.Error()
	} else {
		obs.decisionOK = true
	}
	return obs, wake.at, obs.selectErr
}

// wakeup is the earliest time the placement changes by itself.
type wakeup struct{ at time.Time }

// soon brings the wakeup forward to t when t comes first.
func (w *wakeup) soon(t time.Time) {
	if w.at.IsZero() || t.Before(w.at) {
		w.at = t
	}
}

// previousClusters is the policy's status entries by cluster: each cluster's phase
// carries over from there, and a cluster listed there and no longer chosen is
// released.
func previousClusters(pp *fleetv1alpha1.PlacementPolicy) map[types.NamespacedName]fleetv1alpha1.ClusterStatus {
	prev := map[types.NamespacedName]fleetv1alpha1.ClusterStatus{}
	for _, c := range pp.Status.Clusters {
		prev[clusterKey(c)] = c
	}
	return prev
}

// chosenClusters are the clusters a policy places on, with their ClusterProfiles.
type chosenClusters struct {
	members  []member
	profiles map[types.NamespacedName]*clusterinventoryv1alpha1.ClusterProfile
}

// chooseClusters picks the ClusterProfiles the policy selects, that are not being
// deleted and whose allow-list admits the policy's namespace (the others are
// obs.refused), each in the phase its health and the previous phase give.
func (r *Reconciler) chooseClusters(ctx context.Context, pp *fleetv1alpha1.PlacementPolicy, prev map[types.NamespacedName]fleetv1alpha1.ClusterStatus,
	now time.Time, obs *observation, wake *wakeup) (chosenClusters, error) {
	chosen := chosenClusters{profiles: map[types.NamespacedName]*clusterinventoryv1alpha1.ClusterProfile{}}
	var cps clusterinventoryv1alpha1.ClusterProfileList
	if err := r.List(ctx, &cps); err != nil {
		return chosen, fmt.Errorf("listing ClusterProfiles: %w", err)
	}
	sel := k8slabels.Everything()
	if pp.Spec.ClusterSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(pp.Spec.ClusterSelector)
		if err != nil {
			return chosen, fmt.Errorf("clusterSelector: %w", err)
		}
		sel = s
	}
	// Clusters are ClusterProfiles by namespace and name throughout: two profiles of
	// one name in different namespaces are two clusters, each with its own
	// connection (or none), status entry and decision.
	slices.SortFunc(cps.Items, func(a, b clusterinventoryv1alpha1.ClusterProfile) int {
		return compareKeys(client.ObjectKeyFromObject(&a), client.ObjectKeyFromObject(&b))
	})
	for i := range cps.Items {
		cp := &cps.Items[i]
		ck := client.ObjectKeyFromObject(cp)
		if !sel.Matches(k8slabels.Set(cp.Labels)) || !cp.DeletionTimestamp.IsZero() {
			continue
		}
		syncer := r.members.get(ck)
		if syncer != nil && !syncer.admits(pp.Namespace) {
			obs.refused = append(obs.refused, ck.String())
			continue
		}
		chosen.profiles[ck] = cp
		p := prev[ck]
		h := healthOf(cp)
		phase, since := phaseOf(p.Phase, timeOrZero(p.PhaseSince), h, syncer != nil, now, pp.Spec.Failover.UnhealthyFor.Duration)
		if phase == fleetv1alpha1.ClusterUnhealthy {
			wake.soon(h.Since.Add(pp.Spec.Failover.UnhealthyFor.Duration))
		}
		m := member{Key: ck, Labels: cp.Labels, Phase: phase, Since: since}
		if pp.Spec.Strategy == fleetv1alpha1.StrategyDivide && pp.Spec.CapacityProperty != "" {
			m.Capacity, m.CapacityErr = capacityOf(cp.Status.Properties, pp.Spec.CapacityProperty)
		}
		chosen.members = append(chosen.members, m)
	}
	obs.chosen = int32(len(chosen.members))
	return chosen, nil
}

// copyPlans are the copies planned for each chosen cluster.
type copyPlans struct {
	perCluster map[types.NamespacedName][]*unstructured.Unstructured
	// replicas is each cluster's total of its workloads' replicas.
	replicas map[types.NamespacedName]int32
	// overrideErr is why a cluster's overrides could not be applied: such a cluster
	// gets no new plan.
	overrideErr map[types.NamespacedName]string
	// returnDone are the returning clusters whose paced share already is their
	// whole share of every workload.
	returnDone map[types.NamespacedName]bool
}

// planCopies makes each chosen cluster's copy of each of the hub's objects: the
// workloads' replicas divided among the clusters (returning ones capped by the
// return rate) or copied whole, and the cluster's overrides applied.
func planCopies(pp *fleetv1alpha1.PlacementPolicy, members []member, objs []*unstructured.Unstructured, now time.Time, obs *observation) copyPlans {
	plans := copyPlans{
		perCluster:  map[types.NamespacedName][]*unstructured.Unstructured{},
		replicas:    map[types.NamespacedName]int32{},
		overrideErr: map[types.NamespacedName]string{},
		returnDone:  map[types.NamespacedName]bool{},
	}
	caps := map[types.NamespacedName]int32{}
	for _, m := range members {
		if m.Phase == fleetv1alpha1.ClusterReturning {
			plans.returnDone[m.Key] = true
			caps[m.Key] = allowance(pp.Spec.Failover.ReturnRate, m.Since, now)
		}
	}
	for _, obj := range objs {
		var split map[types.NamespacedName]int32
		if isWorkload(obj) && pp.Spec.Strategy == fleetv1alpha1.StrategyDivide {
			split = plans.divideReplicas(obj, pp, members, caps, obs)
		}
		for _, m := range members {
			plans.addCopy(obj, pp, m, split, obs)
		}
	}
	return plans
}

// divideReplicas divides a workload's replicas among the clusters, the returning
// ones capped; a returning cluster that gets less than it would uncapped has not
// returned yet.
func (plans *copyPlans) divideReplicas(obj *unstructured.Unstructured, pp *fleetv1alpha1.PlacementPolicy, members []member,
	caps map[types.NamespacedName]int32, obs *observation) map[types.NamespacedName]int32 {
	split, unplaced := divide(hubReplicas(obj), &pp.Spec, members, caps)
	obs.unplaced += unplaced
	ideal, _ := divide(hubReplicas(obj), &pp.Spec, members, nil)
	for ck := range plans.returnDone {
		if ideal[ck] > split[ck] {
			plans.returnDone[ck] = false
		}
	}
	return split
}

// addCopy adds m's copy of obj: its share of replicas (split, or all of them when
// nil), then m's overrides.
func (plans *copyPlans) addCopy(obj *unstructured.Unstructured, pp *fleetv1alpha1.PlacementPolicy, m member, split map[types.NamespacedName]int32, obs *observation) {
	c := memberCopy(obj, pp)
	if isWorkload(obj) {
		n := hubReplicas(obj)
		if split != nil {
			n = split[m.Key]
		}
		_ = unstructured.SetNestedField(c.Object, int64(n), "spec", "replicas")
	}
	if err := applyOverrides(c, pp.Spec.Overrides, m.Labels); err != nil {
		plans.overrideErr[m.Key] = err.Error()
		obs.planErrors = append(obs.planErrors, m.Key.String()+": "+err.Error())
		return
	}
	if isWorkload(c) {
		n, _, _ := unstructured.NestedFieldNoCopy(c.Object, "spec", "replicas")
		plans.replicas[m.Key] += toInt32(n)
	}
	plans.perCluster[m.Key] = append(plans.perCluster[m.Key], c)
}

// settleReturns makes a returning cluster healthy once it holds its whole share (or
// at once when the policy does not divide), and otherwise wakes the policy at the
// next return step.
func settleReturns(pp *fleetv1alpha1.PlacementPolicy, members []member, returnDone map[types.NamespacedName]bool, now time.Time, wake *wakeup) {
	for i := range members {
		m := &members[i]
		if m.Phase != fleetv1alpha1.ClusterReturning {
			continue
		}
		if pp.Spec.Strategy != fleetv1alpha1.StrategyDivide || returnDone[m.Key] {
			m.Phase, m.Since = fleetv1alpha1.ClusterHealthy, time.Time{}
			continue
		}
		wake.soon(nextReturnStep(m.Since, now))
	}
}

// handOutPlans gives each chosen cluster's member queue its plan and records the
// cluster's status entry in obs.
func (r *Reconciler) handOutPlans(pp *fleetv1alpha1.PlacementPolicy, chosen chosenClusters, copies copyPlans, obs *observation) {
	key := client.ObjectKeyFromObject(pp)
	for _, m := range chosen.members {
		cs := fleetv1alpha1.ClusterStatus{Name: m.Key.Name, Namespace: m.Key.Namespace, Phase: m.Phase, Replicas: copies.replicas[m.Key]}
		if !m.Since.IsZero() {
			t := metav1.NewTime(m.Since)
			cs.PhaseSince = &t
		}
		syncer := r.members.get(m.Key)
		switch {
		case syncer == nil:
			typ, _ := probeCondition(chosen.profiles[m.Key])
			cs.Error = "Orderly has no working credentials for this cluster: see the ClusterProfile's " + typ + " condition"
		case obs.selectErr != nil:
			// A failed read of the hub changes no member.
		default:
			if _, bad := copies.overrideErr[m.Key]; !bad {
				syncer.setIfChanged(key, &plan{
					UID: pp.UID, Namespace: pp.Namespace, Objects: copies.perCluster[m.Key],
					Purge:  pp.Spec.Failover.PurgeMode == fleetv1alpha1.PurgeImmediate && (m.Phase == fleetv1alpha1.ClusterHealthy || m.Phase == fleetv1alpha1.ClusterReturning),
					Paused: m.Phase == fleetv1alpha1.ClusterFailed,
				})
			}
		}
		if syncer != nil {
			fillResult(&cs, syncer, key)
		}
		if e, bad := copies.overrideErr[m.Key]; bad {
			cs.Error = kit.Truncate(e, 1024)
		}
		if cs.Error == "" && m.CapacityErr != "" {
			cs.Error = kit.Truncate(m.CapacityErr, 1024)
		}
		obs.clusters = append(obs.clusters, cs)
	}
}

// releaseUnselected handles the clusters the policy no longer selects: purge (when
// the member is healthy) or leave the copies, per purgeMode.
func (r *Reconciler) releaseUnselected(ctx context.Context, pp *fleetv1alpha1.PlacementPolicy, prev map[types.NamespacedName]fleetv1alpha1.ClusterStatus,
	members []member, obs *observation) {
	key := client.ObjectKeyFromObject(pp)
	chosen := map[types.NamespacedName]bool{}
	for _, m := range members {
		chosen[m.Key] = true
	}
	for ck, p := range prev {
		if chosen[ck] {
			continue
		}
		syncer := r.members.get(ck)
		if syncer == nil || pp.Spec.Failover.PurgeMode == fleetv1alpha1.PurgeNever {
			if syncer != nil {
				syncer.drop(key)
			}
			continue
		}
		if res, ok := syncer.result(key); ok && res.Forgotten {
			syncer.drop(key)
			continue
		}
		cs := fleetv1alpha1.ClusterStatus{Name: ck.Name, Namespace: ck.Namespace, Phase: p.Phase, Error: "no longer selected: Orderly's copies are being removed"}
		if cp := r.profile(ctx, ck); cp != nil && healthOf(cp).Healthy {
			syncer.setIfChanged(key, &plan{UID: pp.UID, Namespace: pp.Namespace, Purge: true, Forget: true})
		} else {
			cs.Error = "no longer selected: Orderly's copies are removed once the cluster is healthy"
		}
		obs.clusters = append(obs.clusters, cs)
	}
}
