package imagepolicy

import (
	"fmt"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// WebhookPathPrefix is where the webhook server serves ImagePolicies: the path of
// policy P is WebhookPathPrefix + P.
const WebhookPathPrefix = "/imagepolicy/"

// MutatePathPrefix is where the webhook server pins tags to digests for ImagePolicies
// with requireDigest.rewrite: the path of policy P is MutatePathPrefix + P.
const MutatePathPrefix = "/imagepolicy-mutate/"

func celString(s string) string { return strconv.Quote(s) }

// ObjectName is the name of every admission object generated for p.
func ObjectName(p *policyv1alpha1.ImagePolicy) string { return "orderly-imagepolicy-" + p.Name }

func objectMeta(p *policyv1alpha1.ImagePolicy) metav1.ObjectMeta {
	return metav1.ObjectMeta{
		Name:   ObjectName(p),
		Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.ImagePolicyLabel: p.Name},
	}
}

// resourceRules are the writes checked: every way an image reaches a node
// (admission.PodRules: pods, their ephemeral containers, every workload kind).
var resourceRules = admission.PodRules()

func namespaceSelector(p *policyv1alpha1.ImagePolicy, managerNS string) *metav1.LabelSelector {
	return imagescan.NamespaceSelector(p, managerNS)
}

// Compiled admission objects of one policy; nil where the policy needs none.
type Admission struct {
	VAP        *admissionv1.ValidatingAdmissionPolicy
	VAPBinding *admissionv1.ValidatingAdmissionPolicyBinding
	Webhook    *admissionv1.ValidatingWebhookConfiguration
	// Mutating pins tags to digests (requireDigest.rewrite).
	Mutating *admissionv1.MutatingWebhookConfiguration
}

// CompileAdmission turns p into admission objects: a ValidatingAdmissionPolicy for
// allowedRegistries and requireDigest (no registry call, evaluated in the API
// server), and a ValidatingWebhookConfiguration to Orderly's webhook for the
// decisions from scan results. endpoint is nil when the manager serves no webhook.
func CompileAdmission(p *policyv1alpha1.ImagePolicy, endpoint *admission.Endpoint, managerNS string) Admission {
	var out Admission
	if NeedsNative(p) {
		out.VAP = compileVAP(p, managerNS)
		out.VAPBinding = compileBinding(p, managerNS)
	}
	if NeedsScans(p) && endpoint != nil {
		out.Webhook = compileWebhook(p, endpoint, managerNS)
	}
	if NeedsRewrite(p) && endpoint != nil {
		out.Mutating = compileMutating(p, endpoint, managerNS)
	}
	return out
}

// reposExpr normalizes the images to repositories, as ParseRef does: no tag or
// digest, Docker Hub as docker.io with library/ for official images.
const reposExpr = `variables.images.map(i, i.split('@')[0]).map(b, b.lastIndexOf(':') > b.lastIndexOf('/') ? b.substring(0, b.lastIndexOf(':')) : b).map(n, (n.contains('/') && (n.split('/')[0].contains('.') || n.split('/')[0].contains(':') || n.split('/')[0] == 'localhost')) ? (n.startsWith('index.docker.io/') ? 'docker.io/' + n.substring(16) : n) : 'docker.io/' + (n.contains('/') ? n : 'library/' + n)).map(r, r.startsWith('docker.io/') && !r.substring(10).contains('/') ? 'docker.io/library/' + r.substring(10) : r)`

func compileVAP(p *policyv1alpha1.ImagePolicy, managerNS string) *admissionv1.ValidatingAdmissionPolicy {
	vars := []admissionv1.Variable{
		{Name: "podSpec", Expression: admission.PodSpecCEL("object")},
		{Name: "images", Expression: admission.ImagesCEL("variables.podSpec")},
		{Name: "changed", Expression: "request.operation != 'UPDATE' || variables.images != (" + admission.ImagesCEL(admission.PodSpecCEL("oldObject")) + ")"},
		{Name: "repos", Expression: reposExpr},
	}
	prefix := celString("ImagePolicy " + p.Name + ": ")
	who := `request.kind.kind + ' ' + request.namespace + '/' + (has(object.metadata.name) ? object.metadata.name : object.metadata.generateName + '*')`
	var validations []admissionv1.Validation
	if len(p.Spec.AllowedRegistries) > 0 {
		var alts []string
		for _, pat := range p.Spec.AllowedRegistries {
			alts = append(alts, fmt.Sprintf("r.matches(%s)", celString(RegistryRegexp(pat))))
		}
		allowed := strings.Join(alts, " || ")
		validations = append(validations, admissionv1.Validation{
			Expression: fmt.Sprintf("!variables.changed || variables.repos.all(r, %s)", allowed),
			MessageExpression: fmt.Sprintf("%s + %s + ' uses an image from ' + variables.repos.filter(r, !(%s)).join(', ') + %s",
				prefix, who, allowed, celString(", which is not in allowedRegistries ("+strings.Join(p.Spec.AllowedRegistries, ", ")+")")),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		})
	}
	if requireDigest(p) {
		validations = append(validations, admissionv1.Validation{
			Expression: "!variables.changed || variables.images.all(i, i.contains('@sha256:'))",
			MessageExpression: fmt.Sprintf("%s + %s + ' uses image ' + variables.images.filter(i, !i.contains('@sha256:')).join(', ') + %s",
				prefix, who, celString(" by tag; requireDigest needs image@sha256:<digest>")),
			Reason: ptr.To(metav1.StatusReasonForbidden),
		})
	}
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: objectMeta(p),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: ptr.To(admissionv1.Fail),
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules:     admission.Named(resourceRules),
				MatchPolicy:       ptr.To(admissionv1.Equivalent),
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
			},
			MatchConditions: []admissionv1.MatchCondition{kit.ProtectedMatchCondition(managerNS)},
			Variables:       vars,
			Validations:     validations,
		},
	}
}

