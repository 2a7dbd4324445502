package audit

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// crdBuilder builds a CustomResourceDefinition for the tests.
type crdBuilder struct {
	apiextensionsv1.CustomResourceDefinition
}

// newCRD is a CRD of group with one kind; add versions with version().
func newCRD(group, kind, plural string) *crdBuilder {
	b := &crdBuilder{}
	b.Name = plural + "." + group
	b.Spec.Group = group
	b.Spec.Names = apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, Plural: plural}
	b.Spec.Scope = apiextensionsv1.NamespaceScoped
	return b
}

// specSchema is a schema that declares spec.replicas, with cel rules on spec.
func specSchema(cel int) *apiextensionsv1.CustomResourceValidation {
	spec := apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"replicas": {Type: "integer"}}}
	for range cel {
		spec.XValidations = append(spec.XValidations, apiextensionsv1.ValidationRule{Rule: "self.replicas >= 0"})
	}
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": spec, "status": {Type: "object"}},
	}}
}

// openSpecSchema keeps any field in spec.
func openSpecSchema() *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": {Type: "object", XPreserveUnknownFields: ptr.To(true)}},
	}}
}

// statusOnlySchema declares a status and no spec: a record the operator keeps.
func statusOnlySchema() *apiextensionsv1.CustomResourceValidation {
	return &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
		Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"primary": {Type: "string"}}}},
	}}
}

func (b *crdBuilder) version(name string, storage bool, schema *apiextensionsv1.CustomResourceValidation) *crdBuilder {
	b.Spec.Versions = append(b.Spec.Versions, apiextensionsv1.CustomResourceDefinitionVersion{
		Name: name, Served: true, Storage: storage, Schema: schema,
		Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
	})
	return b
}

func (b *crdBuilder) deprecated(name string) *crdBuilder {
	for i := range b.Spec.Versions {
		if b.Spec.Versions[i].Name == name {
			b.Spec.Versions[i].Deprecated = true
		}
	}
	return b
}

func (b *crdBuilder) noStatus() *crdBuilder {
	for i := range b.Spec.Versions {
		b.Spec.Versions[i].Subresources = nil
	}
	return b
}

func (b *crdBuilder) webhook() *crdBuilder {
	b.Spec.Conversion = &apiextensionsv1.CustomResourceConversion{Strategy: apiextensionsv1.WebhookConverter}
	return b
}

// labelled sets a label on the CRD.
func labelled(b *crdBuilder, key, value string) *crdBuilder {
	if b.Labels == nil {
		b.Labels = map[string]string{}
	}
	b.Labels[key] = value
	return b
}

func (b *crdBuilder) build() apiextensionsv1.CustomResourceDefinition {
	return b.CustomResourceDefinition
}

// deploymentBuilder builds an operator's Deployment: by default one container with
// nothing set but its image and its ServiceAccount.
type deploymentBuilder struct{ appsv1.Deployment }

func newDeployment(ns, name, sa string, replicas int32) *deploymentBuilder {
	b := &deploymentBuilder{}
	b.Namespace, b.Name = ns, name
	b.Spec.Replicas = ptr.To(replicas)
	b.Spec.Selector = &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}}
	b.Spec.Template.Labels = map[string]string{"app": name}
	b.Spec.Template.Spec.ServiceAccountName = sa
	b.Spec.Template.Spec.Containers = []corev1.Container{{Name: "manager", Image: "example.com/" + name + ":v1"}}
	return b
}

// hardened gives it what a well-run operator has: resources, probes, a metrics port,
// a restricted security context and an image pinned by digest.
func (b *deploymentBuilder) hardened() *deploymentBuilder {
	b.Spec.Template.Spec.SecurityContext = &corev1.PodSecurityContext{
		RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
	c := &b.Spec.Template.Spec.Containers[0]
	c.Image = "example.com/op@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	c.Ports = []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8443}}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}}
	c.LivenessProbe, c.ReadinessProbe = probe, probe
	c.Resources = corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
	}
	c.SecurityContext = &corev1.SecurityContext{AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true)}
	return b
}

func (b *deploymentBuilder) build() appsv1.Deployment { return b.Deployment }

// containerOf is the i-th container of a pod, running image.
func containerOf(i int, image string) corev1.Container {
	return corev1.Container{Name: fmt.Sprintf("c%d", i), Image: image}
}

func rule(groups, resources, verbs []string, names ...string) rbacv1.PolicyRule {
	return rbacv1.PolicyRule{APIGroups: groups, Resources: resources, Verbs: verbs, ResourceNames: names}
}

func l(s ...string) []string { return s }

func clusterRole(name string, rules ...rbacv1.PolicyRule) rbacv1.ClusterRole {
	return rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
}

func saSubject(ns, name string) rbacv1.Subject {
	return rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}
}

func clusterBinding(name, role string, subjects ...rbacv1.Subject) rbacv1.ClusterRoleBinding {
	return rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: role}, Subjects: subjects}
}

func roleBinding(ns, name, kind, role string, subjects ...rbacv1.Subject) rbacv1.RoleBinding {
	return rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, RoleRef: rbacv1.RoleRef{Kind: kind, Name: role}, Subjects: subjects}
}

func role(ns, name string, rules ...rbacv1.PolicyRule) rbacv1.Role {
	return rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: rules}
}

func lease(ns, name, holder string) coordinationv1.Lease {
	return coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(holder)}}
}

func pod(ns, name string, labels map[string]string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
}
