package placement

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Condition types and reasons of a PlacementPolicy.
const (
	ConditionReady     = "Ready"
	ConditionScheduled = "Scheduled"
	ConditionSynced    = "Synced"

	ReasonScheduled           = "Scheduled"
	ReasonNoClusters          = "NoClusters"
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	ReasonProtectedNamespace  = "ProtectedNamespace"
	ReasonNoResources         = "NoResources"
	ReasonSelectFailed        = "SelectFailed"
	ReasonUnplaced            = "ReplicasUnplaced"
	ReasonInvalidOverride     = "InvalidOverride"
	ReasonDecisionConflict    = "DecisionNotWritten"
	ReasonSynced              = "Synced"
	ReasonSyncFailed          = "SyncFailed"
	ReasonSyncPending         = "SyncPending"
	ReasonReady               = "Ready"
	ReasonReplicasNotReady    = "ReplicasNotReady"
	ReasonNotScheduled        = "NotScheduled"
	ReasonClustersNotSynced   = "ClustersNotSynced"
)

// computeStatus derives the status from what the reconcile observed.
func computeStatus(o *fleetv1alpha1.PlacementPolicy, obs *observation) {
	s := &o.Status
	s.ObservedGeneration = o.Generation
	s.Resources = obs.resources
	s.SelectedClusters = obs.chosen
	s.Clusters = obs.clusters
	s.Replicas, s.ReadyReplicas, s.ReadyClusters = 0, 0, 0
	var notSynced, failedSync, notReady []string
	for _, c := range obs.clusters {
		// namespace/name: two profiles of one name must read apart.
		name := clusterKey(c).String()
		s.Replicas += c.Replicas
		s.ReadyReplicas += min(c.ReadyReplicas, c.Replicas)
		if c.Phase == fleetv1alpha1.ClusterFailed {
			continue
		}
		switch {
		case c.Error != "":
			failedSync = append(failedSync, name+": "+c.Error)
		case c.LastSync == nil || c.Applied < obs.resources:
			notSynced = append(notSynced, name)
		case c.ReadyReplicas < c.Replicas:
			notReady = append(notReady, fmt.Sprintf("%s (%d/%d)", name, c.ReadyReplicas, c.Replicas))
		default:
			s.ReadyClusters++
		}
	}
	cond := kit.ConditionsOf(&s.Conditions, o.Generation)
	scheduled := false
	switch {
	case obs.selectErr != nil:
		cond.False(ConditionScheduled, ReasonSelectFailed, "Reading the selected objects failed: "+obs.selectErr.Error())
	case obs.chosen == 0 && len(obs.refused) > 0:
		cond.False(ConditionScheduled, ReasonNamespaceNotAllowed, "The selected clusters do not admit namespace "+o.Namespace+" ("+kit.FirstN(obs.refused, 5)+"): the platform team lists it in the annotation "+fleetv1alpha1.AllowedNamespacesAnnotation+" of the cluster's kubeconfig Secret.")
	case obs.chosen == 0:
		cond.False(ConditionScheduled, ReasonNoClusters, "The clusterSelector matches no ClusterProfile: check its labels against `kubectl get clusterprofiles -A --show-labels`.")
	case obs.resources == 0:
		cond.False(ConditionScheduled, ReasonNoResources, "The resourceSelectors match no object in namespace "+o.Namespace+".")
	case len(obs.planErrors) > 0:
		cond.False(ConditionScheduled, ReasonInvalidOverride, "An override does not apply: "+kit.FirstN(obs.planErrors, 3))
	case obs.unplaced > 0:
		cond.False(ConditionScheduled, ReasonUnplaced, fmt.Sprintf("%d replicas have no cluster to run on: every cluster with a weight failed or is unreachable.", obs.unplaced))
	case !obs.decisionOK:
		cond.False(ConditionScheduled, ReasonDecisionConflict, obs.decision)
	default:
		scheduled = true
		msg := fmt.Sprintf("%d objects placed on %d clusters.", obs.resources, obs.chosen)
		if len(obs.refused) > 0 {
			msg += " Selected but not admitting namespace " + o.Namespace + ": " + kit.FirstN(obs.refused, 5) + "."
		}
		cond.True(ConditionScheduled, ReasonScheduled, msg)
	}
	switch {
	case len(failedSync) > 0:
		cond.False(ConditionSynced, ReasonSyncFailed, kit.FirstN(failedSync, 3))
	case len(notSynced) > 0:
		cond.False(ConditionSynced, ReasonSyncPending, "Not synced yet: "+kit.FirstN(notSynced, 5))
	default:
		cond.True(ConditionSynced, ReasonSynced, "Every chosen cluster holds the objects.")
	}
	switch {
	case !scheduled:
		cond.False(ConditionReady, ReasonNotScheduled, "Not scheduled: see the Scheduled condition.")
	case len(failedSync)+len(notSynced) > 0:
		cond.False(ConditionReady, ReasonClustersNotSynced, "See the Synced condition.")
	case len(notReady) > 0:
		cond.False(ConditionReady, ReasonReplicasNotReady, "Replicas not ready on "+kit.FirstN(notReady, 5))
	default:
		cond.True(ConditionReady, ReasonReady, fmt.Sprintf("%d replicas ready on %d clusters.", s.ReadyReplicas, s.ReadyClusters))
	}
}

