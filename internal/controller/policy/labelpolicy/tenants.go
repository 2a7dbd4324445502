package labelpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// With spec.defaultFromTenant the Tenant's spec.costCenter is the default of the
// policy's label. Native admission cannot read a Tenant by the name a namespace label
// gives (a binding's paramRef names a fixed object), so the controller compiles a map
// tenant -> (UID, costCenter) from the Tenants into the MutatingAdmissionPolicy, which
// looks the namespace's tenant up in it at admission (namespaceObject works in the
// mutation's variables). The map is keyed by tenant, not by namespace, so it changes
// when a Tenant's costCenter does, not when a namespace is created or relabelled.

// maxTenantDefaults bounds the Tenants compiled into one mutating policy: each is about
// 80 bytes of CEL, so the policy stays far below the API server's object size limit and
// the map costs the API server little to build at each admission. Beyond it, namespaces
// of the Tenants left out (the last by name) fall back to their own label.
const maxTenantDefaults = 1000

// maxTenantDrift bounds status.tenantDrift.
const maxTenantDrift = 20

// TenantDefault is one Tenant's cost center as the generated mutating policy carries it.
type TenantDefault struct {
	// Tenant is the Tenant's name, the value of the namespaces' tenant label.
	Tenant string
	// UID is the Tenant's UID: a namespace is the Tenant's only when it records it
	// (tenancy.orderly.dev/owner-uid), as the Tenant controller writes it.
	UID string
	// CostCenter is the Tenant's spec.costCenter.
	CostCenter string
}

// tenantDefaults returns the Tenants that have a costCenter, sorted by name, at most
// maxTenantDefaults, and how many there were in all. Pure.
func tenantDefaults(tenants []tenancyv1alpha1.Tenant) ([]TenantDefault, int) {
	var out []TenantDefault
	for i := range tenants {
		t := &tenants[i]
		if t.Spec.CostCenter == "" || t.UID == "" {
			continue
		}
		out = append(out, TenantDefault{Tenant: t.Name, UID: string(t.UID), CostCenter: t.Spec.CostCenter})
	}
	slices.SortFunc(out, func(a, b TenantDefault) int { return strings.Compare(a.Tenant, b.Tenant) })
	total := len(out)
	return out[:min(total, maxTenantDefaults)], total
}

// TenantIndex is what MutationRequest.Tenants takes for a policy with
// defaultFromTenant: the Tenants' cost centers by name, bounded as the mutating policy
// is. For Orderly's webhook, which fills labels in where MutatingAdmissionPolicy is
// not served.
func TenantIndex(tenants []tenancyv1alpha1.Tenant) map[string]TenantDefault {
	ds, _ := tenantDefaults(tenants)
	return tenantIndex(ds)
}

// tenantIndex maps tenant names to their defaults.
func tenantIndex(ds []TenantDefault) map[string]TenantDefault {
	out := make(map[string]TenantDefault, len(ds))
	for _, d := range ds {
		out[d.Tenant] = d
	}
	return out
}

// tenantCostCenter is the costCenter of the Tenant a namespace belongs to (its tenant
// label names the Tenant and its owner-uid annotation records that Tenant's UID), ""
// when it belongs to none of tenants. It is the Go twin of tenantCostCenterExpr. Pure.
func tenantCostCenter(nsLabels, nsAnnotations map[string]string, tenants map[string]TenantDefault) string {
	d, ok := tenants[nsLabels[tenancyv1alpha1.TenantLabel]]
	if !ok || nsAnnotations[tenancyv1alpha1.OwnerUIDAnnotation] != d.UID {
		return ""
	}
	return d.CostCenter
}

// tenantsExpr is the CEL map literal {tenant: [uid, costCenter], ...}.
func tenantsExpr(ds []TenantDefault) string {
	entries := make([]string, 0, len(ds))
	for _, d := range ds {
		entries = append(entries, fmt.Sprintf("%s: [%s, %s]", celString(d.Tenant), celString(d.UID), celString(d.CostCenter)))
	}
	return "{" + strings.Join(entries, ", ") + "}"
}

