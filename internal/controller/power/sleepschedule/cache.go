package sleepschedule

import (
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/gitops"
	"orderly.dev/orderly/internal/kit"
)

// Cache narrows the manager's cache to what this controller needs. Every Deployment,
// StatefulSet, CronJob and HorizontalPodAutoscaler of the cluster is watched (a new
// one in a sleeping namespace must be seen), so each is kept only as the few fields
// the controller reads (trimWorkload): a cluster's workloads then cost the manager
// the same few KiB each whatever their size (about 4.4 KiB a Deployment in a heap
// profile of 2,000, with its metadata-only copy; most of it the Go struct types
// themselves), and a namespace user cannot grow the manager's memory with large
// annotations or pod templates.
func Cache() kit.CacheRules {
	trim := cache.ByObject{Transform: trimWorkload}
	return kit.CacheRules{
		&appsv1.Deployment{}:                     trim,
		&appsv1.StatefulSet{}:                    trim,
		&batchv1.CronJob{}:                       trim,
		&autoscalingv2.HorizontalPodAutoscaler{}: trim,
		&powerv1alpha1.SleepSchedule{}:           {Transform: cache.TransformStripManagedFields()},
	}
}

// trimWorkload keeps of a workload what the controller reads, and nothing else:
//
//   - metadata: name, namespace, uid, resourceVersion (the optimistic lock of every
//     write), generation, timestamps, labels, and only Orderly's own annotations
//     (power.orderly.dev/*) and, with an empty value, Argo CD's tracking annotation
//     (whether Argo CD manages the workload), and the controller owner reference
//     alone, as its API version, kind, name and uid (whether another operator
//     controls the workload); managed fields, every other annotation (kubectl's
//     last-applied-configuration, ...) and every other owner reference are dropped;
//   - Deployment and StatefulSet: spec.replicas, what one pod requests (the sum of the
//     containers' CPU and memory requests, for status.savedRequests) and the
//     readiness status fields;
//   - CronJob: spec.suspend;
//   - HorizontalPodAutoscaler: spec.scaleTargetRef, minReplicas and maxReplicas.
//
// Every write is a merge patch that names only the fields Orderly changes, key by key
// (workloadPatch), so what is dropped here is never written: the real object's other
// fields are left as they are. The function is idempotent (a trimmed object is
// trimmed to itself), as the cache requires.
//
// The cache applies a kind's transform to its metadata-only copy too, which another
// controller's watch may make (the Canary controller's watch of Deployments, which
// reads their labels): it is trimmed to the same metadata. Without it, that copy
// kept every Deployment's managed fields and annotations, as much memory again as
// the trimmed Deployments themselves.
func trimWorkload(in any) (any, error) {
	switch o := in.(type) {
	case *metav1.PartialObjectMetadata:
		return &metav1.PartialObjectMetadata{TypeMeta: o.TypeMeta, ObjectMeta: trimMeta(&o.ObjectMeta)}, nil
	case *appsv1.Deployment:
		return &appsv1.Deployment{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: trimMeta(&o.ObjectMeta),
			Spec: appsv1.DeploymentSpec{
				Replicas: o.Spec.Replicas,
				Template: trimTemplate(&o.Spec.Template),
			},
			Status: appsv1.DeploymentStatus{
				ObservedGeneration: o.Status.ObservedGeneration,
				ReadyReplicas:      o.Status.ReadyReplicas,
				UpdatedReplicas:    o.Status.UpdatedReplicas,
			},
		}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: trimMeta(&o.ObjectMeta),
			Spec: appsv1.StatefulSetSpec{
				Replicas: o.Spec.Replicas,
				Template: trimTemplate(&o.Spec.Template),
			},
			Status: appsv1.StatefulSetStatus{
				ObservedGeneration: o.Status.ObservedGeneration,
				ReadyReplicas:      o.Status.ReadyReplicas,
			},
		}, nil
	case *batchv1.CronJob:
		return &batchv1.CronJob{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: trimMeta(&o.ObjectMeta),
			Spec:       batchv1.CronJobSpec{Suspend: o.Spec.Suspend},
		}, nil
	case *autoscalingv2.HorizontalPodAutoscaler:
		return &autoscalingv2.HorizontalPodAutoscaler{
			TypeMeta:   o.TypeMeta,
			ObjectMeta: trimMeta(&o.ObjectMeta),
			Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
				ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{Kind: o.Spec.ScaleTargetRef.Kind, Name: o.Spec.ScaleTargetRef.Name},
				MinReplicas:    o.Spec.MinReplicas,
				MaxReplicas:    o.Spec.MaxReplicas,
			},
		}, nil
	}
	// A tombstone or a kind this transform was not made for: left as it is.
	return in, nil
}

// annotationPrefix is the prefix of every annotation the controller reads.
const annotationPrefix = "power.orderly.dev/"

func trimMeta(m *metav1.ObjectMeta) metav1.ObjectMeta {
	var ann map[string]string
	for k, v := range m.Annotations {
		switch {
		case strings.HasPrefix(k, annotationPrefix):
		case k == gitops.ArgoTrackingAnnotation:
			// Only whether Argo CD tracks the workload is read (gitOpsTool), not
			// the value, which the user could make large.
			v = ""
		default:
			continue
		}
		if ann == nil {
			ann = map[string]string{}
		}
		ann[k] = v
	}
	return metav1.ObjectMeta{
		Name:              m.Name,
		Namespace:         m.Namespace,
		UID:               m.UID,
		ResourceVersion:   m.ResourceVersion,
		Generation:        m.Generation,
		CreationTimestamp: m.CreationTimestamp,
		DeletionTimestamp: m.DeletionTimestamp,
		Labels:            m.Labels,
		Annotations:       ann,
		OwnerReferences:   controllerRef(m.OwnerReferences),
	}
}

// controllerRef is the controller among refs, as a list of one with only what
// ownerOf reads; nil when there is none.
func controllerRef(refs []metav1.OwnerReference) []metav1.OwnerReference {
	for _, r := range refs {
		if r.Controller != nil && *r.Controller {
			return []metav1.OwnerReference{{APIVersion: r.APIVersion, Kind: r.Kind, Name: r.Name, UID: r.UID, Controller: r.Controller}}
		}
	}
	return nil
}

// trimTemplate keeps what one pod requests: the sum of its containers' CPU and memory
// requests, as one container's. The status reports no more of a pod template, and
// the sum is then computed once per change of the workload, not at every reconcile.
func trimTemplate(t *corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	var out corev1.PodTemplateSpec
	if len(t.Spec.Containers) == 0 {
		return out
	}
	var req corev1.ResourceList
	for i := range t.Spec.Containers {
		for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
			if q, ok := t.Spec.Containers[i].Resources.Requests[name]; ok {
				if req == nil {
					req = corev1.ResourceList{}
				}
				sum := req[name]
				sum.Add(q)
				req[name] = sum
			}
		}
	}
	out.Spec.Containers = []corev1.Container{{Resources: corev1.ResourceRequirements{Requests: req}}}
	return out
}
