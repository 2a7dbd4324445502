package tenant

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// maxQuotaResources bounds the resources reported per namespace in status, and kept
// per quota in the cache (the API's MaxProperties).
const maxQuotaResources = 16

// Reasons of the TotalQuotaAvailable condition.
const (
	ReasonHeadroomLeft      = "HeadroomLeft"
	ReasonTotalQuotaReached = "TotalQuotaReached"
)

// observedQuota is the ResourceQuota Orderly keeps in one tenant namespace, as the
// cache holds it.
type observedQuota struct {
	name string
	// exists is false when the namespace has no quota of the Tenant yet.
	exists bool
	// spec is spec.hard, what Orderly set; status is status.hard, what the API server
	// enforces (the quota controller copies spec.hard there); used is status.used.
	spec, status, used corev1.ResourceList
}

// shareHeadroom divides what the tenant has left of one resource among its
// namespaces: each namespace may use what it uses now plus an equal share of the
// headroom (total minus the sum of used, never below zero). caps, where set, are
// the most a namespace may have (quota.hard of the same resource): a namespace whose
// cap leaves it less than an equal share gets its cap, and what it cannot take is
// shared by the others. Shares are whole units of the resource (milli-units where a
// value is fractional); what does not divide evenly goes one unit each to the first
// namespaces by name. The result, per namespace, is its limit: used plus share, at
// most its cap, never below used unless the cap is. Pure.
func shareHeadroom(total resource.Quantity, names []string, used map[string]resource.Quantity, caps map[string]resource.Quantity) map[string]resource.Quantity {
	milli := total.MilliValue()%1000 != 0
	for _, q := range used {
		milli = milli || q.MilliValue()%1000 != 0
	}
	for _, q := range caps {
		milli = milli || q.MilliValue()%1000 != 0
	}
	value := func(q resource.Quantity) int64 {
		if milli {
			return q.MilliValue()
		}
		return q.Value()
	}
	quantity := func(v int64) resource.Quantity {
		if milli {
			return *resource.NewMilliQuantity(v, total.Format)
		}
		return *resource.NewQuantity(v, total.Format)
	}

	sorted := slices.Sorted(slices.Values(names))
	sorted = slices.Compact(sorted)
	var sum int64
	for _, n := range sorted {
		sum += value(used[n])
	}
	headroom := max(value(total)-sum, 0)

	// room is how much of the headroom each namespace may take at most (-1: no cap).
	room := map[string]int64{}
	share := map[string]int64{}
	open := []string{}
	for _, n := range sorted {
		room[n] = -1
		if c, ok := caps[n]; ok {
			room[n] = max(value(c)-value(used[n]), 0)
		}
		open = append(open, n)
	}
	// Water-filling: a namespace whose room is below an equal share takes its room,
	// and the rest is shared again among the others.
	for len(open) > 0 {
		equal := headroom / int64(len(open))
		var still []string
		for _, n := range open {
			if room[n] >= 0 && room[n] <= equal {
				share[n] = room[n]
				headroom -= room[n]
				continue
			}
			still = append(still, n)
		}
		if len(still) == len(open) {
			extra := headroom % int64(len(open))
			for _, n := range open {
				share[n] = equal
				if extra > 0 {
					share[n]++
					extra--
				}
			}
			break
		}
		open = still
	}
	out := make(map[string]resource.Quantity, len(sorted))
	for _, n := range sorted {
		limit := value(used[n]) + share[n]
		if c, ok := caps[n]; ok && value(c) < limit {
			limit = value(c)
		}
		out[n] = quantity(limit)
	}
	return out
}

// planQuotas decides spec.hard of the totalQuota resources in every namespace of the
// tenant. The target of each namespace is shareHeadroom's. A limit is lowered at
// once; a limit is raised only when no namespace's limit of that resource is being
// lowered and every quota of the tenant enforces what Orderly last set (status.hard,
// which the quota controller copies from spec.hard, equals spec.hard). So headroom
// moves to a namespace only once the namespaces it is taken from can no longer use
// it, and the sum of the enforced limits never exceeds the total by Orderly's doing
// (docs/tenant.md states the window that is left). A namespace without a quota gets
// its target at once: it had no limit at all. Pure.
func planQuotas(total *tenancyv1alpha1.TenantTotalQuota, perNamespace corev1.ResourceList, observed []observedQuota) map[string]corev1.ResourceList {
	plan := make(map[string]corev1.ResourceList, len(observed))
	names := make([]string, 0, len(observed))
	for _, o := range observed {
		names = append(names, o.name)
		plan[o.name] = corev1.ResourceList{}
	}
	if total == nil {
		return plan
	}
	for r, t := range total.Hard {
		used := map[string]resource.Quantity{}
		caps := map[string]resource.Quantity{}
		for _, o := range observed {
			if u, ok := o.used[r]; ok {
				used[o.name] = u
			}
			if c, ok := perNamespace[r]; ok {
				caps[o.name] = c
			}
		}
		target := shareHeadroom(t, names, used, caps)
		lowering, synced := false, true
		for _, o := range observed {
			cur, has := o.spec[r]
			if !o.exists || !has {
				continue
			}
			if tg := target[o.name]; tg.Cmp(cur) < 0 {
				lowering = true
			}
			if st, ok := o.status[r]; !ok || st.Cmp(cur) != 0 {
				synced = false
			}
		}
		for _, o := range observed {
			tg := target[o.name]
			cur, has := o.spec[r]
			switch {
			case !o.exists || !has || tg.Cmp(cur) <= 0:
				plan[o.name][r] = tg
			case lowering || !synced:
				plan[o.name][r] = cur // raised later, once the lowered limits are enforced
			default:
				plan[o.name][r] = tg
			}
		}
	}
	return plan
}

