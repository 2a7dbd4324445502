package sleepschedule

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// namespaceConflict is a namespace this schedule selects but another one owns.
type namespaceConflict struct {
	namespace, owner string
}

type selection struct {
	owned     []string
	conflicts []namespaceConflict
	// excluded are selected namespaces that never sleep, whatever the selection says.
	excluded []powerv1alpha1.ExcludedNamespace
}

// excludedReason says why Orderly never puts the namespace ns to sleep, or "" when it
// may: Kubernetes' own namespaces (CoreDNS and the like must run for anything to
// wake), and the manager's own (asleep, nothing would be left to wake the others).
// No selection overrides it: a `namespaceSelector: {}` selects every namespace.
func excludedReason(ns, managerNamespace string) string {
	switch kit.NamespaceProtection(ns, managerNamespace) {
	case kit.KubernetesNamespace:
		return powerv1alpha1.ExcludedSystemNamespace
	case kit.ManagerNamespace:
		return powerv1alpha1.ExcludedManagerNamespace
	}
	return ""
}

// selects reports whether s selects the namespace ns.
func selects(s *powerv1alpha1.SleepSchedule, sel k8slabels.Selector, ns *corev1.Namespace) bool {
	if slices.Contains(s.Spec.Namespaces, ns.Name) {
		return true
	}
	return sel != nil && sel.Matches(k8slabels.Set(ns.Labels))
}

func selectorOf(s *powerv1alpha1.SleepSchedule) (k8slabels.Selector, error) {
	if s.Spec.NamespaceSelector == nil {
		return nil, nil
	}
	return metav1.LabelSelectorAsSelector(s.Spec.NamespaceSelector)
}

// olderThan orders schedules by age, then name: the oldest schedule that selects a
// namespace owns it. The order never changes while both exist, so two schedules never
// take turns on a namespace.
func olderThan(a, b *powerv1alpha1.SleepSchedule) bool {
	return cmp.Or(a.CreationTimestamp.Compare(b.CreationTimestamp.Time), strings.Compare(a.Name, b.Name)) < 0
}

// checkSelectors reports a selector of spec that cannot be used: the API server
// checks a selector's shape, not, say, that an operator In has values.
func checkSelectors(spec *powerv1alpha1.SleepScheduleSpec) error {
	if _, err := metav1.LabelSelectorAsSelector(spec.NamespaceSelector); err != nil {
		return fmt.Errorf("namespaceSelector: %w", err)
	}
	if _, err := metav1.LabelSelectorAsSelector(spec.Exclude.Selector); err != nil {
		return fmt.Errorf("exclude.selector: %w", err)
	}
	return nil
}

// selectNamespaces returns the namespaces s manages, those it selects but leaves to
// an older schedule, and those that never sleep.
func (r *Reconciler) selectNamespaces(ctx context.Context, s *powerv1alpha1.SleepSchedule) (selection, error) {
	var out selection
	mine, err := selectorOf(s)
	if err != nil {
		return out, fmt.Errorf("namespaceSelector: %w", err)
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("listing namespaces: %w", err)
	}
	bySel, err := r.selectorSchedules(ctx)
	if err != nil {
		return out, err
	}
	for i := range namespaces.Items {
		ns := &namespaces.Items[i]
		if !selects(s, mine, ns) {
			continue
		}
		if reason := excludedReason(ns.Name, r.ManagerNamespace); reason != "" {
			out.excluded = append(out.excluded, powerv1alpha1.ExcludedNamespace{Name: ns.Name, Reason: reason})
			continue
		}
		// Only the schedules that select this namespace can own it: found through
		// the index rather than by testing every schedule against every namespace.
		others, err := r.selecting(ctx, bySel, ns.Name, ns.Labels)
		if err != nil {
			return out, err
		}
		var owner *powerv1alpha1.SleepSchedule
		for _, o := range others {
			if o.Name == s.Name || !o.DeletionTimestamp.IsZero() || !olderThan(o, s) {
				continue
			}
			if owner == nil || olderThan(o, owner) {
				owner = o
			}
		}
		if owner != nil {
			out.conflicts = append(out.conflicts, namespaceConflict{namespace: ns.Name, owner: owner.Name})
			continue
		}
		out.owned = append(out.owned, ns.Name)
	}
	slices.Sort(out.owned)
	slices.SortFunc(out.excluded, func(a, b powerv1alpha1.ExcludedNamespace) int { return cmp.Compare(a.Name, b.Name) })
	return out, nil
}
