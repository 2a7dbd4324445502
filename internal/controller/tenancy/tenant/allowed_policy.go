package tenant

import (
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
)

// allowedPolicyName is the shared policy of spec.allowed, with the Tenant as its
// parameter; each Tenant with spec.allowed has a binding of it for its namespaces.
const allowedPolicyName = "orderly-tenant-allowed"

func allowedBindingName(t *tenancyv1alpha1.Tenant) string { return allowedPolicyName + "-" + t.Name }

// allowedPolicy judges the writes of the tenant's workloads against the Tenant's
// spec.allowed: the storage class of a PersistentVolumeClaim, the class of an Ingress,
// and the priority class, runtime class and image registries of a pod or pod template.
// Workloads are judged as well as pods, so that the person who applies a Deployment
// is told, rather than its ReplicaSet failing to create pods.
func allowedPolicy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	equivalent := admissionv1.Equivalent
	// Every write of a pod spec (admission.PodRules: pods, their ephemeral
	// containers, every workload kind), PersistentVolumeClaims and Ingresses.
	rules := admission.Named(append(admission.PodRules("persistentvolumeclaims"), admissionv1.RuleWithOperations{
		Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
		Rule: admissionv1.Rule{
			APIGroups: []string{"networking.k8s.io"}, APIVersions: []string{"v1"}, Resources: []string{"ingresses"},
			Scope: ptr.To(admissionv1.NamespacedScope),
		},
	}))
	allowed := "params.spec.allowed"
	has := func(list string) string {
		return fmt.Sprintf("has(params.spec.allowed) && has(%s.%s) && size(%s.%s) > 0", allowed, list, allowed, list)
	}
	who := "request.kind.kind + ' ' + request.namespace + '/' + (has(object.metadata.name) ? object.metadata.name : object.metadata.generateName + '*') + ' in tenant ' + params.metadata.name + ': '"
	// An image without a registry host is Docker Hub's. Docker Hub is docker.io
	// (index.docker.io is another name of it), with library/ for official images, as
	// ParseRef names it for ImagePolicy. ([x].map(j, ...)[0] is ... with j = x.)
	hub := "j.startsWith('docker.io/') ? 'docker.io/' + (j.substring(10).contains('/') ? j.substring(10) : 'library/' + j.substring(10)) : "
	normalize := "[i.startsWith('index.docker.io/') ? 'docker.io/' + i.substring(16) : i].map(j, " + hub +
		"((j.split('/').size() > 1 && (j.split('/')[0].contains('.') || j.split('/')[0].contains(':') || j.split('/')[0] == 'localhost')) ? j : (j.contains('/') ? 'docker.io/' + j : 'docker.io/library/' + j)))[0]"
	pattern := "'^' + p.replace('.', '\\\\.').replace('*', '[^/]*')"
	return &admissionv1.ValidatingAdmissionPolicy{
		ObjectMeta: sharedMeta(allowedPolicyName),
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			ParamKind:     &admissionv1.ParamKind{APIVersion: tenancyv1alpha1.GroupVersion.String(), Kind: "Tenant"},
			MatchConstraints: &admissionv1.MatchResources{
				ResourceRules:     rules,
				MatchPolicy:       &equivalent,
				NamespaceSelector: &metav1.LabelSelector{},
				ObjectSelector:    &metav1.LabelSelector{},
			},
			Variables: []admissionv1.Variable{
				{Name: "podSpec", Expression: admission.PodSpecCEL("object")},
				// Updates that leave what is judged as it was are admitted: a workload
				// admitted before spec.allowed changed must stay scalable and
				// deletable by its controllers (the Deployment controller scales
				// ReplicaSets, the garbage collector removes finalizers).
				{Name: "podSpecChanged", Expression: "request.operation == 'CREATE' || oldObject == null || variables.podSpec != " + admission.PodSpecCEL("oldObject")},
				{Name: "specChanged", Expression: "request.operation == 'CREATE' || oldObject == null || object.spec != oldObject.spec"},
				{Name: "images", Expression: "variables.podSpec == null || !variables.podSpecChanged ? [] : " +
					admission.ImagesCEL("variables.podSpec")},
				{Name: "badImages", Expression: "!(" + has("registries") + ") ? [] : variables.images.filter(i, !(" + allowed + ".registries.exists(p, (" + normalize + ").matches(" + pattern + "))))"},
			},
			Validations: []admissionv1.Validation{
				{
					Expression:        "request.kind.kind != 'PersistentVolumeClaim' || !variables.specChanged || !(" + has("storageClasses") + ") || (has(object.spec.storageClassName) && object.spec.storageClassName in " + allowed + ".storageClasses)",
					MessageExpression: who + " + 'storage class ' + (has(object.spec.storageClassName) ? object.spec.storageClassName : '(none)') + ' is not allowed; allowed: ' + " + allowed + ".storageClasses.join(', ')",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "request.kind.kind != 'Ingress' || !variables.specChanged || !(" + has("ingressClasses") + ") || (has(object.spec.ingressClassName) && object.spec.ingressClassName in " + allowed + ".ingressClasses)",
					MessageExpression: who + " + 'ingress class ' + (has(object.spec.ingressClassName) ? object.spec.ingressClassName : '(none)') + ' is not allowed; allowed: ' + " + allowed + ".ingressClasses.join(', ')",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "variables.podSpec == null || !variables.podSpecChanged || !(" + has("priorityClasses") + ") || !has(variables.podSpec.priorityClassName) || variables.podSpec.priorityClassName in " + allowed + ".priorityClasses",
					MessageExpression: who + " + 'priority class ' + variables.podSpec.priorityClassName + ' is not allowed; allowed: ' + " + allowed + ".priorityClasses.join(', ')",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "variables.podSpec == null || !variables.podSpecChanged || !(" + has("runtimeClasses") + ") || !has(variables.podSpec.runtimeClassName) || variables.podSpec.runtimeClassName in " + allowed + ".runtimeClasses",
					MessageExpression: who + " + 'runtime class ' + variables.podSpec.runtimeClassName + ' is not allowed; allowed: ' + " + allowed + ".runtimeClasses.join(', ')",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
				{
					Expression:        "size(variables.badImages) == 0",
					MessageExpression: who + " + 'image ' + variables.badImages[0] + ' is not from an allowed registry; allowed: ' + " + allowed + ".registries.join(', ')",
					Reason:            ptr.To(metav1.StatusReasonForbidden),
				},
			},
		},
	}
}

// allowedBinding binds allowedPolicy with Tenant t as its parameter, in t's
// namespaces (the ones labelled with its name: only Orderly, administrators and, for
// their own tenant, its owners can set that label).
func allowedBinding(t *tenancyv1alpha1.Tenant) *admissionv1.ValidatingAdmissionPolicyBinding {
	deny := admissionv1.DenyAction
	equivalent := admissionv1.Equivalent
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		ObjectMeta: tenantMeta(t, allowedBindingName(t)),
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName: allowedPolicyName,
			ParamRef:   &admissionv1.ParamRef{Name: t.Name, ParameterNotFoundAction: &deny},
			MatchResources: &admissionv1.MatchResources{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{tenancyv1alpha1.TenantLabel: t.Name}},
				ObjectSelector:    &metav1.LabelSelector{},
				MatchPolicy:       &equivalent,
			},
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}
