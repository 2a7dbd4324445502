package canary

import (
	"context"
	"errors"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// queryCheck is what is known of the queries and of Prometheus after this reconcile.
type queryCheck struct {
	// status, reason and message of QueriesValid; status "" keeps the condition.
	status          metav1.ConditionStatus
	reason, message string
	// contacted: Prometheus answered this reconcile.
	contacted bool
	// provider is why Prometheus could not be queried this reconcile.
	provider error
}

// checkQueries has Prometheus parse every query once per generation of the spec,
// before the analysis needs them. An invalid query stops the analysis (obs); an
// unreachable Prometheus does not: the analysis holds when it is due.
func (r *Reconciler) checkQueries(ctx context.Context, c *deliveryv1alpha1.Canary, obs *observation) *queryCheck {
	if cond := meta.FindStatusCondition(c.Status.Conditions, deliveryv1alpha1.ConditionQueriesValid); cond != nil &&
		cond.ObservedGeneration == c.Generation && cond.Status != metav1.ConditionUnknown {
		obs.queriesValid = cond.Status == metav1.ConditionTrue
		return &queryCheck{}
	}
	err := r.validate(ctx, c)
	var qe *QueryError
	switch {
	case err == nil:
		return &queryCheck{status: metav1.ConditionTrue, reason: "Parsed", message: "Prometheus parses every query", contacted: true}
	case errors.As(err, &qe):
		obs.queriesValid = false
		return &queryCheck{status: metav1.ConditionFalse, reason: "InvalidQuery", message: qe.Error(), contacted: true}
	case errors.Is(err, errBusy):
		return &queryCheck{status: metav1.ConditionUnknown, reason: "NotChecked", message: "Prometheus has not been asked yet"}
	}
	return &queryCheck{status: metav1.ConditionUnknown, reason: "ProviderUnavailable", message: "Prometheus could not be asked to parse the queries", provider: err}
}

// errStaleStatus says that the status a plan started from was replaced before the
// plan's status could be written.
var errStaleStatus = errors.New("the Canary's status changed while this reconcile planned")

// statusInput is what a reconcile that got through planning reports.
type statusInput struct {
	res     *result
	routes  []routerObservation
	queries *queryCheck
}

// writeStatus writes the status of this reconcile: the planned one (in), or, when the
// Canary is blocked before planning (blk), the last one with Ready=False saying why.
// Events of the transitions and the metrics follow a successful write.
//
// The planned status continues the status the plan started from; when the write finds
// that another write replaced it meanwhile, nothing is written and errStaleStatus is
// returned, so that the reconcile plans again from the latest.
func (r *Reconciler) writeStatus(ctx context.Context, c *deliveryv1alpha1.Canary, in *statusInput, blk *blockage) error {
	planned := c.Status.DeepCopy()
	stale := false
	replaced, err := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, c, func(latest *deliveryv1alpha1.Canary) {
		if in != nil && !equality.Semantic.DeepEqual(latest.Status, *planned) {
			stale = true
			return
		}
		computeStatus(latest, in, blk)
	})
	if err != nil {
		return err
	}
	if stale {
		return errStaleStatus
	}
	if replaced == nil {
		return nil
	}
	if blk != nil && readyReason(replaced) != blk.reason {
		r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, blk.reason, "Deliver", "%s", blk.message)
	}
	if in != nil {
		for _, e := range in.res.events {
			typ := corev1.EventTypeNormal
			if e.warning {
				typ = corev1.EventTypeWarning
			}
			r.Recorder.Eventf(c, nil, typ, e.reason, "Deliver", "%s", e.message)
		}
		if q := in.queries; q != nil && q.status == metav1.ConditionFalse && conditionStatus(replaced, deliveryv1alpha1.ConditionQueriesValid) != metav1.ConditionFalse {
			r.Recorder.Eventf(c, nil, corev1.EventTypeWarning, "InvalidQuery", "Validate", "%s", q.message)
		}
	}
	recordMetrics(client.ObjectKeyFromObject(c), &replaced.Status, &c.Status)
	return nil
}

func readyReason(c *deliveryv1alpha1.Canary) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, deliveryv1alpha1.ConditionReady); cond != nil {
		return cond.Reason
	}
	return ""
}

func conditionStatus(c *deliveryv1alpha1.Canary, typ string) metav1.ConditionStatus {
	if cond := meta.FindStatusCondition(c.Status.Conditions, typ); cond != nil {
		return cond.Status
	}
	return ""
}

// computeStatus sets latest's status from what this reconcile planned and observed.
// It keeps the conditions it has nothing new about.
func computeStatus(latest *deliveryv1alpha1.Canary, in *statusInput, blk *blockage) {
	conds := latest.Status.Conditions
	if in != nil {
		latest.Status = *in.res.status.DeepCopy()
	}
	latest.Status.Conditions = conds
	latest.Status.ObservedGeneration = latest.Generation
	set := kit.ConditionsOf(&latest.Status.Conditions, latest.Generation)
	if blk != nil {
		set.False(deliveryv1alpha1.ConditionReady, blk.reason, blk.message)
		return
	}
	res := in.res

	traffic := make([]deliveryv1alpha1.RouterStatus, 0, len(in.routes))
	var problems []string
	trafficReason := ""
	for _, o := range in.routes {
		traffic = append(traffic, o.status)
		if !o.ready() {
			problems = append(problems, o.message)
			if trafficReason == "" {
				trafficReason = o.reason
			}
		}
	}
	latest.Status.Traffic = traffic
	if len(problems) == 0 {
		set.True(deliveryv1alpha1.ConditionTrafficReady, "RoutesReady", "every route is in place")
	} else {
		set.False(deliveryv1alpha1.ConditionTrafficReady, trafficReason, strings.Join(problems, "; "))
	}

	if q := in.queries; q != nil {
		if q.status != "" {
			set.Set(deliveryv1alpha1.ConditionQueriesValid, q.status, q.reason, q.message)
		}
		switch {
		case q.provider != nil:
			set.False(deliveryv1alpha1.ConditionProviderAvailable, "ProviderUnavailable", "Prometheus cannot be queried: "+q.provider.Error())
		case q.contacted:
			set.True(deliveryv1alpha1.ConditionProviderAvailable, "Answering", "Prometheus answers")
		}
	}
	switch {
	case len(problems) > 0:
		set.False(deliveryv1alpha1.ConditionReady, trafficReason, strings.Join(problems, "; "))
	case conditionStatus(latest, deliveryv1alpha1.ConditionQueriesValid) == metav1.ConditionFalse:
		set.False(deliveryv1alpha1.ConditionReady, "InvalidQuery", "a query is not valid (see QueriesValid): the analysis does not go on")
	case res.status.Phase == deliveryv1alpha1.PhaseRolledBack, res.status.Phase == deliveryv1alpha1.PhaseHolding, res.blocked:
		set.False(deliveryv1alpha1.ConditionReady, res.reason, res.message)
	default:
		set.True(deliveryv1alpha1.ConditionReady, res.reason, res.message)
	}
}
