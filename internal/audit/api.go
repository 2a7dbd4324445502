package audit

import (
	"fmt"
	"math"
	"reflect"
	"regexp"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
)

// Maturities of an API version, from Kubernetes' version naming (v1, v1beta2, v1alpha1);
// "other" is a name outside that convention.
const (
	Stable = "stable"
	Beta   = "beta"
	Alpha  = "alpha"
	Other  = "other"
)

var kubeVersion = regexp.MustCompile(`^v[1-9][0-9]*(alpha|beta)?([1-9][0-9]*)?$`)

func versionMaturity(v string) string {
	m := kubeVersion.FindStringSubmatch(v)
	switch {
	case m == nil || (m[1] == "") != (m[2] == ""):
		return Other
	case m[1] == "alpha":
		return Alpha
	case m[1] == "beta":
		return Beta
	}
	return Stable
}

func maturityRank(m string) int {
	return map[string]int{Other: 0, Alpha: 1, Beta: 2, Stable: 3}[m]
}

func summarizeCRD(c *apiextensionsv1.CustomResourceDefinition) CRD {
	out := CRD{Name: c.Name, Kind: c.Spec.Names.Kind, Scope: string(c.Spec.Scope), Conversion: string(apiextensionsv1.NoneConverter), Maturity: Other}
	if c.Spec.Conversion != nil && c.Spec.Conversion.Strategy != "" {
		out.Conversion = string(c.Spec.Conversion.Strategy)
	}
	best := -1
	for _, v := range c.Spec.Versions {
		m := versionMaturity(v.Name)
		out.Versions = append(out.Versions, Version{Name: v.Name, Served: v.Served, Storage: v.Storage, Deprecated: v.Deprecated, Maturity: m})
		if v.Served {
			if maturityRank(m) > best {
				best, out.Maturity = maturityRank(m), m
			}
			if v.Schema != nil {
				out.CELRules += celRules(v.Schema.OpenAPIV3Schema)
			}
		}
	}
	return out
}

// celRules counts the x-kubernetes-validations rules in a schema and everything below it.
func celRules(s *apiextensionsv1.JSONSchemaProps) int {
	if s == nil {
		return 0
	}
	n := len(s.XValidations)
	for k := range s.Properties {
		p := s.Properties[k]
		n += celRules(&p)
	}
	if s.Items != nil {
		n += celRules(s.Items.Schema)
		for i := range s.Items.JSONSchemas {
			n += celRules(&s.Items.JSONSchemas[i])
		}
	}
	if s.AdditionalProperties != nil {
		n += celRules(s.AdditionalProperties.Schema)
	}
	for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
		for i := range list {
			n += celRules(&list[i])
		}
	}
	return n
}

// withoutDocs returns a copy of a schema without its descriptions and examples: two
// versions documented differently accept the same objects, and need no conversion.
func withoutDocs(v *apiextensionsv1.CustomResourceValidation) *apiextensionsv1.CustomResourceValidation {
	if v == nil {
		return nil
	}
	out := v.DeepCopy()
	var strip func(s *apiextensionsv1.JSONSchemaProps)
	strip = func(s *apiextensionsv1.JSONSchemaProps) {
		if s == nil {
			return
		}
		s.Description, s.Title, s.Example, s.ExternalDocs = "", "", nil, nil
		for k, p := range s.Properties {
			strip(&p)
			s.Properties[k] = p
		}
		if s.Items != nil {
			strip(s.Items.Schema)
			for i := range s.Items.JSONSchemas {
				strip(&s.Items.JSONSchemas[i])
			}
		}
		if s.AdditionalProperties != nil {
			strip(s.AdditionalProperties.Schema)
		}
		for _, list := range [][]apiextensionsv1.JSONSchemaProps{s.AllOf, s.AnyOf, s.OneOf} {
			for i := range list {
				strip(&list[i])
			}
		}
		strip(s.Not)
	}
	strip(out.OpenAPIV3Schema)
	return out
}

// openSchema says why a version's schema validates nothing of an object's content,
// or "" when it does: a root, or a spec, that keeps unknown fields and declares none.
func openSchema(v apiextensionsv1.CustomResourceDefinitionVersion) string {
	if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
		return "has no schema"
	}
	root := v.Schema.OpenAPIV3Schema
	open := func(s *apiextensionsv1.JSONSchemaProps) bool {
		return s.XPreserveUnknownFields != nil && *s.XPreserveUnknownFields && len(s.Properties) == 0
	}
	if open(root) {
		return "keeps any field at its root"
	}
	if spec, ok := root.Properties["spec"]; ok && open(&spec) {
		return "keeps any field in spec"
	}
	return ""
}