// quotaHard is spec.hard of the ResourceQuota in one namespace: quota.hard, with the
// totalQuota resources set to the plan (the smaller of the two where both name one).
func quotaHard(t *tenancyv1alpha1.Tenant, planned corev1.ResourceList) corev1.ResourceList {
	if t.Spec.Quota == nil && t.Spec.TotalQuota == nil {
		return nil
	}
	hard := corev1.ResourceList{}
	if t.Spec.Quota != nil {
		hard = t.Spec.Quota.Hard.DeepCopy()
	}
	if t.Spec.TotalQuota != nil {
		for r, total := range t.Spec.TotalQuota.Hard {
			q, ok := planned[r]
			if !ok {
				// Not planned (a namespace Orderly had not seen when it planned): nothing
				// of the total until the next reconcile shares it out.
				q = *resource.NewQuantity(0, total.Format)
			}
			if c, ok := hard[r]; !ok || q.Cmp(c) < 0 {
				hard[r] = q
			}
		}
	}
	return hard
}

// quotaParticipants are the namespaces that hold (or are about to hold) a quota of t:
// the listed namespaces that t may manage, and its self-service namespaces.
func (r *Reconciler) quotaParticipants(ctx context.Context, t *tenancyv1alpha1.Tenant) ([]string, error) {
	var names []string
	for _, spec := range t.Spec.Namespaces {
		if r.reserved(spec.Name) != "" {
			continue
		}
		var ns corev1.Namespace
		err := r.Get(ctx, client.ObjectKey{Name: spec.Name}, &ns)
		switch {
		case apierrors.IsNotFound(err):
			names = append(names, spec.Name)
		case err != nil:
			return nil, fmt.Errorf("reading namespace %q: %w", spec.Name, err)
		case ns.DeletionTimestamp.IsZero() && claimedBy(&ns, t):
			names = append(names, spec.Name)
		}
	}
	if t.Spec.SelfService != nil {
		owned, err := r.ownedNamespaces(ctx, t)
		if err != nil {
			return nil, err
		}
		for i := range owned {
			ns := &owned[i]
			if ns.Annotations[tenancyv1alpha1.OriginAnnotation] == tenancyv1alpha1.OriginSelfService && ns.DeletionTimestamp.IsZero() && !slices.Contains(names, ns.Name) {
				names = append(names, ns.Name)
			}
		}
	}
	return names, nil
}

// observeQuotas reads the tenant's quotas from the cache (which keeps their hard and
// used, see childMetadata), keyed by namespace.
func (r *Reconciler) observeQuotas(ctx context.Context, t *tenancyv1alpha1.Tenant, names []string) ([]observedQuota, error) {
	out := make([]observedQuota, 0, len(names))
	for _, n := range names {
		o := observedQuota{name: n}
		var q corev1.ResourceQuota
		err := r.Get(ctx, client.ObjectKey{Namespace: n, Name: quotaName}, &q)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("reading ResourceQuota %s/%s from the cache: %w", n, quotaName, err)
		case metav1.IsControlledBy(&q, t):
			o.exists, o.spec, o.status, o.used = true, q.Spec.Hard, q.Status.Hard, q.Status.Used
		}
		out = append(out, o)
	}
	return out, nil
}

// quotaState is what a reconcile observed of the tenant's quotas and planned for them.
type quotaState struct {
	observed map[string]observedQuota
	plan     map[string]corev1.ResourceList
}

// reconcileQuotaPlan observes the tenant's quotas and plans their limits. With
// neither quota nor totalQuota there is nothing to observe.
func (r *Reconciler) reconcileQuotaPlan(ctx context.Context, t *tenancyv1alpha1.Tenant) (quotaState, error) {
	st := quotaState{observed: map[string]observedQuota{}}
	if t.Spec.Quota == nil && t.Spec.TotalQuota == nil {
		return st, nil
	}
	names, err := r.quotaParticipants(ctx, t)
	if err != nil {
		return st, err
	}
	observed, err := r.observeQuotas(ctx, t, names)
	if err != nil {
		return st, err
	}
	for _, o := range observed {
		st.observed[o.name] = o
	}
	var perNamespace corev1.ResourceList
	if t.Spec.Quota != nil {
		perNamespace = t.Spec.Quota.Hard
	}
	st.plan = planQuotas(t.Spec.TotalQuota, perNamespace, observed)
	return st, nil
}

