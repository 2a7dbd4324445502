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
)

// namespaceConflict is a namespace this schedule selects but another one owns.
type namespaceConflict struct {
	namespace, owner string
}

type selection struct {
	owned     []string
	conflicts []namespaceConflict
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

// selectNamespaces returns the namespaces s manages, and those it selects but leaves
// to an older schedule.
func (r *Reconciler) selectNamespaces(ctx context.Context, s *powerv1alpha1.SleepSchedule) (selection, error) {
	var out selection
	mine, err := selectorOf(s)
	if err != nil {
		return out, fmt.Errorf("namespaceSelector: %w", err)
	}
	var schedules powerv1alpha1.SleepScheduleList
	if err := r.List(ctx, &schedules, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("listing SleepSchedules: %w", err)
	}
	type other struct {
		s   *powerv1alpha1.SleepSchedule
		sel k8slabels.Selector
	}
	var older []other
	for i := range schedules.Items {
		o := &schedules.Items[i]
		if o.Name == s.Name || !o.DeletionTimestamp.IsZero() || !olderThan(o, s) {
			continue
		}
		sel, err := selectorOf(o)
		if err != nil {
			continue
		}
		older = append(older, other{o, sel})
	}
	var namespaces corev1.NamespaceList
	if err := r.List(ctx, &namespaces, client.UnsafeDisableDeepCopy); err != nil {
		return out, fmt.Errorf("listing namespaces: %w", err)
	}
	for i := range namespaces.Items {
		ns := &namespaces.Items[i]
		if !selects(s, mine, ns) {
			continue
		}
		var owner *powerv1alpha1.SleepSchedule
		for _, o := range older {
			if selects(o.s, o.sel, ns) && (owner == nil || olderThan(o.s, owner)) {
				owner = o.s
			}
		}
		if owner != nil {
			out.conflicts = append(out.conflicts, namespaceConflict{namespace: ns.Name, owner: owner.Name})
			continue
		}
		out.owned = append(out.owned, ns.Name)
	}
	slices.Sort(out.owned)
	return out, nil
}
