package labelpolicy

import (
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// defaultKinds are matched when spec.match.kinds is empty (the CRD defaults it too).
var defaultKinds = []policyv1alpha1.Kind{
	policyv1alpha1.KindDeployment, policyv1alpha1.KindStatefulSet, policyv1alpha1.KindDaemonSet,
	policyv1alpha1.KindJob, policyv1alpha1.KindCronJob, policyv1alpha1.KindPod,
}

// kindInfo is where a kind is served and where its pod template lives.
type kindInfo struct {
	group, version, resource string
	// templatePath is the path of the pod template's metadata, nil for Pods.
	templatePath []string
}

var kinds = map[policyv1alpha1.Kind]kindInfo{
	policyv1alpha1.KindDeployment:  {"apps", "v1", "deployments", []string{"spec", "template"}},
	policyv1alpha1.KindStatefulSet: {"apps", "v1", "statefulsets", []string{"spec", "template"}},
	policyv1alpha1.KindDaemonSet:   {"apps", "v1", "daemonsets", []string{"spec", "template"}},
	policyv1alpha1.KindJob:         {"batch", "v1", "jobs", []string{"spec", "template"}},
	policyv1alpha1.KindCronJob:     {"batch", "v1", "cronjobs", []string{"spec", "jobTemplate", "spec", "template"}},
	policyv1alpha1.KindPod:         {"", "v1", "pods", nil},
}

// Compiled is the admission a LabelPolicy becomes.
type Compiled struct {
	VAP        *admissionv1.ValidatingAdmissionPolicy
	VAPBinding *admissionv1.ValidatingAdmissionPolicyBinding
	// MAP and MAPBinding are set when something needs mutating (Default, or
	// propagateToPodTemplate) in the Native mode.
	MAP        *admissionv1.MutatingAdmissionPolicy
	MAPBinding *admissionv1.MutatingAdmissionPolicyBinding
	// Webhook is set when something needs mutating in the Webhook mode.
	Webhook *admissionv1.MutatingWebhookConfiguration
}

// WebhookPathPrefix is where the webhook server serves LabelPolicies: the path of
// policy P is WebhookPathPrefix + P.
const WebhookPathPrefix = "/labelpolicy/"

// objectName is the name of every admission object generated for policy p.
func objectName(p *policyv1alpha1.LabelPolicy) string {
	return "orderly-labelpolicy-" + p.Name
}

// matchKinds returns the policy's kinds, defaulted and in a stable order.
func matchKinds(p *policyv1alpha1.LabelPolicy) []policyv1alpha1.Kind {
	ks := p.Spec.Match.Kinds
	if len(ks) == 0 {
		ks = defaultKinds
	}
	out := slices.Clone(ks)
	slices.Sort(out)
	return slices.Compact(out)
}

// excludedNamespaces returns the listed namespaces, the system namespaces and the
// manager's namespace (managerNS, when known), sorted. A listed name that no
// namespace can have (the CRD checks only its length) is left out: it excludes
// nothing, and in the bindings' NotIn it would make the API server refuse them.
func excludedNamespaces(p *policyv1alpha1.LabelPolicy, managerNS string) []string {
	out := slices.Clone(kit.SystemNamespaces)
	for _, ns := range p.Spec.Match.ExcludedNamespaces {
		if len(validation.IsDNS1123Label(ns)) == 0 {
			out = append(out, ns)
		}
	}
	if managerNS != "" {
		out = append(out, managerNS)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// needsMutation says whether the policy has anything to fill in at admission.
func needsMutation(p *policyv1alpha1.LabelPolicy) bool {
	return p.Spec.Action == policyv1alpha1.ActionDefault || p.Spec.PropagateToPodTemplate
}

// Compile turns a LabelPolicy into admission objects for the given admission mode
// (an AdmissionMode* constant); endpoint is used in the Webhook mode only. managerNS is
// the manager's namespace, which, like every kube-* namespace, no generated object
// applies to (Protected). Every exception in p.Spec.Exceptions is compiled in: the
// controller passes a copy with the exceptions active now (withActiveExceptions).
// Pure: the controller writes what it returns, and unit tests read it.
func Compile(p *policyv1alpha1.LabelPolicy, mode string, endpoint *admission.Endpoint, managerNS string) Compiled {
	return CompileWith(p, mode, endpoint, managerNS, Options{})
}

// Options are what Compile needs beyond the policy, read from the world by the
// controller.
type Options struct {
	// ValuesCutoff is valuesCutoff of the policy's LabelValueSet: its values that
	// expire at or before it are retired. Zero when none has expired.
	ValuesCutoff time.Time
	// TenantDefaults are the Tenants' cost centers, for a policy with
	// defaultFromTenant (tenantDefaults).
	TenantDefaults []TenantDefault
}

// CompileWith is Compile with opts.
func CompileWith(p *policyv1alpha1.LabelPolicy, mode string, endpoint *admission.Endpoint, managerNS string, opts Options) Compiled {
	c := Compiled{VAP: compileVAP(p, managerNS, opts), VAPBinding: compileVAPBinding(p, managerNS)}
	if !needsMutation(p) {
		return c
	}
	switch mode {
	case policyv1alpha1.AdmissionModeNative:
		c.MAP = compileMAP(p, managerNS, opts)
		c.MAPBinding = compileMAPBinding(p, managerNS)
	case policyv1alpha1.AdmissionModeWebhook:
		if endpoint != nil {
			c.Webhook = compileWebhook(p, endpoint, managerNS)
		}
	}
	return c
}

func objectMeta(p *policyv1alpha1.LabelPolicy) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name: objectName(p),
		Labels: map[string]string{
			labels.ManagedBy:           labels.ManagedByValue,
			policyv1alpha1.PolicyLabel: p.Name,
		},
	}
}

// matchConstraints matches CREATE and UPDATE of the policy's kinds (never their
// subresources, so scaling and status writes are not affected).
func matchConstraints(p *policyv1alpha1.LabelPolicy) *admissionv1.MatchResources {
	byGroup := map[string][]string{}
	var groups []string
	for _, k := range matchKinds(p) {
		info := kinds[k]
		if _, ok := byGroup[info.group]; !ok {
			groups = append(groups, info.group)
		}
		byGroup[info.group] = append(byGroup[info.group], info.resource)
	}
	slices.Sort(groups)
	var rules []admissionv1.NamedRuleWithOperations
	for _, g := range groups {
		res := byGroup[g]
		slices.Sort(res)
		rules = append(rules, admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{g}, APIVersions: []string{"v1"}, Resources: res, Scope: ptr.To(admissionv1.NamespacedScope)},
		}})
	}
	equivalent := admissionv1.Equivalent
	return &admissionv1.MatchResources{
		ResourceRules:     rules,
		MatchPolicy:       &equivalent,
		NamespaceSelector: &metav1.LabelSelector{},
		ObjectSelector:    &metav1.LabelSelector{},
	}
}