// groupAPIFindings grades the API of one group of CRDs.
func groupAPIFindings(group string, crds []apiextensionsv1.CustomResourceDefinition, summaries []CRD) []Finding {
	f := func(check, result string, penalty int, format string, args ...any) Finding {
		return Finding{Category: CategoryAPI, Check: check, Subject: group, Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...)}
	}
	var out []Finding

	// Maturity: graded on the kinds users write, as the mean of their penalties, so
	// that a stable API which adds new alpha kinds is not taken for an alpha project.
	graded := gradedKinds(summaries)
	counts := map[string][]string{}
	total := 0
	for _, c := range graded {
		counts[c.Maturity] = append(counts[c.Maturity], c.Kind)
		total += maturityPenalty[c.Maturity]
	}
	penalty := int(math.Round(float64(total) / float64(max(len(graded), 1))))
	var records []string
	for _, c := range summaries {
		if !slices.ContainsFunc(graded, func(g CRD) bool { return g.Name == c.Name }) {
			records = append(records, c.Kind)
		}
	}
	notGraded := ""
	if len(records) > 0 {
		notGraded = fmt.Sprintf(" (not graded: %s, which users do not write)", strings.Join(records, ", "))
	}
	maturity := f("api.maturity", resultFor(penalty), penalty, "")
	switch {
	case len(counts[Stable]) == len(graded):
		maturity.Message = fmt.Sprintf("every kind users write is served at a stable (v1 or later) version: %s%s", strings.Join(counts[Stable], ", "), notGraded)
	case len(counts[Alpha]) == len(graded):
		maturity.Message = fmt.Sprintf("alpha only for %s: no beta or stable version is served, so the API may change without conversion%s", strings.Join(counts[Alpha], ", "), notGraded)
	case len(counts[Beta]) == len(graded):
		maturity.Message = fmt.Sprintf("no stable version yet for %s: beta at best%s", strings.Join(counts[Beta], ", "), notGraded)
	case len(counts[Other]) == len(graded):
		maturity.Message = fmt.Sprintf("versions of %s do not follow Kubernetes' naming (vN, vNbetaM, vNalphaM): their stability is not stated%s", strings.Join(counts[Other], ", "), notGraded)
	default:
		var parts []string
		for _, m := range []string{Stable, Beta, Alpha, Other} {
			if ks := counts[m]; len(ks) > 0 {
				parts = append(parts, fmt.Sprintf("%d %s (%s)", len(ks), m, strings.Join(ks, ", ")))
			}
		}
		maturity.Message = fmt.Sprintf("of the %d kinds users write, %s: graded as their mean (alpha 30, unconventional names 20, beta 10, stable 0)%s",
			len(graded), strings.Join(parts, ", "), notGraded)
	}
	for _, c := range summaries {
		maturity.Evidence = append(maturity.Evidence, fmt.Sprintf("%s (%s): %s, served %s", c.Kind, c.Name, c.Maturity, strings.Join(servedVersions(c), ", ")))
	}
	out = append(out, maturity)

	// Deprecated versions still served.
	var deprecated []string
	for _, c := range crds {
		for _, v := range c.Spec.Versions {
			if v.Served && v.Deprecated {
				deprecated = append(deprecated, c.Spec.Names.Kind+" "+v.Name)
			}
		}
	}
	if len(deprecated) > 0 {
		out = append(out, f("api.deprecated-served", Warn, 5, "deprecated versions still served: %s (clients using them break when they go)", strings.Join(deprecated, ", ")))
	} else {
		out = append(out, f("api.deprecated-served", Pass, 0, "no deprecated version is served"))
	}

	// Conversion: several served versions with strategy None are only safe when their
	// schemas are the same (the API server changes apiVersion and nothing else).
	var unsafe, webhook []string
	for _, c := range crds {
		var served []apiextensionsv1.CustomResourceDefinitionVersion
		for _, v := range c.Spec.Versions {
			if v.Served {
				served = append(served, v)
			}
		}
		if len(served) < 2 {
			continue
		}
		if c.Spec.Conversion != nil && c.Spec.Conversion.Strategy == apiextensionsv1.WebhookConverter {
			webhook = append(webhook, c.Spec.Names.Kind)
			continue
		}
		for _, v := range served[1:] {
			if !reflect.DeepEqual(withoutDocs(v.Schema), withoutDocs(served[0].Schema)) {
				unsafe = append(unsafe, fmt.Sprintf("%s (%s and %s)", c.Spec.Names.Kind, served[0].Name, v.Name))
				break
			}
		}
	}
	switch {
	case len(unsafe) > 0:
		out = append(out, f("api.conversion", Fail, 15, "served versions with different schemas but no conversion webhook (strategy None only rewrites apiVersion): %s", strings.Join(unsafe, ", ")))
	case len(webhook) > 0:
		out = append(out, f("api.conversion", Pass, 0, "several versions served, converted by a webhook: %s", strings.Join(webhook, ", ")))
	default:
		out = append(out, f("api.conversion", Pass, 0, "no conversion needed: one served version per kind, or versions with identical schemas"))
	}

	// Objects stored at a less mature version than the one served.
	var stored []string
	for _, c := range summaries {
		for _, v := range c.Versions {
			if v.Storage && maturityRank(v.Maturity) < maturityRank(c.Maturity) {
				stored = append(stored, fmt.Sprintf("%s stored as %s while %s is served", c.Kind, v.Name, c.Maturity))
			}
		}
	}
	if len(stored) > 0 {
		out = append(out, f("api.storage-version", Warn, 5, "%s: the storage version has not been moved to the most mature one", strings.Join(stored, ", ")))
	} else {
		out = append(out, f("api.storage-version", Pass, 0, "objects are stored at the most mature version served"))
	}

	// Validation: structural schemas that constrain the content, and CEL rules.
	var open []string
	for _, c := range crds {
		for _, cond := range c.Status.Conditions {
			if cond.Type == apiextensionsv1.NonStructuralSchema && cond.Status == apiextensionsv1.ConditionTrue {
				open = append(open, c.Spec.Names.Kind+": schema is not structural")
			}
		}
		for _, v := range c.Spec.Versions {
			if why := openSchema(v); v.Served && why != "" {
				open = append(open, fmt.Sprintf("%s %s %s", c.Spec.Names.Kind, v.Name, why))
			}
		}
	}
	if len(open) > 0 {
		out = append(out, f("api.schema", Fail, 20, "the API server validates little: %s", strings.Join(open, ", ")))
	} else {
		out = append(out, f("api.schema", Pass, 0, "structural schemas declare the fields of every served version"))
	}
	rules := 0
	var without []string
	for _, c := range summaries {
		rules += c.CELRules
		if c.CELRules == 0 {
			without = append(without, c.Kind)
		}
	}
	switch {
	case rules == 0:
		out = append(out, f("api.cel", Fail, 10, "no CEL validation rules (x-kubernetes-validations): rules across fields are checked by the controller, after the write, if at all"))
	case len(without) > 0:
		out = append(out, f("api.cel", Pass, 0, "%d CEL validation rules (none for %s)", rules, strings.Join(without, ", ")))
	default:
		out = append(out, f("api.cel", Pass, 0, "%d CEL validation rules", rules))
	}
	return out
}

