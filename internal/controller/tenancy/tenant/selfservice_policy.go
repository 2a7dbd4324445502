package tenant

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// Names of the cluster-scoped objects of spec.selfService.
const (
	// selfServicePolicyName is the one ValidatingAdmissionPolicy, with the Tenant as
	// its parameter, that every self-service Tenant's binding uses. It is shared, so it
	// is owned by no Tenant; it does nothing without a binding.
	selfServicePolicyName = "orderly-tenant-self-service"
	// guardPolicyName is the parameterless policy (and its binding) that keeps an owner
	// who may create namespaces only through self-service from creating any other
	// namespace: unlabelled, or labelled for a tenant it does not own.
	guardPolicyName = "orderly-tenant-namespace-guard"
	// ownerRolePrefix starts the names of the ClusterRole and ClusterRoleBinding that
	// give a Tenant's owners their cluster-wide rights. The colon keeps them apart from
	// orderly-tenant-admin and any other role whatever the Tenant's name.
	ownerRolePrefix = "orderly-tenant:"
	tenancyGroup    = "tenancy.orderly.dev"
)

// selfServiceBindingName is the name of Tenant t's binding of selfServicePolicyName.
func selfServiceBindingName(t *tenancyv1alpha1.Tenant) string {
	return selfServicePolicyName + "-" + t.Name
}

// ownerRoleName is the name of Tenant t's owners' ClusterRole and ClusterRoleBinding.
func ownerRoleName(t *tenancyv1alpha1.Tenant) string { return ownerRolePrefix + t.Name }

func sharedMeta(name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}
}

func tenantMeta(t *tenancyv1alpha1.Tenant, name string) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: name, Labels: map[string]string{
		labels.ManagedBy:            labels.ManagedByValue,
		tenancyv1alpha1.TenantLabel: t.Name,
	}}
}

func cel(s string) string { return strconv.Quote(s) }

// namespaceRules matches writes of namespaces.
func namespaceRules(ops ...admissionv1.OperationType) *admissionv1.MatchResources {
	equivalent := admissionv1.Equivalent
	return &admissionv1.MatchResources{
		ResourceRules: []admissionv1.NamedRuleWithOperations{{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: ops,
			Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}, Scope: ptr.To(admissionv1.AllScopes)},
		}}},
		MatchPolicy:       &equivalent,
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
	}
}

// labelOf is a CEL expression for obj's label key, "" when unset (obj may be null).
func labelOf(obj, key string) string {
	return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.labels) && %[2]s in %[1]s.metadata.labels ? %[1]s.metadata.labels[%[2]s] : '')", obj, cel(key))
}

// reservedKeyCEL is reservedKey for CEL.
const reservedKeyCEL = `^([^/]*[.])?(kubernetes[.]io|k8s[.]io|orderly[.]dev)/`

