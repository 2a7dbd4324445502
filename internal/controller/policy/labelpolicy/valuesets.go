package labelpolicy

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// A LabelValueSet's status counts the values allowed and retired now, and is Ready
// while at least one value is allowed: a set whose every value is retired or expired
// admits nothing from it, which a person should see on the set itself, not only on
// the workloads the policies then refuse. The CRD's schema already refuses malformed
// and repeated values. The status changes with the spec and at each expiry, when the
// set is looked at again.

// Reasons of a LabelValueSet's Ready condition.
const (
	ReasonValuesAllowed = "ValuesAllowed"
	ReasonNoActiveValue = "NoActiveValue"
)

// valueSetReconciler writes LabelValueSets' status.
type valueSetReconciler struct {
	client.Client
	APIReader client.Reader
	Recorder  kit.Recorder
	Clock     clock.PassiveClock
}

// setupValueSets registers the LabelValueSet status controller beside the policy's.
func (r *Reconciler) setupValueSets(mgr ctrl.Manager, opts controller.Options) error {
	opts.MaxConcurrentReconciles = 1
	vr := &valueSetReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: r.Recorder, Clock: r.Clock}
	if vr.Clock == nil {
		vr.Clock = clock.RealClock{}
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("labelvalueset").
		WithOptions(opts).
		For(&policyv1alpha1.LabelValueSet{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(vr)
}

// Reconcile writes one LabelValueSet's status, and comes back at its next expiry.
func (r *valueSetReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var s policyv1alpha1.LabelValueSet
	if err := r.Get(ctx, req.NamespacedName, &s); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	now := r.Clock.Now()
	before, err := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, &s, func(latest *policyv1alpha1.LabelValueSet) {
		computeValueSetStatus(latest, now)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	if before != nil {
		r.event(&s, before)
	}
	if next, ok := nextValueExpiry(&s, now); ok {
		// A second late, so that the value has expired when it is looked at.
		return ctrl.Result{RequeueAfter: next.Sub(now) + time.Second}, nil
	}
	return ctrl.Result{}, nil
}

// computeValueSetStatus counts s's values at now and sets its Ready condition.
func computeValueSetStatus(s *policyv1alpha1.LabelValueSet, now time.Time) {
	var active, retired int32
	for i := range s.Spec.Values {
		if valueActive(&s.Spec.Values[i], now) {
			active++
		} else {
			retired++
		}
	}
	s.Status.Active, s.Status.Retired = active, retired
	s.Status.NextExpiry = nil
	if next, ok := nextValueExpiry(s, now); ok {
		s.Status.NextExpiry = &metav1.Time{Time: next}
	}
	conds := kit.ConditionsOf(&s.Status.Conditions, s.Generation).At(now)
	if active == 0 {
		conds.False(policyv1alpha1.LabelValueSetConditionReady, ReasonNoActiveValue, fmt.Sprintf(
			"every value is retired or expired (%d): LabelPolicies whose allowedValuesFrom names %s admit none of its values; add a value or set one active", retired, s.Name))
	} else {
		conds.True(policyv1alpha1.LabelValueSetConditionReady, ReasonValuesAllowed, fmt.Sprintf("%d allowed, %d retired", active, retired))
	}
	s.Status.ObservedGeneration = s.Generation
}

// event sends an Event when Ready changed status.
func (r *valueSetReconciler) event(s, before *policyv1alpha1.LabelValueSet) {
	now := findReady(s.Status.Conditions)
	was := findReady(before.Status.Conditions)
	if now == nil || (was != nil && was.Status == now.Status) {
		return
	}
	typ := corev1.EventTypeNormal
	if now.Status != metav1.ConditionTrue {
		typ = corev1.EventTypeWarning
	}
	r.Recorder.Eventf(s, nil, typ, now.Reason, "Count", "%s", now.Message)
}

func findReady(list []metav1.Condition) *metav1.Condition {
	for i := range list {
		if list[i].Type == policyv1alpha1.LabelValueSetConditionReady {
			return &list[i]
		}
	}
	return nil
}
