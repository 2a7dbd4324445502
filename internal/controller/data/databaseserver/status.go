package databaseserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/engine"
)

// Condition reasons.
const (
	ReasonReachable          = "Reachable"
	ReasonUnreachable        = "Unreachable"
	ReasonCredentialsMissing = "CredentialsMissing"
	// ReasonInUse: the server is being deleted and DevDatabases still refer to it.
	ReasonInUse = "InUse"
)

// listedUsers is how many DevDatabases an InUse message names.
const listedUsers = 5

// inUseMessage names a few of the DevDatabases holding a server being deleted.
func inUseMessage(users []string) string {
	names := strings.Join(users[:min(len(users), listedUsers)], ", ")
	if len(users) > listedUsers {
		names += fmt.Sprintf(" and %d more", len(users)-listedUsers)
	}
	return fmt.Sprintf("Being deleted; waiting for %d DevDatabase(s) that use this server to be deleted (their databases are dropped first): %s", len(users), names)
}

// computeStatus derives the status from one observation. lastCheckTime changes on
// every check only when something else changed too, so a healthy server is not
// rewritten every minute.
func computeStatus(s *datav1alpha1.DatabaseServer, obs observation) datav1alpha1.DatabaseServerStatus {
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	set := func(typ string, status metav1.ConditionStatus, reason, msg string) {
		meta.SetStatusCondition(&st.Conditions, metav1.Condition{
			Type: typ, Status: status, Reason: reason, Message: msg, ObservedGeneration: s.Generation,
		})
	}
	if obs.err != nil {
		reason := ReasonUnreachable
		if errors.Is(obs.err, engine.ErrCredentials) {
			reason = ReasonCredentialsMissing
		}
		st.Reachable = false
		msg := fmt.Sprintf("Cannot use server %s:%d: %v", s.Spec.Host, s.Spec.Port, obs.err)
		set(datav1alpha1.ConditionReachable, metav1.ConditionFalse, reason, msg)
		set(datav1alpha1.ConditionReady, metav1.ConditionFalse, reason, msg)
	} else {
		st.Reachable = true
		st.ServerVersion = obs.info.Version
		st.DatabasesInUse = int32(obs.info.OwnedDatabases)
		set(datav1alpha1.ConditionReachable, metav1.ConditionTrue, ReasonReachable, "Connected and logged in as the admin")
		set(datav1alpha1.ConditionReady, metav1.ConditionTrue, ReasonReachable,
			fmt.Sprintf("PostgreSQL %s; %d DevDatabase(s) on the server", obs.info.Version, obs.info.OwnedDatabases))
	}
	if obs.deleting {
		set(datav1alpha1.ConditionReady, metav1.ConditionFalse, ReasonInUse, inUseMessage(obs.users))
	}
	prev := s.Status.DeepCopy()
	prev.LastCheckTime, st.LastCheckTime = nil, nil
	if !equality.Semantic.DeepEqual(*prev, st) || s.Status.LastCheckTime == nil {
		st.LastCheckTime = &obs.at
	} else {
		st.LastCheckTime = s.Status.LastCheckTime
	}
	return st
}

func (r *Reconciler) updateStatus(ctx context.Context, s *datav1alpha1.DatabaseServer, obs observation) error {
	st := computeStatus(s, obs)
	recordMetrics(s.Name, st)
	if equality.Semantic.DeepEqual(st, s.Status) {
		return nil
	}
	patch := client.MergeFrom(s.DeepCopy())
	s.Status = st
	if err := r.Status().Patch(ctx, s, patch); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	return nil
}