// tenantCostCenterExpr is a CEL expression for the costCenter of the request's
// namespace's Tenant in variables.tenants, "" when there is none.
func tenantCostCenterExpr() string {
	tenant := fmt.Sprintf("namespaceObject.metadata.labels[%s]", celString(tenancyv1alpha1.TenantLabel))
	uid := fmt.Sprintf("namespaceObject.metadata.annotations[%s]", celString(tenancyv1alpha1.OwnerUIDAnnotation))
	return fmt.Sprintf("(namespaceObject != null && has(namespaceObject.metadata.labels) && %[1]s in namespaceObject.metadata.labels && %[2]s in variables.tenants"+
		" && has(namespaceObject.metadata.annotations) && %[3]s in namespaceObject.metadata.annotations && %[4]s == variables.tenants[%[2]s][0]"+
		" ? variables.tenants[%[2]s][1] : '')",
		celString(tenancyv1alpha1.TenantLabel), tenant, celString(tenancyv1alpha1.OwnerUIDAnnotation), uid)
}

// driftOf reports a namespace of one of tenants whose cost-center label is missing or
// differs from its Tenant's costCenter; nil otherwise. Pure.
func driftOf(ns *corev1.Namespace, tenants map[string]TenantDefault) *policyv1alpha1.TenantDrift {
	cc := tenantCostCenter(ns.Labels, ns.Annotations, tenants)
	if cc == "" || ns.Labels[tenancyv1alpha1.CostCenterLabel] == cc {
		return nil
	}
	return &policyv1alpha1.TenantDrift{
		Namespace:  ns.Name,
		Tenant:     ns.Labels[tenancyv1alpha1.TenantLabel],
		CostCenter: cc,
		Value:      ns.Labels[tenancyv1alpha1.CostCenterLabel],
	}
}

// firstDrift sorts drift by namespace and keeps the first maxTenantDrift. Pure.
func firstDrift(all []policyv1alpha1.TenantDrift) []policyv1alpha1.TenantDrift {
	if len(all) == 0 {
		return nil
	}
	out := slices.Clone(all)
	slices.SortFunc(out, func(a, b policyv1alpha1.TenantDrift) int { return strings.Compare(a.Namespace, b.Namespace) })
	return out[:min(len(out), maxTenantDrift)]
}

// describeDrift names up to three drifted namespaces for an Event or a message.
func describeDrift(ds []policyv1alpha1.TenantDrift) string {
	var parts []string
	for i, d := range ds {
		if i == 3 {
			break
		}
		have := "no cost-center label"
		if d.Value != "" {
			have = "cost-center=" + d.Value
		}
		parts = append(parts, fmt.Sprintf("%s (Tenant %s has costCenter %s, the namespace %s)", d.Namespace, d.Tenant, d.CostCenter, have))
	}
	return strings.Join(parts, ", ")
}

// tenantDefaultsFor reads the Tenants from the cache for a policy with
// defaultFromTenant: the defaults compiled into its mutating policy, and how many
// Tenants had a costCenter in all. Nothing without defaultFromTenant.
func (r *Reconciler) tenantDefaultsFor(ctx context.Context, p *policyv1alpha1.LabelPolicy) ([]TenantDefault, int, error) {
	if !p.Spec.DefaultFromTenant {
		return nil, 0, nil
	}
	var list tenancyv1alpha1.TenantList
	if err := r.List(ctx, &list); err != nil {
		return nil, 0, fmt.Errorf("listing Tenants: %w", err)
	}
	ds, total := tenantDefaults(list.Items)
	return ds, total, nil
}

// policiesFromTenants maps a Tenant to the LabelPolicies that take defaults from
// Tenants: its costCenter, UID or existence changed what they compile.
func (r *Reconciler) policiesFromTenants(ctx context.Context, o client.Object) []ctrl.Request {
	var list policyv1alpha1.LabelPolicyList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "Listing LabelPolicies for a Tenant", "tenant", o.GetName())
		return nil
	}
	var out []ctrl.Request
	for i := range list.Items {
		if list.Items[i].Spec.DefaultFromTenant {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKey{Name: list.Items[i].Name}})
		}
	}
	return out
}