// recordTransitions sends an Event for each cluster that failed over, started
// returning or recovered.
func (r *Reconciler) recordTransitions(prev, cur *fleetv1alpha1.PlacementPolicy) {
	before := map[types.NamespacedName]fleetv1alpha1.ClusterPhase{}
	for _, c := range prev.Status.Clusters {
		before[clusterKey(c)] = c.Phase
	}
	for _, c := range cur.Status.Clusters {
		ck := clusterKey(c)
		was := before[ck]
		if was == c.Phase {
			continue
		}
		switch c.Phase {
		case fleetv1alpha1.ClusterFailed:
			r.Recorder.Eventf(cur, nil, corev1.EventTypeWarning, "ClusterFailed", "Failover",
				"Cluster %s was unhealthy for %s: its replicas moved to the other clusters", ck, cur.Spec.Failover.UnhealthyFor.Duration)
		case fleetv1alpha1.ClusterReturning:
			r.Recorder.Eventf(cur, nil, corev1.EventTypeNormal, "ClusterReturning", "Return",
				"Cluster %s is healthy again: its replicas return at %d per minute", ck, cur.Spec.Failover.ReturnRate)
		case fleetv1alpha1.ClusterHealthy:
			if was == fleetv1alpha1.ClusterReturning || was == fleetv1alpha1.ClusterUnhealthy {
				r.Recorder.Eventf(cur, nil, corev1.EventTypeNormal, "ClusterRecovered", "Return", "Cluster %s holds its full share again", ck)
			}
		case fleetv1alpha1.ClusterUnhealthy:
			r.Recorder.Eventf(cur, nil, corev1.EventTypeWarning, "ClusterUnhealthy", "Probe",
				"Cluster %s is unhealthy: its replicas move after %s unless it recovers", ck, cur.Spec.Failover.UnhealthyFor.Duration)
		}
	}
}

func recordMetrics(pp *fleetv1alpha1.PlacementPolicy) {
	key := types.NamespacedName{Namespace: pp.Namespace, Name: pp.Name}
	policyReplicas.WithLabelValues(series.Values(key, "placed")...).Set(float64(pp.Status.Replicas))
	policyReplicas.WithLabelValues(series.Values(key, "ready")...).Set(float64(pp.Status.ReadyReplicas))
	counts := map[fleetv1alpha1.ClusterPhase]int{}
	for _, c := range pp.Status.Clusters {
		counts[c.Phase]++
	}
	for _, ph := range []fleetv1alpha1.ClusterPhase{fleetv1alpha1.ClusterHealthy, fleetv1alpha1.ClusterUnhealthy, fleetv1alpha1.ClusterFailed, fleetv1alpha1.ClusterReturning, fleetv1alpha1.ClusterUnreachable} {
		policyClusters.WithLabelValues(series.Values(key, string(ph))...).Set(float64(counts[ph]))
	}
}