// bindingMatch restricts a binding to the selected, not excluded namespaces; the
// manager's namespace is always excluded.
func bindingMatch(p *policyv1alpha1.LabelPolicy, managerNS string) *admissionv1.MatchResources {
	sel := &metav1.LabelSelector{}
	if p.Spec.Match.NamespaceSelector != nil {
		sel = p.Spec.Match.NamespaceSelector.DeepCopy()
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1NamespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: excludedNamespaces(p, managerNS),
	})
	equivalent := admissionv1.Equivalent
	return &admissionv1.MatchResources{NamespaceSelector: sel, ObjectSelector: &metav1.LabelSelector{}, MatchPolicy: &equivalent}
}

const corev1NamespaceNameLabel = "kubernetes.io/metadata.name"

// matchConditions are the conditions of every generated policy and webhook: never in
// a protected namespace, and no Pod that a trusted controller created (owners.go).
func matchConditions(p *policyv1alpha1.LabelPolicy, managerNS string) []admissionv1.MatchCondition {
	return []admissionv1.MatchCondition{kit.ProtectedMatchCondition(managerNS), podsMatchCondition(p)}
}

// celString quotes s as a CEL string literal.
func celString(s string) string { return strconv.Quote(s) }

// labelOf is a CEL expression for obj's value of the policy's label, ” when unset.
func labelOf(obj, key string) string {
	return fmt.Sprintf("(has(%[1]s.metadata.labels) && %[2]s in %[1]s.metadata.labels ? %[1]s.metadata.labels[%[2]s] : '')", obj, celString(key))
}

