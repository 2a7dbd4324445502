package sleepschedule

import (
	"context"
	"encoding/json"
	"maps"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
)

// fullDeployment is a Deployment as a user writes it: much more than the controller reads.
func fullDeployment() *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web", UID: "u1", ResourceVersion: "7", Generation: 3,
			Labels: map[string]string{"app": "web", powerv1alpha1.AsleepLabel: "nights"},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/last-applied-configuration": strings.Repeat("x", 64<<10),
				"team":                             "payments",
				powerv1alpha1.SleepStateAnnotation: `{"replicas":3,"sleepReplicas":0}`,
				powerv1alpha1.ExcludeAnnotation:    "false",
			},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"prometheus.io/scrape": "true"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{
					{Name: "app", Image: "registry.example/app:1", Env: []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
						Resources: corev1.ResourceRequirements{
							Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("128Mi"), corev1.ResourceEphemeralStorage: resource.MustParse("1Gi")},
							Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")},
						}},
					{Name: "sidecar", Image: "registry.example/proxy:2", Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m")}}},
				}},
			},
		},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 0, ReadyReplicas: 0, UpdatedReplicas: 0, AvailableReplicas: 0,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Message: "ok"}}},
	}
}

func TestTrimWorkloadKeepsWhatTheControllerReads(t *testing.T) {
	full := fullDeployment()
	out, err := trimWorkload(full.DeepCopy())
	if err != nil {
		t.Fatal(err)
	}
	d := out.(*appsv1.Deployment)
	// What the controller reads is there and the same.
	if d.Name != "web" || d.Namespace != "dev" || d.ResourceVersion != "7" || d.Generation != 3 || d.UID != "u1" {
		t.Errorf("identity and version lost: %+v", d.ObjectMeta)
	}
	if *d.Spec.Replicas != 0 || d.Labels[powerv1alpha1.AsleepLabel] != "nights" {
		t.Errorf("replicas or labels lost: %+v", d)
	}
	if rec, err := readRecord(d, powerv1alpha1.KindDeployment); err != nil || *rec.Replicas != 3 {
		t.Errorf("record = %+v, %v", rec, err)
	}
	if d.Annotations[powerv1alpha1.ExcludeAnnotation] != "false" {
		t.Errorf("Orderly's annotations lost: %v", d.Annotations)
	}
	if got, want := podRequests(&d.Spec.Template.Spec), podRequests(&full.Spec.Template.Spec); !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("pod requests %v, want %v", got, want)
	}
	if got, want := kit.RolloutOf(d, kit.RolloutReadyAtCount), kit.RolloutOf(full, kit.RolloutReadyAtCount); got != want {
		t.Errorf("readiness %+v differs from the full object's %+v", got, want)
	}
	// The rest is gone.
	if len(d.ManagedFields) != 0 || len(d.Annotations) != 2 || d.Spec.Selector != nil || d.Spec.Template.Spec.Containers[0].Image != "" ||
		len(d.Status.Conditions) != 0 || d.Spec.Template.Labels != nil {
		t.Errorf("kept more than needed: %+v", d)
	}
	if size(t, d) > 2048 {
		t.Errorf("a trimmed Deployment is %d bytes of JSON, want under 2 KiB (the full one: %d)", size(t, d), size(t, full))
	}
	// The cache may hand a trimmed object to the transform again.
	again, _ := trimWorkload(d.DeepCopy())
	if !apiequality.Semantic.DeepEqual(again, d) {
		t.Errorf("trimming is not idempotent:\n%+v\n%+v", again, d)
	}
	// Anything else is left as it is.
	cm := &corev1.ConfigMap{Data: map[string]string{"a": "b"}}
	if got, _ := trimWorkload(cm); got != cm {
		t.Error("an object of another kind was changed")
	}
}

func size(t *testing.T, o any) int {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return len(b)
}