// maturityPenalty is what a kind's maturity costs the api.maturity check.
var maturityPenalty = map[string]int{Stable: 0, Beta: 10, Other: 20, Alpha: 30}

// gradedKinds are the kinds whose maturity is graded: those users write, or every
// kind when the group has none marked so.
func gradedKinds(summaries []CRD) []CRD {
	var out []CRD
	for _, c := range summaries {
		if c.UserWritten {
			out = append(out, c)
		}
	}
	if len(out) == 0 {
		return summaries
	}
	return out
}

func servedVersions(c CRD) []string {
	var out []string
	for _, v := range c.Versions {
		if v.Served {
			out = append(out, v.Name)
		}
	}
	return out
}

// groupMaturity is the lowest maturity of the kinds users write.
func groupMaturity(summaries []CRD) string {
	lowest := Stable
	for _, c := range gradedKinds(summaries) {
		if maturityRank(c.Maturity) < maturityRank(lowest) {
			lowest = c.Maturity
		}
	}
	return lowest
}

// aggregateLabels mark a ClusterRole whose rules the API server adds to the
// built-in admin and edit roles: what an operator lets people write.
var aggregateLabels = []string{"rbac.authorization.k8s.io/aggregate-to-admin", "rbac.authorization.k8s.io/aggregate-to-edit"}

// markUserWritten sets UserWritten on the group's kinds. Users write the namespaced
// kinds a ClusterRole aggregated into admin or edit lets people write, when the group
// has such a role: that is how a project says which of its kinds are for people.
// Otherwise (no such role, or a cluster-scoped kind, of which admin and edit, being
// namespace roles, say nothing) users write a kind whose schema has a spec; a kind
// with only a status is a record the operator keeps (CloudNativePG's FailoverQuorum).
func markUserWritten(group string, crds []apiextensionsv1.CustomResourceDefinition, summaries []CRD, roles []rbacv1.ClusterRole) {
	aggregated := map[string]bool{} // plurals people may write
	for _, cr := range roles {
		if !slices.ContainsFunc(aggregateLabels, func(l string) bool { return cr.Labels[l] == "true" }) {
			continue
		}
		for _, r := range cr.Rules {
			if !slices.Contains(r.APIGroups, group) || !slices.ContainsFunc(writeVerbs, func(v string) bool { return hasOrStar(r.Verbs, v) }) {
				continue
			}
			for _, res := range r.Resources {
				if !strings.Contains(res, "/") {
					aggregated[res] = true
				}
			}
		}
	}
	for i := range crds {
		c := &crds[i]
		if len(aggregated) > 0 && c.Spec.Scope == apiextensionsv1.NamespaceScoped {
			summaries[i].UserWritten = aggregated[c.Spec.Names.Plural] || aggregated["*"]
			continue
		}
		summaries[i].UserWritten = slices.ContainsFunc(c.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
			if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				return v.Served // without a schema nothing says it is a record
			}
			root := v.Schema.OpenAPIV3Schema
			_, spec := root.Properties["spec"]
			return spec || len(root.Properties) == 0
		})
	}
}