// anchoredPattern is allowedPattern as a regular expression that matches whole values.
func anchoredPattern(p *policyv1alpha1.LabelPolicy) string {
	return "^(?:" + closeQuote(p.Spec.AllowedPattern) + ")$"
}

// closeQuote ends a \Q literal that runs to the end of pattern with \E: RE2 reads it
// to the end, where it would swallow the ")$" that anchoredPattern appends.
func closeQuote(pattern string) string {
	for i := 0; i+1 < len(pattern); i++ {
		if pattern[i] != '\\' {
			continue
		}
		if pattern[i+1] != 'Q' {
			i++ // an escaped character
			continue
		}
		end := strings.Index(pattern[i+2:], `\E`)
		if end < 0 {
			return pattern + `\E`
		}
		i += 2 + end + 1
	}
	return pattern
}

// allowedExpr is a CEL expression that is true when the string v is an allowed value.
func allowedExpr(p *policyv1alpha1.LabelPolicy, v string) string {
	var alts []string
	if len(p.Spec.AllowedValues) > 0 {
		vals := make([]string, 0, len(p.Spec.AllowedValues))
		for _, a := range p.Spec.AllowedValues {
			vals = append(vals, celString(a))
		}
		alts = append(alts, fmt.Sprintf("%s in [%s]", v, strings.Join(vals, ", ")))
	}
	if p.Spec.AllowedPattern != "" {
		alts = append(alts, fmt.Sprintf("%s.matches(%s)", v, celString(anchoredPattern(p))))
	}
	if p.Spec.AllowedValuesFrom != nil {
		alts = append(alts, fmt.Sprintf("%s in variables.setValues", v))
	}
	if len(alts) == 0 {
		return fmt.Sprintf("%s != ''", v)
	}
	return fmt.Sprintf("%s != '' && (%s)", v, strings.Join(alts, " || "))
}

// allowedDescription says in words which values are allowed.
func allowedDescription(p *policyv1alpha1.LabelPolicy) string {
	var parts []string
	if len(p.Spec.AllowedValues) > 0 {
		parts = append(parts, "one of ["+strings.Join(p.Spec.AllowedValues, ", ")+"]")
	}
	if p.Spec.AllowedPattern != "" {
		parts = append(parts, "a value matching "+anchoredPattern(p))
	}
	if f := p.Spec.AllowedValuesFrom; f != nil {
		parts = append(parts, "an active value of LabelValueSet "+f.LabelValueSet+" (kubectl get labelvalueset "+f.LabelValueSet+" -o yaml)")
	}
	if len(parts) == 0 {
		return "any non-empty value"
	}
	return strings.Join(parts, " or ")
}

// fixHint tells the person who was rejected what to do.
func fixHint(p *policyv1alpha1.LabelPolicy) string {
	example := "<value>"
	switch {
	case p.Spec.DefaultValue != "":
		example = p.Spec.DefaultValue
	case len(p.Spec.AllowedValues) > 0:
		example = p.Spec.AllowedValues[0]
	}
	hint := fmt.Sprintf("set metadata.labels[%q] to an allowed value, e.g. %s: %s", p.Spec.Label, p.Spec.Label, example)
	if p.Spec.Action == policyv1alpha1.ActionDefault {
		hint += fmt.Sprintf(", or label the namespace with %s=<allowed value> so it is filled in", p.Spec.Label)
	}
	return hint + fmt.Sprintf(" (see: kubectl get labelpolicy %s -o yaml)", p.Name)
}

// RejectionMessage is the message for a rejected object of kind in ns/name whose label
// has value (”  when missing). It mirrors the CEL messageExpression, for the audit.
func RejectionMessage(p *policyv1alpha1.LabelPolicy, kind, ns, name, value string) string {
	what := "has no label " + p.Spec.Label
	if value != "" {
		what = fmt.Sprintf("has label %s=%s, which is not allowed", p.Spec.Label, value)
	}
	return fmt.Sprintf("LabelPolicy %s: %s %s/%s %s. Allowed: %s. To fix: %s", p.Name, kind, ns, name, what, allowedDescription(p), fixHint(p))
}