// A write decided on a trimmed object changes only what it means to change on the
// real object: what the cache dropped never appears in the patch, and removing the
// last annotation the cache holds does not remove the others.
func TestWriteFromTrimmedObjectKeepsTheRest(t *testing.T) {
	ctx := context.Background()
	hpa := &autoscalingv2.HorizontalPodAutoscaler{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web", Annotations: map[string]string{"team": "payments"}},
		Spec: autoscalingv2.HorizontalPodAutoscalerSpec{
			ScaleTargetRef: autoscalingv2.CrossVersionObjectReference{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
			MinReplicas:    ptr.To(int32(2)), MaxReplicas: 10,
			Metrics: []autoscalingv2.MetricSpec{{Type: autoscalingv2.ResourceMetricSourceType, Resource: &autoscalingv2.ResourceMetricSource{
				Name: corev1.ResourceCPU, Target: autoscalingv2.MetricTarget{Type: autoscalingv2.UtilizationMetricType, AverageUtilization: ptr.To(int32(70))}}}},
		},
	}
	cron := &batchv1.CronJob{
		ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "report", Annotations: map[string]string{"team": "payments"}},
		Spec: batchv1.CronJobSpec{Schedule: "*/5 * * * *", TimeZone: ptr.To("Europe/Berlin"), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever, Containers: []corev1.Container{{Name: "job", Image: "job:1"}}}}}}},
	}
	d := fullDeployment()
	d.ResourceVersion, d.ManagedFields = "", nil
	// Orderly's record is the only annotation the cache keeps: waking removes the last
	// key of the cached map, which a plain diff would send as "annotations": null.
	delete(d.Annotations, powerv1alpha1.ExcludeAnnotation)
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(d, cron, hpa).Build()
	r := &Reconciler{Client: c}
	s := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nights"}}

	cached := func(obj client.Object) client.Object {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			t.Fatal(err)
		}
		out, err := trimWorkload(obj.DeepCopyObject())
		if err != nil {
			t.Fatal(err)
		}
		return out.(client.Object)
	}
	// check compares the real object after the write with the one before, once the
	// fields the write means to change are set aside.
	check := func(before, after client.Object, clear func(client.Object)) {
		t.Helper()
		for _, o := range []client.Object{before, after} {
			o.SetResourceVersion("")
			lbls, ann := o.GetLabels(), o.GetAnnotations()
			delete(lbls, powerv1alpha1.AsleepLabel)
			delete(ann, powerv1alpha1.SleepStateAnnotation)
			delete(ann, powerv1alpha1.LeftAloneAnnotation)
			o.SetLabels(lbls)
			o.SetAnnotations(ann)
			clear(o)
		}
		if !apiequality.Semantic.DeepEqual(before, after) {
			t.Errorf("the write changed more than it meant to:\nbefore %+v\nafter  %+v", before, after)
		}
	}

	// Wake a Deployment: replicas back to 3, Orderly's marks gone, nothing else touched.
	before := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web"}}
	w := &workload{kind: powerv1alpha1.KindDeployment, obj: cached(before), act: actWake, record: &sleepRecord{Replicas: ptr.To(int32(3))}}
	if err := r.write(ctx, s, w, 0); err != nil {
		t.Fatal(err)
	}
	after := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(before), after); err != nil {
		t.Fatal(err)
	}
	if *after.Spec.Replicas != 3 || after.Labels[powerv1alpha1.AsleepLabel] != "" {
		t.Errorf("wake not written: replicas %d, labels %v", *after.Spec.Replicas, after.Labels)
	}
	check(before, after, func(o client.Object) { o.(*appsv1.Deployment).Spec.Replicas = nil })

	// Put a CronJob to sleep.
	beforeCron := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "report"}}
	w = &workload{kind: powerv1alpha1.KindCronJob, obj: cached(beforeCron), act: actSleep}
	if err := r.write(ctx, s, w, 0); err != nil {
		t.Fatal(err)
	}
	afterCron := &batchv1.CronJob{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(beforeCron), afterCron); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(afterCron.Spec.Suspend, false) || afterCron.Labels[powerv1alpha1.AsleepLabel] != "nights" {
		t.Errorf("sleep not written: %+v", afterCron)
	}
	check(beforeCron, afterCron, func(o client.Object) { o.(*batchv1.CronJob).Spec.Suspend = nil })

	// Pin an HPA.
	beforeHPA := &autoscalingv2.HorizontalPodAutoscaler{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web"}}
	h := &hpaWrite{hpa: cached(beforeHPA).(*autoscalingv2.HorizontalPodAutoscaler), pin: true}
	if err := r.writeHPA(ctx, s, h, 1); err != nil {
		t.Fatal(err)
	}
	afterHPA := &autoscalingv2.HorizontalPodAutoscaler{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(beforeHPA), afterHPA); err != nil {
		t.Fatal(err)
	}
	if *afterHPA.Spec.MinReplicas != 1 || afterHPA.Spec.MaxReplicas != 1 {
		t.Errorf("pin not written: %+v", afterHPA.Spec)
	}
	check(beforeHPA, afterHPA, func(o client.Object) {
		o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MinReplicas, o.(*autoscalingv2.HorizontalPodAutoscaler).Spec.MaxReplicas = nil, 0
	})
}

// Another controller's metadata-only watch of a workload kind shares the kind's
// transform: its copy keeps the identity and labels (what such a watch maps by) and
// drops managed fields and other annotations, as the typed copy does.
func TestTrimWorkloadTrimsMetadataOnlyCopies(t *testing.T) {
	full := fullDeployment()
	full.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
	in := &metav1.PartialObjectMetadata{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: *full.ObjectMeta.DeepCopy()}
	out, err := trimWorkload(in)
	if err != nil {
		t.Fatal(err)
	}
	m, ok := out.(*metav1.PartialObjectMetadata)
	if !ok {
		t.Fatalf("trimmed to %T", out)
	}
	if m.Kind != "Deployment" || m.Name != full.Name || m.Namespace != full.Namespace || m.ResourceVersion != full.ResourceVersion || !maps.Equal(m.Labels, full.Labels) {
		t.Errorf("identity or labels lost: %+v", m)
	}
	if m.ManagedFields != nil {
		t.Errorf("managed fields kept: %v", m.ManagedFields)
	}
	for k := range m.Annotations {
		if !strings.HasPrefix(k, annotationPrefix) {
			t.Errorf("annotation %q kept", k)
		}
	}
	again, _ := trimWorkload(m)
	if !apiequality.Semantic.DeepEqual(again, m) {
		t.Errorf("not idempotent: %+v", again)
	}
}
