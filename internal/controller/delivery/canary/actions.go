package canary

import (
	"context"
	"fmt"
	"strings"
	"text/tabwriter"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
)

// What `orderly canary promote|abort|status` do. They act through annotations that
// name the revision (and step) the person saw, so that a command given for one step
// never acts on a later one.

// Promote passes the step the Canary is at now (a pause, a step paused as
// inconclusive, or a weight step before its analysis), and returns it.
func Promote(ctx context.Context, c client.Client, key client.ObjectKey) (*deliveryv1alpha1.Canary, error) {
	cn, err := get(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if err := inAnalysis(cn, "promoted"); err != nil {
		return nil, err
	}
	return cn, annotate(ctx, c, cn, deliveryv1alpha1.PromoteAnnotation, PromoteValue(cn.Status.Revision, cn.Status.CurrentStep))
}

// inAnalysis refuses a Canary that is not in an analysis, which is all that can be
// promoted or aborted (done).
func inAnalysis(cn *deliveryv1alpha1.Canary, done string) error {
	switch cn.Status.Phase {
	case deliveryv1alpha1.PhaseProgressing, deliveryv1alpha1.PhasePaused, deliveryv1alpha1.PhaseHolding:
		return nil
	}
	return fmt.Errorf("canary %s is %s: only a Canary in an analysis (Progressing, Paused or Holding) can be %s", cn.Name, phaseOrNone(cn), done)
}

// Abort rolls back the revision under analysis now, and returns the Canary.
func Abort(ctx context.Context, c client.Client, key client.ObjectKey) (*deliveryv1alpha1.Canary, error) {
	cn, err := get(ctx, c, key)
	if err != nil {
		return nil, err
	}
	if err := inAnalysis(cn, "aborted"); err != nil {
		return nil, err
	}
	return cn, annotate(ctx, c, cn, deliveryv1alpha1.AbortAnnotation, cn.Status.Revision)
}

// Describe returns a person's summary of a Canary: where it stands and its last
// decisions, with each metric's statistics.
func Describe(ctx context.Context, c client.Client, key client.ObjectKey) (string, error) {
	cn, err := get(ctx, c, key)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	st := &cn.Status
	fmt.Fprintf(&b, "Canary %s/%s: %s", cn.Namespace, cn.Name, phaseOrNone(cn))
	if ready := meta.FindStatusCondition(st.Conditions, deliveryv1alpha1.ConditionReady); ready != nil {
		fmt.Fprintf(&b, " (Ready=%s %s: %s)", ready.Status, ready.Reason, ready.Message)
	}
	fmt.Fprintf(&b, "\n  target %s, primary revision %s, revision %s\n", cn.Spec.TargetRef.Name, orNone(st.PrimaryRevision), orNone(st.Revision))
	fmt.Fprintf(&b, "  step %d of %d, canary weight %d%%", st.CurrentStep, len(cn.Spec.Steps), st.CanaryWeight)
	if st.NextAnalysisAt != nil {
		fmt.Fprintf(&b, ", next analysis %s", st.NextAnalysisAt.UTC().Format("15:04:05"))
	}
	if st.HoldingSince != nil {
		fmt.Fprintf(&b, ", holding since %s", st.HoldingSince.UTC().Format("15:04:05"))
	}
	b.WriteString("\n")
	for _, t := range st.Traffic {
		fmt.Fprintf(&b, "  %s %s: installed %v, found %v", t.Kind, t.Name, t.Installed, t.Found)
		if t.CanaryWeight != nil {
			fmt.Fprintf(&b, ", canary weight %d%%", *t.CanaryWeight)
		}
		b.WriteString("\n")
	}
	if len(st.Decisions) == 0 {
		b.WriteString("No decisions yet.\n")
		return b.String(), nil
	}
	b.WriteString("\nDecisions (newest first):\n")
	w := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "  TIME\tREVISION\tSTEP\tWEIGHT\tVERDICT\tWHY")
	for _, d := range st.Decisions {
		fmt.Fprintf(w, "  %s\t%s\t%d\t%d%%\t%s\t%s\n", d.Time.UTC().Format("15:04:05"), d.Revision, d.Step, d.Weight, d.Verdict, d.Reason)
		for _, m := range d.Metrics {
			line := fmt.Sprintf("%s: %s", m.Name, m.Verdict)
			if m.Canary != nil && m.Canary.Count > 0 {
				line += fmt.Sprintf(", canary n=%d median %s", m.Canary.Count, m.Canary.Median)
			}
			if m.Baseline != nil && m.Baseline.Count > 0 {
				line += fmt.Sprintf(", primary n=%d median %s", m.Baseline.Count, m.Baseline.Median)
			}
			if m.PValue != "" {
				line += fmt.Sprintf(", U=%s p=%s shift %s (allowed %s)", m.Statistic, m.PValue, m.Effect, m.AllowedEffect)
			}
			// Under WHY: in the first column the line would widen TIME for every row.
			fmt.Fprintf(w, "\t\t\t\t\t%s\n", line)
		}
	}
	_ = w.Flush()
	return b.String(), nil
}

func get(ctx context.Context, c client.Client, key client.ObjectKey) (*deliveryv1alpha1.Canary, error) {
	var cn deliveryv1alpha1.Canary
	if err := c.Get(ctx, key, &cn); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("canary %s not found in namespace %s", key.Name, key.Namespace)
		}
		return nil, err
	}
	return &cn, nil
}

func annotate(ctx context.Context, c client.Client, cn *deliveryv1alpha1.Canary, key, value string) error {
	before := cn.DeepCopy()
	if cn.Annotations == nil {
		cn.Annotations = map[string]string{}
	}
	cn.Annotations[key] = value
	return c.Patch(ctx, cn, client.MergeFrom(before))
}

func phaseOrNone(cn *deliveryv1alpha1.Canary) string {
	if cn.Status.Phase == "" {
		return "not started"
	}
	return string(cn.Status.Phase)
}

func orNone(s string) string {
	if s == "" {
		return "(none)"
	}
	return s
}