func compileVAP(p *policyv1alpha1.LabelPolicy, managerNS string, opts Options) *admissionv1.ValidatingAdmissionPolicy {
	failure := admissionv1.Fail
	if p.Spec.Action == policyv1alpha1.ActionAudit {
		failure = admissionv1.Ignore
	}
	msg := fmt.Sprintf(`%s + request.kind.kind + ' ' + request.namespace + '/' + (has(object.metadata.name) ? object.metadata.name : object.metadata.generateName + '*') + (variables.value == '' ? %s : %s + variables.value + %s) + %s`,
		celString("LabelPolicy "+p.Name+": "),
		celString(" has no label "+p.Spec.Label),
		celString(" has label "+p.Spec.Label+"="),
		celString(", which is not allowed"),
		celString(". Allowed: "+allowedDescription(p)+". To fix: "+fixHint(p)))
	vars := []admissionv1.Variable{
		{Name: "value", Expression: labelOf("object", p.Spec.Label)},
		// Updates that leave the label as it was are admitted: existing
		// violations are the audit's business, and blocking them would stop
		// controllers (the Deployment controller, the garbage collector) from
		// updating the objects they manage.
		{Name: "oldValue", Expression: fmt.Sprintf("oldObject == null ? '' : %s", labelOf("oldObject", p.Spec.Label))},
	}
	expr := fmt.Sprintf("(%s) || (request.operation == 'UPDATE' && oldObject != null && variables.value == variables.oldValue)", allowedExpr(p, "variables.value"))
	var paramKind *admissionv1.ParamKind
	if p.Spec.AllowedValuesFrom != nil {
		paramKind = valueSetParamKind
		vars = append(vars,
			admissionv1.Variable{Name: "setValues", Expression: setValuesExpr(opts.ValuesCutoff)},
			admissionv1.Variable{Name: "retired", Expression: retiredExpr})
		// A retired value gets its own message: the person knows the value, and
		// needs to hear that it was retired rather than mistyped.
		msg = fmt.Sprintf(`(variables.retired ? %s + request.kind.kind + ' ' + request.namespace + '/' + (has(object.metadata.name) ? object.metadata.name : object.metadata.generateName + '*') + %s + variables.value + %s : %s)`,
			celString("LabelPolicy "+p.Name+": "),
			celString(" has label "+p.Spec.Label+"="),
			celString(", which is retired in LabelValueSet "+p.Spec.AllowedValuesFrom.LabelValueSet+". Allowed: "+allowedDescription(p)+". To fix: "+fixHint(p)),
			msg)
	}
	// Without exceptions the expression is exactly what it was before they existed,
	// so a policy without them costs the API server nothing more.
	if ex := exceptedExpr(p); ex != "" {
		vars = append(vars, admissionv1.Variable{Name: "excepted", Expression: ex})
		expr = "variables.excepted || " + expr
	}
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: objectMeta(p),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy:    &failure,
			ParamKind:        paramKind,
			MatchConstraints: matchConstraints(p),
			MatchConditions:  matchConditions(p, managerNS),
			Variables:        vars,
			Validations: []admissionv1.Validation{{
				Expression:        expr,
				Message:           fmt.Sprintf("LabelPolicy %s: label %s is missing or not allowed. Allowed: %s. To fix: %s", p.Name, p.Spec.Label, allowedDescription(p), fixHint(p)),
				MessageExpression: msg,
				Reason:            ptr.To(metav1.StatusReasonForbidden),
			}},
		},
	}
}

func compileVAPBinding(p *policyv1alpha1.LabelPolicy, managerNS string) *admissionv1.ValidatingAdmissionPolicyBinding {
	actions := []admissionv1.ValidationAction{admissionv1.Deny}
	if p.Spec.Action == policyv1alpha1.ActionAudit {
		actions = []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
	}
	var paramRef *admissionv1.ParamRef
	if f := p.Spec.AllowedValuesFrom; f != nil {
		// Without its list the policy cannot tell an allowed value: it refuses, as it
		// refuses when it cannot be evaluated (failurePolicy Fail).
		deny := admissionv1.DenyAction
		paramRef = &admissionv1.ParamRef{Name: f.LabelValueSet, ParameterNotFoundAction: &deny}
	}
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: objectMeta(p),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        objectName(p),
			ParamRef:          paramRef,
			ValidationActions: actions,
			MatchResources:    bindingMatch(p, managerNS),
		},
	}
}