// validationActions maps the policy's action to the binding's.
func validationActions(a policyv1alpha1.ImageAction) []admissionv1.ValidationAction {
	switch a {
	case policyv1alpha1.ImageActionWarn:
		return []admissionv1.ValidationAction{admissionv1.Warn, admissionv1.Audit}
	case policyv1alpha1.ImageActionAudit:
		return []admissionv1.ValidationAction{admissionv1.Audit}
	}
	return []admissionv1.ValidationAction{admissionv1.Deny}
}

func compileBinding(p *policyv1alpha1.ImagePolicy, managerNS string) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: objectMeta(p),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        ObjectName(p),
			ValidationActions: validationActions(p.Spec.Action),
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: namespaceSelector(p, managerNS),
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       ptr.To(admissionv1.Equivalent),
			},
		},
	}
}

// WebhookFailurePolicy is Fail for a Deny policy: a security control that fails
// open admits exactly what it exists to stop, and the webhook never applies to the
// kube-* namespaces or Orderly's own, so Orderly can always be restarted. Warn and
// Audit policies fail open (Ignore): they never refuse anything anyway.
func WebhookFailurePolicy(p *policyv1alpha1.ImagePolicy) admissionv1.FailurePolicyType {
	if p.Spec.Action == policyv1alpha1.ImageActionDeny || p.Spec.Action == "" {
		return admissionv1.Fail
	}
	return admissionv1.Ignore
}

// clientConfig points at path on the manager's webhook server.
func clientConfig(e *admission.Endpoint, path string) (admissionv1.WebhookClientConfig, int32) {
	cc := admissionv1.WebhookClientConfig{CABundle: e.CABundle}
	if e.URL != "" {
		cc.URL = ptr.To(strings.TrimSuffix(e.URL, "/") + path)
	} else if e.Service != nil {
		svc := *e.Service
		svc.Path = &path
		cc.Service = &svc
	}
	timeout := e.TimeoutSeconds
	if timeout <= 0 {
		timeout = 5
	}
	return cc, timeout
}

// compileMutating pins tags to digests. It fails open (Ignore): a tag it could not
// pin is still refused by requireDigest's native check, so nothing unpinned gets in.
// It is called again when another webhook changed the object (a sidecar injector
// adding a container). Its one side effect, queueing an unknown tag for resolving
// (a pending ImageScan), is skipped on dry runs.
func compileMutating(p *policyv1alpha1.ImagePolicy, e *admission.Endpoint, managerNS string) *admissionv1.MutatingWebhookConfiguration {
	cc, timeout := clientConfig(e, MutatePathPrefix+p.Name)
	return &admissionv1.MutatingWebhookConfiguration{
		ObjectMeta: objectMeta(p),
		Webhooks: []admissionv1.MutatingWebhook{{
			Name:                    p.Name + ".imagepolicy-pin.orderly.dev",
			ClientConfig:            cc,
			Rules:                   resourceRules,
			FailurePolicy:           ptr.To(admissionv1.Ignore),
			MatchPolicy:             ptr.To(admissionv1.Equivalent),
			NamespaceSelector:       namespaceSelector(p, managerNS),
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             ptr.To(admissionv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         []admissionv1.MatchCondition{kit.ProtectedMatchCondition(managerNS)},
			ReinvocationPolicy:      ptr.To(admissionv1.IfNeededReinvocationPolicy),
		}},
	}
}

func compileWebhook(p *policyv1alpha1.ImagePolicy, e *admission.Endpoint, managerNS string) *admissionv1.ValidatingWebhookConfiguration {
	cc, timeout := clientConfig(e, WebhookPathPrefix+p.Name)
	return &admissionv1.ValidatingWebhookConfiguration{
		ObjectMeta: objectMeta(p),
		Webhooks: []admissionv1.ValidatingWebhook{{
			Name:                    p.Name + ".imagepolicy.orderly.dev",
			ClientConfig:            cc,
			Rules:                   resourceRules,
			FailurePolicy:           ptr.To(WebhookFailurePolicy(p)),
			MatchPolicy:             ptr.To(admissionv1.Equivalent),
			NamespaceSelector:       namespaceSelector(p, managerNS),
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             ptr.To(admissionv1.SideEffectClassNoneOnDryRun),
			TimeoutSeconds:          &timeout,
			AdmissionReviewVersions: []string{"v1"},
			MatchConditions:         []admissionv1.MatchCondition{kit.ProtectedMatchCondition(managerNS)},
		}},
	}
}
