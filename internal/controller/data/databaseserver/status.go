package databaseserver

import (
	"context"
	"errors"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/kit"
)

// Condition (and Event) reasons.
const (
	ReasonReachable          = "Reachable"
	ReasonUnreachable        = "Unreachable"
	ReasonCredentialsMissing = "CredentialsMissing"
	// ReasonCredentialsNotAllowed: a Secret reference names a namespace other than
	// the manager's; the Secret is not read.
	ReasonCredentialsNotAllowed = "CredentialsNotAllowed"
	// Reasons of TLSVerified.
	ReasonVerified   = "Verified"
	ReasonUnverified = "Unverified"
	// ReasonInUse: the server is being deleted and DevDatabases still refer to it.
	ReasonInUse = "InUse"
	// ReasonReleased (an Event only): the last DevDatabase went and the server with it.
	ReasonReleased = "Released"
)

// listedUsers is how many DevDatabases an InUse message names.
const listedUsers = 5

// inUseMessage names a few of the DevDatabases holding a server being deleted.
func inUseMessage(users []string) string {
	return fmt.Sprintf("Being deleted; waiting for %d DevDatabase(s) that use this server to be deleted (their databases are dropped first): %s",
		len(users), kit.FirstN(users, listedUsers))
}

// tlsVerified says whether connections with sslMode check who the server is, and
// what that means for the admin password.
func tlsVerified(sslMode string) (bool, string) {
	switch sslMode {
	case "verify-full":
		return true, "sslMode verify-full: the server's certificate and host name are checked"
	case "verify-ca":
		return true, "sslMode verify-ca: the server's certificate is checked, its host name is not"
	case "require":
		return false, "sslMode require: the connection is encrypted but any certificate is accepted, so whoever can intercept it can read the admin password; set caSecretRef (verify-full)"
	case "disable":
		return false, "sslMode disable: the admin password and all data cross the network in plaintext; acceptable on loopback only. Set caSecretRef (verify-full)"
	}
	return false, fmt.Sprintf("sslMode %s: the connection may fall back to plaintext and the server's certificate is not checked, so the admin password can be intercepted; set caSecretRef (verify-full)", sslMode)
}

// computeStatus derives the status from one observation. lastCheckTime changes on
// every check only when something else changed too, so a healthy server is not
// rewritten every minute.
func computeStatus(s *datav1alpha1.DatabaseServer, obs observation) datav1alpha1.DatabaseServerStatus {
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	conds := kit.ConditionsOf(&st.Conditions, s.Generation).At(obs.at.Time)
	if obs.err != nil {
		reason := ReasonUnreachable
		switch {
		case errors.Is(obs.err, database.ErrCredentialsNotAllowed):
			reason = ReasonCredentialsNotAllowed
		case errors.Is(obs.err, database.ErrCredentials):
			reason = ReasonCredentialsMissing
		}
		st.Reachable = false
		msg := fmt.Sprintf("Cannot use server %s:%d: %v", s.Spec.Host, port(s), obs.err)
		conds.False(datav1alpha1.ConditionReachable, reason, msg)
		conds.False(datav1alpha1.ConditionReady, reason, msg)
	} else {
		st.Reachable = true
		st.ServerVersion = obs.info.Version
		st.DatabasesInUse = int32(obs.info.OwnedDatabases)
		st.SystemIdentifier = obs.info.SystemIdentifier
		conds.True(datav1alpha1.ConditionReachable, ReasonReachable, "Connected and logged in as the admin")
		conds.True(datav1alpha1.ConditionReady, ReasonReachable,
			fmt.Sprintf("%s %s; %d DevDatabase(s) on the server", product(s, obs.info.Version), obs.info.Version, obs.info.OwnedDatabases))
	}
	if obs.deleting {
		conds.False(datav1alpha1.ConditionReady, ReasonInUse, inUseMessage(obs.users))
	}
	if obs.sslMode != "" {
		if verified, msg := tlsVerified(obs.sslMode); verified {
			conds.True(datav1alpha1.ConditionTLSVerified, ReasonVerified, msg)
		} else {
			conds.False(datav1alpha1.ConditionTLSVerified, ReasonUnverified, msg)
		}
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

// updateStatus writes the status computed from obs, records the metrics, and sends
// the Events of the transitions that the write made.
func (r *Reconciler) updateStatus(ctx context.Context, s *datav1alpha1.DatabaseServer, obs observation) error {
	replaced, err := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, s, func(cur *datav1alpha1.DatabaseServer) {
		cur.Status = computeStatus(cur, obs)
	})
	recordMetrics(s.Name, s.Status)
	if err != nil {
		return err
	}
	// Nothing written (unchanged, or dropped for a newer generation whose reconcile
	// reports afresh): no transition to tell.
	if replaced != nil {
		r.recordTransitions(s, replaced.Status)
	}
	return nil
}

// recordTransitions sends an Event for each change a person cares about between the
// status before and s's: reachable again, unreachable (or its cause changed), and
// deletion held by DevDatabases. Only changes: a server that stays down is not
// reported on every check.
func (r *Reconciler) recordTransitions(s *datav1alpha1.DatabaseServer, before datav1alpha1.DatabaseServerStatus) {
	was := meta.FindStatusCondition(before.Conditions, datav1alpha1.ConditionReachable)
	now := meta.FindStatusCondition(s.Status.Conditions, datav1alpha1.ConditionReachable)
	if now != nil && (was == nil || was.Status != now.Status || was.Reason != now.Reason) {
		if now.Status == metav1.ConditionTrue {
			r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonReachable, "Check",
				"Connected to %s:%d as the admin (%s %s)", s.Spec.Host, port(s), product(s, s.Status.ServerVersion), s.Status.ServerVersion)
		} else {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, now.Reason, "Check", "%s", now.Message)
		}
	}
	wasReady := meta.FindStatusCondition(before.Conditions, datav1alpha1.ConditionReady)
	ready := meta.FindStatusCondition(s.Status.Conditions, datav1alpha1.ConditionReady)
	if ready != nil && ready.Reason == ReasonInUse && (wasReady == nil || wasReady.Reason != ReasonInUse) {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonInUse, "Delete", "%s", ready.Message)
	}
}

// port is the server's port, its engine's usual one when spec.port is unset.
func port(s *datav1alpha1.DatabaseServer) int32 {
	if s.Spec.Port != 0 {
		return s.Spec.Port
	}
	return datav1alpha1.DefaultPort(s.Spec.Engine)
}

// product names the server's software for people: a mysql server may be MariaDB,
// whose version says so.
func product(s *datav1alpha1.DatabaseServer, version string) string {
	switch {
	case s.Spec.Engine != datav1alpha1.EngineMySQL:
		return "PostgreSQL"
	case strings.Contains(version, "MariaDB"):
		return "MariaDB"
	}
	return "MySQL"
}