// applyLabels is a CEL ApplyConfiguration that sets the policy's label to
// variables.value at the metadata found under path ("" for the object's own).
func applyLabels(p *policyv1alpha1.LabelPolicy, path []string) string {
	inner := fmt.Sprintf("labels: {%s: variables.value}", celString(p.Spec.Label))
	typ := "Object"
	for _, f := range path {
		typ += "." + f
	}
	expr := fmt.Sprintf("%s.metadata{%s}", typ, inner)
	expr = "metadata: " + expr
	for i := len(path) - 1; i >= 0; i-- {
		typ = "Object." + strings.Join(path[:i+1], ".")
		expr = fmt.Sprintf("%s: %s{%s}", path[i], typ, expr)
	}
	return "Object{" + expr + "}"
}

// celPath is a CEL expression for object.<path>.metadata.labels having the label.
func hasLabelAt(p *policyv1alpha1.LabelPolicy, path []string) string {
	obj := "object"
	var guards []string
	for _, f := range path {
		guards = append(guards, fmt.Sprintf("has(%s.%s)", obj, f))
		obj += "." + f
	}
	guards = append(guards, fmt.Sprintf("has(%s.metadata)", obj), fmt.Sprintf("has(%s.metadata.labels)", obj),
		fmt.Sprintf("%s in %s.metadata.labels", celString(p.Spec.Label), obj))
	return strings.Join(guards, " && ")
}

func compileMAP(p *policyv1alpha1.LabelPolicy, managerNS string, opts Options) *admissionv1.MutatingAdmissionPolicy {
	own := labelOf("object", p.Spec.Label)
	value := own
	var vars []admissionv1.Variable
	if p.Spec.Action == policyv1alpha1.ActionDefault {
		// namespaceObject is evaluated here, not in matchConditions, where the API
		// server does not provide it to mutating policies.
		ns := fmt.Sprintf("(namespaceObject != null && has(namespaceObject.metadata.labels) && %[1]s in namespaceObject.metadata.labels ? namespaceObject.metadata.labels[%[1]s] : '')", celString(p.Spec.Label))
		fallback := fmt.Sprintf("(%s != '' ? %s : %s)", ns, ns, celString(p.Spec.DefaultValue))
		if p.Spec.DefaultFromTenant && len(opts.TenantDefaults) > 0 {
			// The Tenant comes before the namespace's own label: it is the source of
			// truth, and the label may have been removed or changed by hand.
			vars = append(vars,
				admissionv1.Variable{Name: "tenants", Expression: tenantsExpr(opts.TenantDefaults)},
				admissionv1.Variable{Name: "tenantCostCenter", Expression: tenantCostCenterExpr()})
			fallback = fmt.Sprintf("(variables.tenantCostCenter != '' ? variables.tenantCostCenter : %s)", fallback)
		}
		value = fmt.Sprintf("%s != '' ? %s : %s", own, own, fallback)
	}
	vars = append(vars, admissionv1.Variable{Name: "value", Expression: value})
	var mutations []admissionv1.Mutation
	if p.Spec.Action == policyv1alpha1.ActionDefault {
		mutations = append(mutations, admissionv1.Mutation{
			PatchType: admissionv1.PatchTypeApplyConfiguration,
			ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: fmt.Sprintf(
				"variables.value == '' || %s != '' ? Object{} : %s", own, applyLabels(p, nil))},
		})
	}
	if p.Spec.PropagateToPodTemplate {
		for _, k := range matchKinds(p) {
			info := kinds[k]
			if info.templatePath == nil {
				continue
			}
			// On UPDATE the template is labelled only when it changes anyway: labelling
			// it on its own would roll out every workload whose replicas someone patches.
			tmpl := strings.Join(info.templatePath, ".")
			unchanged := fmt.Sprintf("(request.operation == 'UPDATE' && oldObject != null && object.%[1]s == oldObject.%[1]s)", tmpl)
			mutations = append(mutations, admissionv1.Mutation{
				PatchType: admissionv1.PatchTypeApplyConfiguration,
				ApplyConfiguration: &admissionv1.ApplyConfiguration{Expression: fmt.Sprintf(
					"request.kind.kind != %s || variables.value == '' || %s || (%s) ? Object{} : %s",
					celString(string(k)), unchanged, hasLabelAt(p, info.templatePath), applyLabels(p, info.templatePath))},
			})
		}
	}
	failure := admissionv1.Ignore
	return &admissionv1.MutatingAdmissionPolicy{
		ObjectMeta: objectMeta(p),
		Spec: admissionv1.MutatingAdmissionPolicySpec{
			FailurePolicy:      &failure,
			MatchConstraints:   matchConstraints(p),
			MatchConditions:    matchConditions(p, managerNS),
			Variables:          vars,
			Mutations:          mutations,
			ReinvocationPolicy: admissionv1.NeverReinvocationPolicy,
		},
	}
}

