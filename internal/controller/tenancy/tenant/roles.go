package tenant

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/sets"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// DefaultBindableClusterRoles are the ClusterRoles a Tenant may bind in
// additionalRoleBindings when --tenant-bindable-clusterroles is not given, besides
// orderly-tenant-admin, which a Tenant may always bind. The manager's ClusterRole
// grants bind on exactly these (the marker on Reconciler): a platform team that
// allows more grants bind on them too (docs/tenant.md, "Which roles a Tenant may bind").
var DefaultBindableClusterRoles = []string{"edit", "view"}

// bindableRoles is the allow-list of ClusterRoles a Tenant may bind.
type bindableRoles sets.Set[string]

// newBindableRoles is the allow-list from the manager's flag: orderly-tenant-admin,
// plus configured, or DefaultBindableClusterRoles when configured is nil (an empty,
// non-nil list allows orderly-tenant-admin alone).
func newBindableRoles(configured []string) bindableRoles {
	if configured == nil {
		configured = DefaultBindableClusterRoles
	}
	allowed := sets.New(tenancyv1alpha1.TenantAdminClusterRole)
	for _, name := range configured {
		if name = strings.TrimSpace(name); name != "" {
			allowed.Insert(name)
		}
	}
	return bindableRoles(allowed)
}

func (b bindableRoles) names() []string { return sets.List(sets.Set[string](b)) }

// refusal is one of a Tenant's additionalRoleBindings that is not created.
type refusal struct {
	index   int
	message string
}

// refusedBindings returns the additionalRoleBindings of t that Tenants may not bind,
// in spec order: Roles, and ClusterRoles outside the allow-list. Pure.
func refusedBindings(t *tenancyv1alpha1.Tenant, allowed bindableRoles) []refusal {
	var out []refusal
	for i, b := range t.Spec.AdditionalRoleBindings {
		ref := b.RoleRef
		switch {
		case ref.APIGroup != rbacAPIGroup || ref.Kind != "ClusterRole":
			out = append(out, refusal{i, fmt.Sprintf("additionalRoleBindings[%d] binds %s %q: a Tenant binds only ClusterRoles; the tenant's owners bind the Roles of their namespaces themselves", i, ref.Kind, ref.Name)})
		case !sets.Set[string](allowed).Has(ref.Name):
			out = append(out, refusal{i, fmt.Sprintf("additionalRoleBindings[%d] binds ClusterRole %q, which Tenants may not bind (allowed: %s); the platform team can allow it with the manager's --tenant-bindable-clusterroles and a bind rule for it", i, ref.Name, strings.Join(allowed.names(), ", "))})
		}
	}
	return out
}

// refusedIndexes is the set of additionalRoleBindings indexes refused.
func refusedIndexes(refused []refusal) sets.Set[int] {
	out := sets.New[int]()
	for _, r := range refused {
		out.Insert(r.index)
	}
	return out
}

// refusedMessage summarises refusals for the RoleBindingsAllowed condition.
func refusedMessage(refused []refusal) string {
	const shown = 3
	msgs := make([]string, 0, shown)
	for _, r := range refused[:min(len(refused), shown)] {
		msgs = append(msgs, r.message)
	}
	more := ""
	if len(refused) > shown {
		more = fmt.Sprintf("; and %d more", len(refused)-shown)
	}
	return fmt.Sprintf("%d role binding(s) not created: %s%s", len(refused), strings.Join(msgs, "; "), more)
}

// forbiddenBinding explains an API server refusal to create or change a RoleBinding:
// the manager's RBAC lacks bind on its role, which the allow-list names.
func forbiddenBinding(rb *rbacv1.RoleBinding, err error) string {
	if !apierrors.IsForbidden(err) {
		return ""
	}
	return fmt.Sprintf("the API server refused RoleBinding %s/%s to %s %q: the manager may not bind it; grant the manager bind on it (resourceNames) as docs/tenant.md shows, or remove it from --tenant-bindable-clusterroles",
		rb.Namespace, rb.Name, rb.RoleRef.Kind, rb.RoleRef.Name)
}

// checkBindable asks the API server, once at start-up, whether the manager may bind
// each allowed ClusterRole, and logs the ones it may not: the flag and the manager's
// RBAC must agree, and a Tenant asking for such a role would fail with Forbidden.
func checkBindable(ctx context.Context, c client.Client, allowed bindableRoles) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	var missing []string
	for _, name := range allowed.names() {
		review := &authorizationv1.SelfSubjectAccessReview{Spec: authorizationv1.SelfSubjectAccessReviewSpec{
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "bind", Group: rbacAPIGroup, Resource: "clusterroles", Name: name},
		}}
		if err := c.Create(ctx, review); err != nil {
			log.FromContext(ctx).Error(err, "Checking whether the manager may bind the ClusterRoles Tenants may bind")
			return
		}
		if !review.Status.Allowed {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		slices.Sort(missing)
		log.FromContext(ctx).Error(nil, "Tenants may bind ClusterRoles the manager may not bind: grant the manager bind on them, or remove them from --tenant-bindable-clusterroles",
			"clusterRoles", missing)
	}
}
