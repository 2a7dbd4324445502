package imagescan

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

// TrimPod keeps of a Pod only what the image controllers read: name, namespace,
// controller, the containers' names and images, imagePullSecrets, phase and the
// imageIDs the kubelet reported. With 10,000 pods the cache then holds a few
// hundred bytes per pod instead of several kilobytes.
func TrimPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	out := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			DeletionTimestamp: pod.DeletionTimestamp, CreationTimestamp: pod.CreationTimestamp,
		},
		Spec:   corev1.PodSpec{ImagePullSecrets: pod.Spec.ImagePullSecrets},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			out.OwnerReferences = []metav1.OwnerReference{{APIVersion: o.APIVersion, Kind: o.Kind, Name: o.Name, UID: o.UID, Controller: o.Controller}}
		}
	}
	for _, c := range pod.Spec.InitContainers {
		out.Spec.InitContainers = append(out.Spec.InitContainers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range pod.Spec.Containers {
		out.Spec.Containers = append(out.Spec.Containers, corev1.Container{Name: c.Name, Image: c.Image})
	}
	for _, c := range pod.Spec.EphemeralContainers {
		out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: c.Name, Image: c.Image}})
	}
	trim := func(list []corev1.ContainerStatus) []corev1.ContainerStatus {
		var s []corev1.ContainerStatus
		for _, cs := range list {
			s = append(s, corev1.ContainerStatus{Name: cs.Name, Image: cs.Image, ImageID: cs.ImageID})
		}
		return s
	}
	out.Status.InitContainerStatuses = trim(pod.Status.InitContainerStatuses)
	out.Status.ContainerStatuses = trim(pod.Status.ContainerStatuses)
	out.Status.EphemeralContainerStatuses = trim(pod.Status.EphemeralContainerStatuses)
	return out, nil
}

// PodCache is the cache rule for Pods that both image controllers use (the kit
// refuses two rules for one kind).
func PodCache() cache.ByObject { return cache.ByObject{Transform: TrimPod} }