func compileMAPBinding(p *policyv1alpha1.LabelPolicy, managerNS string) *admissionv1.MutatingAdmissionPolicyBinding {
	return &admissionv1.MutatingAdmissionPolicyBinding{
		ObjectMeta: objectMeta(p),
		Spec: admissionv1.MutatingAdmissionPolicyBindingSpec{
			PolicyName:     objectName(p),
			MatchResources: bindingMatch(p, managerNS),
		},
	}
}

// compileWebhook is the MutatingWebhookConfiguration that sends the policy's
// workloads to Orderly's webhook: the same rules, namespaces and match conditions as
// the MutatingAdmissionPolicy it stands in for.
func compileWebhook(p *policyv1alpha1.LabelPolicy, e *admission.Endpoint, managerNS string) *admissionv1.MutatingWebhookConfiguration {
	var rules []admissionv1.RuleWithOperations
	for _, r := range matchConstraints(p).ResourceRules {
		rules = append(rules, r.RuleWithOperations)
	}
	path := WebhookPathPrefix + p.Name
	cc := admissionv1.WebhookClientConfig{CABundle: e.CABundle}
	if e.URL != "" {
		cc.URL = ptr.To(strings.TrimSuffix(e.URL, "/") + path)
	} else if e.Service != nil {
		svc := *e.Service
		svc.Path = &path
		cc.Service = &svc
	}
	failure := e.FailurePolicy
	if failure == "" {
		failure = admissionv1.Ignore
	}
	timeout := e.TimeoutSeconds
	if timeout <= 0 {
		timeout = 5
	}
	match := bindingMatch(p, managerNS)
	return &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: objectMeta(p),
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    p.Name + ".labelpolicy.orderly.dev",
			ClientConfig:            cc,
			Rules:                   rules,
			FailurePolicy:           &failure,
			MatchPolicy:             match.MatchPolicy,
			NamespaceSelector:       match.NamespaceSelector,
			ObjectSelector:          match.ObjectSelector,
			SideEffects:             ptr.To(admissionv1.SideEffectClassNone),
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      ptr.To(admissionv1.NeverReinvocationPolicy),
			MatchConditions:         matchConditions(p, managerNS),
		}},
	}
}

// Allowed reports whether value is an allowed value of the policy's label by
// allowedValues and allowedPattern (allowedWith adds allowedValuesFrom). It is the Go
// twin of the CEL in the generated ValidatingAdmissionPolicy, used by the audit.
func Allowed(p *policyv1alpha1.LabelPolicy, re *regexp.Regexp, value string) bool {
	if value == "" {
		return false
	}
	if len(p.Spec.AllowedValues) == 0 && p.Spec.AllowedPattern == "" && p.Spec.AllowedValuesFrom == nil {
		return true
	}
	if slices.Contains(p.Spec.AllowedValues, value) {
		return true
	}
	return re != nil && re.MatchString(value)
}

// CompilePattern compiles allowedPattern anchored; nil when the policy has none.
func CompilePattern(p *policyv1alpha1.LabelPolicy) (*regexp.Regexp, error) {
	if p.Spec.AllowedPattern == "" {
		return nil, nil
	}
	re, err := regexp.Compile(anchoredPattern(p))
	if err != nil {
		return nil, fmt.Errorf("allowedPattern %q is not a valid regular expression: %w", p.Spec.AllowedPattern, err)
	}
	return re, nil
}