// selfServicePolicy is the admission policy of every self-service Tenant; params is
// the Tenant of the binding, which matches only namespaces labelled with its name.
// managerNS, the manager's namespace, is never a self-service name.
//
// A namespace listed in the Tenant's spec.namespaces is always admitted: Orderly
// creates and labels those itself. Any other namespace labelled for the tenant is
// "joining": on create it must come from an owner, fit the naming rule, stay within
// maxNamespaces and set no reserved labels or annotations (the same rule as a Tenant's
// own namespaces: Pod Security restricted is the one exception); on update (a label
// added to an existing namespace) it is refused, since an existing namespace is handed
// to a tenant by listing it and annotating it for adoption, never by a label.
func selfServicePolicy(managerNS string) *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	tenantLabel := tenancyv1alpha1.TenantLabel
	hasSS := "has(params.spec.selfService)"
	names := "(" + hasSS + " && has(params.spec.selfService.namePrefix) ? 'names starting with ' + params.spec.selfService.namePrefix : " +
		"(" + hasSS + " && has(params.spec.selfService.namePattern) ? 'names matching ^(?:' + params.spec.selfService.namePattern + ')$' : 'no names'))"
	notManager := "true"
	if managerNS != "" {
		notManager = "object.metadata.name != " + cel(managerNS)
	}
	psKeys := make([]string, 0, len(podSecurityLevels))
	for _, k := range podSecurityLevels {
		psKeys = append(psKeys, cel(k))
	}
	labelsOK := fmt.Sprintf("!has(object.metadata.labels) || object.metadata.labels.all(k, k == %s || k == %s || (k in [%s] && object.metadata.labels[k] == 'restricted') || (k != %s && !k.matches(%s)))",
		cel(tenantLabel), cel(tenancyv1alpha1.NamespaceNameLabel), strings.Join(psKeys, ", "), cel(tenancyv1alpha1.CostCenterLabel), cel(reservedKeyCEL))
	annotationsOK := fmt.Sprintf("!has(object.metadata.annotations) || object.metadata.annotations.all(k, !k.matches(%s))", cel(reservedKeyCEL))
	owner := "has(params.spec.owners) && params.spec.owners.exists(s, " +
		"(s.kind == 'User' && s.name == request.userInfo.username) || " +
		"(s.kind == 'Group' && has(request.userInfo.groups) && s.name in request.userInfo.groups) || " +
		"(s.kind == 'ServiceAccount' && request.userInfo.username == 'system:serviceaccount:' + (has(s.namespace) ? s.namespace : '') + ':' + s.name))"
	prefix := "'Tenant ' + params.metadata.name + ': namespace ' + object.metadata.name + ' '"
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: sharedMeta(selfServicePolicyName),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			ParamKind:        &admissionv1.ParamKind{APIVersion: tenancyv1alpha1.GroupVersion.String(), Kind: "Tenant"},
			MatchConstraints: namespaceRules(admissionv1.Create, admissionv1.Update),
			Variables: []admissionv1.Variable{
				{Name: "declared", Expression: "has(params.spec.namespaces) && params.spec.namespaces.exists(n, n.name == object.metadata.name)"},
				{Name: "joining", Expression: fmt.Sprintf("%s == params.metadata.name && %s != params.metadata.name && !variables.declared", labelOf("object", tenantLabel), labelOf("oldObject", tenantLabel))},
				{Name: "creating", Expression: "variables.joining && request.operation == 'CREATE'"},
				{Name: "count", Expression: "has(params.status) && has(params.status.selfServiceNamespaces) ? params.status.selfServiceNamespaces : 0"},
			},
			Validations: []admissionv1.Validation{
				{
					Expression:        "!variables.joining || request.operation == 'CREATE'",
					MessageExpression: prefix + " + 'cannot join the tenant by a label: the platform team lists it in the Tenant\\'s spec.namespaces and annotates it " + tenancyv1alpha1.AdoptAnnotation + "=' + params.metadata.name",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "!variables.creating || " + hasSS,
					MessageExpression: prefix + " + 'refused: the tenant does not allow self-service namespaces (spec.selfService is not set); ask the platform team to list it in spec.namespaces'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "!variables.creating || !" + hasSS + " || (" + owner + ")",
					MessageExpression: prefix + " + 'refused: only the tenant\\'s owners may create its namespaces, and ' + request.userInfo.username + ' is not one of its spec.owners'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression: "!variables.creating || !" + hasSS + " || (!object.metadata.name.startsWith('kube-') && " + notManager + " && " +
						"(has(params.spec.selfService.namePrefix) ? object.metadata.name.startsWith(params.spec.selfService.namePrefix) : " +
						"object.metadata.name.matches('^(?:' + params.spec.selfService.namePattern + ')$')))",
					MessageExpression: prefix + " + 'refused: the name does not fit the tenant\\'s self-service rule (' + " + names + " + ')'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "!variables.creating || !" + hasSS + " || variables.count < params.spec.selfService.maxNamespaces",
					MessageExpression: prefix + " + 'refused: the tenant already has ' + string(variables.count) + ' self-service namespaces, its maximum (spec.selfService.maxNamespaces ' + string(params.spec.selfService.maxNamespaces) + '); delete one first'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "!variables.creating || ((" + labelsOK + ") && (" + annotationsOK + "))",
					MessageExpression: prefix + " + 'refused: a self-service namespace may not set labels or annotations under kubernetes.io/, k8s.io/ or orderly.dev/ (nor cost-center), except Pod Security enforce, audit and warn set to restricted'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
}

// selfServiceBinding binds selfServicePolicy with Tenant t as its parameter, for the
// namespaces labelled with t's name only, so that each namespace write is judged
// against one Tenant whatever the number of Tenants. Decision: one binding per Tenant
// rather than one binding whose paramRef selects every Tenant: with a selector the
// API server would evaluate the policy against every self-service Tenant on every
// namespace write.
func selfServiceBinding(t *tenancyv1alpha1.Tenant) *admissionv1.ValidatingAdmissionPolicyBinding {
	deny := admissionv1.DenyAction
	equivalent := admissionv1.Equivalent
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: tenantMeta(t, selfServiceBindingName(t)),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: selfServicePolicyName,
			ParamRef:   &admissionv1.ParamRef{Name: t.Name, ParameterNotFoundAction: &deny},
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{tenancyv1alpha1.TenantLabel: t.Name}},
				MatchPolicy:       &equivalent,
			},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

// guardPolicy keeps an owner who may create namespaces only through self-service to
// namespaces labelled for a self-service Tenant it owns. Such a requester holds create
// on the marker resource (SelfServiceMarkerResource, granted only by the generated
// ClusterRole) and may not create Tenants (a platform administrator, who may, is not
// restricted); the Tenant it names must grant it the self-service verb (again only the
// generated ClusterRole does, by name). The Tenant's own binding then checks the rest.
func guardPolicy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	label := labelOf("object", tenancyv1alpha1.TenantLabel)
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: sharedMeta(guardPolicyName),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &fail,
			MatchConstraints: namespaceRules(admissionv1.Create),
			Variables: []admissionv1.Variable{
				{Name: "tenant", Expression: label},
				{Name: "restricted", Expression: fmt.Sprintf("authorizer.group(%s).resource(%s).check('create').allowed() && !authorizer.group(%s).resource('tenants').check('create').allowed()",
					cel(tenancyGroup), cel(tenancyv1alpha1.SelfServiceMarkerResource), cel(tenancyGroup))},
			},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!variables.restricted || (variables.tenant != '' && authorizer.group(%s).resource('tenants').name(variables.tenant).check(%s).allowed())",
					cel(tenancyGroup), cel(tenancyv1alpha1.SelfServiceVerb)),
				MessageExpression: "'namespace ' + object.metadata.name + ' refused: you may create namespaces only for a Tenant you own that allows self-service; label it " + tenancyv1alpha1.TenantLabel + "=<tenant>' + " +
					"(variables.tenant != '' ? ' (you own no self-service Tenant named ' + variables.tenant + ')' : '')",
				Reason: ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