// quotaResources are the resources status reports: those of quota and totalQuota,
// sorted, at most maxQuotaResources.
func quotaResources(t *tenancyv1alpha1.Tenant) []corev1.ResourceName {
	set := map[corev1.ResourceName]bool{}
	if t.Spec.Quota != nil {
		for r := range t.Spec.Quota.Hard {
			set[r] = true
		}
	}
	if t.Spec.TotalQuota != nil {
		for r := range t.Spec.TotalQuota.Hard {
			set[r] = true
		}
	}
	out := make([]corev1.ResourceName, 0, len(set))
	for r := range set {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	if len(out) > maxQuotaResources {
		out = out[:maxQuotaResources]
	}
	return out
}

// namespaceUsage is the status of one namespace's quota: its spec.hard and
// status.used for the reported resources; nil when the namespace has no quota of the
// tenant yet.
func namespaceUsage(resources []corev1.ResourceName, o observedQuota) *tenancyv1alpha1.TenantQuotaUsage {
	if !o.exists {
		return nil
	}
	u := &tenancyv1alpha1.TenantQuotaUsage{}
	for _, r := range resources {
		if h, ok := o.spec[r]; ok {
			if u.Hard == nil {
				u.Hard = corev1.ResourceList{}
			}
			u.Hard[r] = h
		}
		if v, ok := o.used[r]; ok {
			if u.Used == nil {
				u.Used = corev1.ResourceList{}
			}
			u.Used[r] = v
		}
	}
	return u
}

// setQuotaStatus reports each namespace's quota usage, the tenant's total usage and
// the TotalQuotaAvailable condition. Pure.
func setQuotaStatus(t *tenancyv1alpha1.Tenant, st *tenancyv1alpha1.TenantStatus, qs quotaState) {
	resources := quotaResources(t)
	for i := range st.Namespaces {
		st.Namespaces[i].Quota = nil
		if o, ok := qs.observed[st.Namespaces[i].Name]; ok && len(resources) > 0 {
			st.Namespaces[i].Quota = namespaceUsage(resources, o)
		}
	}
	conds := kit.ConditionsOf(&st.Conditions, t.Generation)
	if t.Spec.TotalQuota == nil {
		st.TotalQuota = nil
		conds.Remove(tenancyv1alpha1.ConditionTotalQuotaAvailable)
		return
	}
	total, reached, summary := totalUsage(t, qs)
	st.TotalQuota = total
	if len(reached) > 0 {
		conds.False(tenancyv1alpha1.ConditionTotalQuotaAvailable, ReasonTotalQuotaReached,
			fmt.Sprintf("The tenant has reached spec.totalQuota for %s (used/hard: %s): no namespace of the tenant can use more of it until usage drops or the limit is raised",
				strings.Join(reached, ", "), strings.Join(summary, ", ")))
		return
	}
	conds.True(tenancyv1alpha1.ConditionTotalQuotaAvailable, ReasonHeadroomLeft,
		"Used/hard across the tenant's namespaces: "+strings.Join(summary, ", "))
}

// totalUsage is spec.totalQuota.hard with the sum of what the tenant's namespaces use
// of it, the resources the tenant has used all of, and "resource used/hard" of each,
// sorted by resource.
func totalUsage(t *tenancyv1alpha1.Tenant, qs quotaState) (total *tenancyv1alpha1.TenantQuotaUsage, reached, summary []string) {
	total = &tenancyv1alpha1.TenantQuotaUsage{Hard: t.Spec.TotalQuota.Hard.DeepCopy(), Used: corev1.ResourceList{}}
	for r, h := range t.Spec.TotalQuota.Hard {
		sum := resource.Quantity{Format: h.Format}
		for _, o := range qs.observed {
			if u, ok := o.used[r]; ok && o.exists {
				sum.Add(u)
			}
		}
		total.Used[r] = sum
	}
	names := make([]string, 0, len(total.Hard))
	for r := range total.Hard {
		names = append(names, string(r))
	}
	slices.Sort(names)
	for _, n := range names {
		h, u := total.Hard[corev1.ResourceName(n)], total.Used[corev1.ResourceName(n)]
		summary = append(summary, fmt.Sprintf("%s %s/%s", n, u.String(), h.String()))
		if u.Cmp(h) >= 0 {
			reached = append(reached, n)
		}
	}
	return total, reached, summary
}
