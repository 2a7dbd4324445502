package secretrotation

import (
	"cmp"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

// referencesSecret says whether a pod spec uses the Secret called name: in an env
// var's secretKeyRef, an envFrom secretRef, a secret volume or a projected volume's
// secret source, in any container, init container or ephemeral container.
func referencesSecret(spec *corev1.PodSpec, name string) bool {
	for i := range spec.Volumes {
		v := &spec.Volumes[i]
		if v.Secret != nil && v.Secret.SecretName == name {
			return true
		}
		if v.Projected != nil {
			for _, src := range v.Projected.Sources {
				if src.Secret != nil && src.Secret.Name == name {
					return true
				}
			}
		}
	}
	env := func(envs []corev1.EnvVar, from []corev1.EnvFromSource) bool {
		for _, e := range envs {
			if e.ValueFrom != nil && e.ValueFrom.SecretKeyRef != nil && e.ValueFrom.SecretKeyRef.Name == name {
				return true
			}
		}
		for _, f := range from {
			if f.SecretRef != nil && f.SecretRef.Name == name {
				return true
			}
		}
		return false
	}
	for i := range spec.InitContainers {
		if env(spec.InitContainers[i].Env, spec.InitContainers[i].EnvFrom) {
			return true
		}
	}
	for i := range spec.Containers {
		if env(spec.Containers[i].Env, spec.Containers[i].EnvFrom) {
			return true
		}
	}
	for i := range spec.EphemeralContainers {
		if env(spec.EphemeralContainers[i].Env, spec.EphemeralContainers[i].EnvFrom) {
			return true
		}
	}
	return false
}

// workload is what the controller needs of a Deployment, StatefulSet or DaemonSet.
type workload struct {
	ref secretsv1alpha1.ConsumerRef
	obj client.Object
	// template is the workload's pod template (inside obj).
	template *corev1.PodTemplateSpec
}

// asWorkload is the workload o is; an empty one when o is none of the three kinds.
func asWorkload(o client.Object) workload {
	switch w := o.(type) {
	case *appsv1.Deployment:
		return workload{ref: secretsv1alpha1.ConsumerRef{Kind: secretsv1alpha1.KindDeployment, Name: w.Name}, obj: w, template: &w.Spec.Template}
	case *appsv1.StatefulSet:
		return workload{ref: secretsv1alpha1.ConsumerRef{Kind: secretsv1alpha1.KindStatefulSet, Name: w.Name}, obj: w, template: &w.Spec.Template}
	case *appsv1.DaemonSet:
		return workload{ref: secretsv1alpha1.ConsumerRef{Kind: secretsv1alpha1.KindDaemonSet, Name: w.Name}, obj: w, template: &w.Spec.Template}
	}
	return workload{}
}

// selectConsumers picks, from the workloads of the namespace, those to roll: the
// ones whose pod template references the Secret (when discover is on) and the
// targets, minus the excluded, sorted by kind and name so that every reconcile
// rolls them in the same order. Targets that do not exist are returned in missing.
func selectConsumers(all []workload, secretName string, c secretsv1alpha1.Consumers) (chosen []workload, missing []secretsv1alpha1.ConsumerRef) {
	excluded := func(r secretsv1alpha1.ConsumerRef) bool { return slices.Contains(c.Exclude, r) }
	seen := map[secretsv1alpha1.ConsumerRef]bool{}
	for _, w := range all {
		if excluded(w.ref) || seen[w.ref] {
			continue
		}
		if (c.Discovers() && referencesSecret(&w.template.Spec, secretName)) || slices.Contains(c.Targets, w.ref) {
			chosen = append(chosen, w)
			seen[w.ref] = true
		}
	}
	for _, t := range c.Targets {
		if !seen[t] && !excluded(t) {
			missing = append(missing, t)
		}
	}
	slices.SortFunc(chosen, func(a, b workload) int { return compareRefs(a.ref, b.ref) })
	return chosen, missing
}

func compareRefs(a, b secretsv1alpha1.ConsumerRef) int {
	return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}