func guardBinding() *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: sharedMeta(guardPolicyName),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        guardPolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

// ownerRole is the ClusterRole of Tenant t's owners: get on their own Tenant (its
// status lists their namespaces and quota usage), and, with self-service enabled,
// create namespaces (what they create is judged by the admission policies above),
// the marker and the self-service verb those policies check, and delete on the
// self-service namespaces they have (selfService, sorted). Nothing lets them list or
// read other namespaces, or other Tenants.
func ownerRole(t *tenancyv1alpha1.Tenant, enabled bool, selfService []string) *rbacv1.ClusterRole {
	if !enabled {
		return &rbacv1.ClusterRole{ObjectMeta: tenantMeta(t, ownerRoleName(t)), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{tenancyGroup}, Resources: []string{"tenants"}, Verbs: []string{"get"}, ResourceNames: []string{t.Name}},
		}}
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create"}},
		{APIGroups: []string{tenancyGroup}, Resources: []string{tenancyv1alpha1.SelfServiceMarkerResource}, Verbs: []string{"create"}},
		{APIGroups: []string{tenancyGroup}, Resources: []string{"tenants"}, Verbs: []string{"get", tenancyv1alpha1.SelfServiceVerb}, ResourceNames: []string{t.Name}},
	}
	if len(selfService) > 0 {
		rules = append(rules, rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"delete"}, ResourceNames: selfService})
	}
	return &rbacv1.ClusterRole{ObjectMeta: tenantMeta(t, ownerRoleName(t)), Rules: rules}
}

func ownerRoleBinding(t *tenancyv1alpha1.Tenant) *rbacv1.ClusterRoleBinding {
	return &rbacv1.ClusterRoleBinding{
		ObjectMeta: tenantMeta(t, ownerRoleName(t)),
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: ownerRoleName(t)},
		Subjects:   normalizeSubjects(t.Spec.Owners),
	}
}

// preventDeletionPolicyName is the parameterless policy (and its binding) of
// spec.preventDeletion, shared by every Tenant.
const preventDeletionPolicyName = "orderly-tenant-prevent-deletion"

// preventDeletionPolicy refuses to delete a Tenant with spec.preventDeletion and a
// namespace labelled PreventDeletionLabel=true (Orderly keeps the label on the
// namespaces of such a Tenant; the Tenant itself cannot set it, nor can owners on a
// self-service namespace). It needs no parameter: what it judges is on the object.
func preventDeletionPolicy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	equivalent := admissionv1.Equivalent
	label := tenancyv1alpha1.PreventDeletionLabel
	nsTenant := labelOf("oldObject", tenancyv1alpha1.TenantLabel)
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: sharedMeta(preventDeletionPolicyName),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules: []admissionv1.NamedRuleWithOperations{
					{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Delete},
						Rule:       admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"namespaces"}, Scope: ptr.To(admissionv1.AllScopes)},
					}},
					{RuleWithOperations: admissionv1.RuleWithOperations{
						Operations: []admissionv1.OperationType{admissionv1.Delete},
						Rule:       admissionv1.Rule{APIGroups: []string{tenancyGroup}, APIVersions: []string{"*"}, Resources: []string{"tenants"}, Scope: ptr.To(admissionv1.AllScopes)},
					}},
				},
				MatchPolicy:       &equivalent,
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
			},
			Validations: []admissionv1.Validation{
				{
					Expression:        fmt.Sprintf("request.resource.resource != 'namespaces' || %s != 'true'", labelOf("oldObject", label)),
					MessageExpression: "'namespace ' + oldObject.metadata.name + ' belongs to tenant ' + " + nsTenant + " + ', which has spec.preventDeletion: lift it first (' + " + lift(nsTenant) + " + ')'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "request.resource.resource != 'tenants' || !has(oldObject.spec.preventDeletion) || !oldObject.spec.preventDeletion",
					MessageExpression: "'Tenant ' + oldObject.metadata.name + ' has spec.preventDeletion: lift it first (' + " + lift("oldObject.metadata.name") + " + ')'",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
}

// lift is a CEL expression for the command that lifts the protection of the Tenant
// whose name is the CEL expression name.
func lift(name string) string {
	return cel("kubectl patch tenant ") + " + " + name + " + " + cel(` --type merge -p '{"spec":{"preventDeletion":false}}'`)
}

func preventDeletionBinding() *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: sharedMeta(preventDeletionPolicyName),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        preventDeletionPolicyName,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}
