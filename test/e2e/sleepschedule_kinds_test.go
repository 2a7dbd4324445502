//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
)

// e2eKindCRD is a CRD of a namespaced kind whose spec holds anything, with a scale
// subresource on .spec.replicas when scale is true.
func e2eKindCRD(group, kind, plural, version string, scale bool) string {
	sub := ""
	if scale {
		sub = "\n    subresources:\n      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}"
	}
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[3]s, singular: %[4]s}
  scope: Namespaced
  versions:
  - name: %[5]s
    served: true
    storage: true%[6]s
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
`, group, kind, plural, strings.ToLower(kind), version, sub)
}

// TestSleepScheduleKinds runs the manager, as its ServiceAccount, on kinds it holds no
// RBAC for: a CRD with a scale subresource, one without (patch), and KEDA's
// ScaledObject, all made by the test. Until the platform grants them the documented
// way (a ClusterRole labelled power.orderly.dev/aggregate-to-sleepschedule), the
// schedule says Forbidden, naming the verb and resource; then they sleep, and wake
// restored exactly. An Argo CD-managed Deployment is reported.
func TestSleepScheduleKinds(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pc := powerClient(t)
	var (
		widget = schema.GroupVersionKind{Group: "scale.e2e.orderly.test", Version: "v1", Kind: "Widget"}
		redis  = schema.GroupVersionKind{Group: "patch.e2e.orderly.test", Version: "v1", Kind: "RedisFailover"}
		keda   = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
	)
	dir := t.TempDir()
	crds := e2eKindCRD(widget.Group, widget.Kind, "widgets", "v1", true) +
		e2eKindCRD(redis.Group, redis.Kind, "redisfailovers", "v1", false) +
		e2eKindCRD(keda.Group, keda.Kind, "scaledobjects", "v1alpha1", true)
	g.Expect(os.WriteFile(filepath.Join(dir, "crds.yaml"), []byte(crds), 0o600)).To(Succeed())
	_, err := envtest.InstallCRDs(adminCfg, envtest.CRDInstallOptions{Paths: []string{dir}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = envtest.UninstallCRDs(adminCfg, envtest.CRDInstallOptions{Paths: []string{dir}}) })

	ns := "e2e-kinds"
	g.Expect(pc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() {
		_ = pc.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	})
	create := func(gvk schema.GroupVersionKind, doc string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		g.Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
		u.SetGroupVersionKind(gvk)
		u.SetNamespace(ns)
		g.Expect(pc.Create(ctx, u)).To(Succeed())
		return u
	}
	get := func(g Gomega, gvk schema.GroupVersionKind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(gvk)
		g.Expect(pc.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
		return u
	}
	w := create(widget, `{metadata: {name: w}, spec: {replicas: 3, colour: blue}}`)
	rf := create(redis, `{metadata: {name: rf, annotations: {team: cache}}, spec: {redis: {replicas: 3, image: "redis:7"}, sentinel: {replicas: 3}}}`)
	create(keda, `{metadata: {name: worker}, spec: {scaleTargetRef: {name: worker}}}`)
	worker := deployment(ns, "worker", 1)
	argo := deployment(ns, "shop", 1)
	argo.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:e2e-kinds/shop"}
	g.Expect(pc.Create(ctx, worker)).To(Succeed())
	g.Expect(pc.Create(ctx, argo)).To(Succeed())

	s := &powerv1alpha1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-kinds"},
		// Asleep all the time, until woken by wakeUntil below.
		Spec: powerv1alpha1.SleepScheduleSpec{
			Namespaces: []string{ns},
			Targets: powerv1alpha1.SleepTargets{Kinds: []powerv1alpha1.SleepKind{
				{Group: widget.Group, Kind: widget.Kind},
				{Group: redis.Group, Kind: redis.Kind, Patch: &powerv1alpha1.SleepPatch{Type: powerv1alpha1.MergePatchType, Fields: []powerv1alpha1.SleepField{
					{Path: "/spec/redis/replicas", Value: apiextensionsv1.JSON{Raw: []byte("0")}},
					{Path: "/spec/sentinel/replicas", Value: apiextensionsv1.JSON{Raw: []byte("0")}},
				}}},
				{Group: keda.Group, Kind: keda.Kind},
			}},
		},
	}
	g.Expect(pc.Create(ctx, s)).To(Succeed())
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-orderly-sleep-kinds", Labels: map[string]string{"power.orderly.dev/aggregate-to-sleepschedule": "true"}},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{widget.Group, redis.Group, keda.Group}, Resources: []string{"widgets", "redisfailovers", "scaledobjects"}, Verbs: []string{"list", "patch"}},
			{APIGroups: []string{widget.Group}, Resources: []string{"widgets/scale"}, Verbs: []string{"get", "patch"}},
		},
	}
	// Registered last, so run first: the schedule wakes what it holds before its
	// permissions and the kinds go.
	t.Cleanup(func() { _ = pc.Delete(context.Background(), role) })
	t.Cleanup(func() {
		_ = pc.Delete(context.Background(), s)
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(pc.Get(context.Background(), client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{}))
		}, timeout, poll).Should(BeTrue())
	})
	schedule := func(g Gomega) *powerv1alpha1.SleepSchedule {
		var got powerv1alpha1.SleepSchedule
		g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(s), &got)).To(Succeed())
		return &got
	}
	condition := func(g Gomega, typ string) *metav1.Condition {
		c := meta.FindStatusCondition(schedule(g).Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil(), typ)
		return c
	}

	// Not granted yet: reported, and the Deployment still sleeps.
	g.Eventually(func(g Gomega) {
		c := condition(g, powerv1alpha1.ConditionKindsAvailable)
		g.Expect(c.Reason).To(Equal("Forbidden"))
		g.Expect(c.Message).To(ContainSubstring("Orderly may not list widgets.scale.e2e.orderly.test in namespace e2e-kinds"))
		// shop, and worker: until the ScaledObjects can be read, their targets are
		// not known to be KEDA's and sleep as any Deployment.
		g.Expect(schedule(g).Status.SleepingWorkloads).To(BeEquivalentTo(2))
		c = condition(g, powerv1alpha1.ConditionGitOpsManaged)
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(schedule(g).Status.GitOpsManaged).To(ConsistOf(powerv1alpha1.GitOpsWorkload{Tool: powerv1alpha1.GitOpsArgoCD, Workload: "Deployment e2e-kinds/shop"}))
	}, timeout, poll).Should(Succeed())

	// Granted the documented way: everything sleeps.
	g.Expect(pc.Create(ctx, role)).To(Succeed())
	g.Eventually(func(g Gomega) {
		pokeSchedule(g, pc, s.Name) // instead of waiting for the 30 s recheck
		g.Expect(condition(g, powerv1alpha1.ConditionKindsAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(schedule(g).Status.SleepingWorkloads).To(BeEquivalentTo(4)) // shop, w, rf, worker's ScaledObject
	}, timeout, time.Second).Should(Succeed())
	g.Expect(get(g, widget, "w").Object["spec"]).To(Equal(map[string]any{"replicas": int64(0), "colour": "blue"}))
	g.Expect(get(g, redis, "rf").Object["spec"]).To(Equal(map[string]any{
		"redis": map[string]any{"replicas": int64(0), "image": "redis:7"}, "sentinel": map[string]any{"replicas": int64(0)}}))
	g.Expect(get(g, keda, "worker").GetAnnotations()).To(HaveKeyWithValue("autoscaling.keda.sh/paused-replicas", "0"))
	g.Expect(pc.Get(ctx, client.ObjectKeyFromObject(worker), worker)).To(Succeed())
	g.Expect(*worker.Spec.Replicas).To(BeEquivalentTo(1), "KEDA's target is left to KEDA (and woken)")
	g.Expect(worker.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))

	// Woken: restored exactly, nothing of Orderly's left.
	wake := metav1.NewTime(time.Now().Add(time.Hour))
	g.Eventually(func(g Gomega) {
		got := schedule(g)
		got.Spec.WakeUntil = &wake
		g.Expect(pc.Update(ctx, got)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(schedule(g).Status.State).To(Equal(powerv1alpha1.StateAwake))
		g.Expect(schedule(g).Status.SleepingWorkloads).To(BeEquivalentTo(0))
	}, timeout, poll).Should(Succeed())
	gotW, gotRF := get(g, widget, "w"), get(g, redis, "rf")
	g.Expect(gotW.Object["spec"]).To(Equal(w.Object["spec"]))
	g.Expect(gotW.GetLabels()).To(BeEmpty())
	g.Expect(gotW.GetAnnotations()).To(BeEmpty())
	g.Expect(gotRF.Object["spec"]).To(Equal(rf.Object["spec"]))
	g.Expect(gotRF.GetAnnotations()).To(Equal(map[string]string{"team": "cache"}))
	g.Expect(get(g, keda, "worker").GetAnnotations()).To(BeEmpty())

	// What it saved, as `orderly sleep savings` shows it.
	out, err := exec.Command(os.Getenv("ORDERLY_BIN"), "sleep", "savings", "--kubeconfig", devcluster.KubeconfigPath(clusterName)).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("ASLEEP THIS WEEK (h)"))
	g.Expect(string(out)).To(MatchRegexp(`(?m)^e2e-kinds +Awake +0 `))
}

// pokeSchedule makes the manager reconcile the schedule now, as `kubectl annotate` would.
func pokeSchedule(g Gomega, pc client.Client, name string) {
	var s powerv1alpha1.SleepSchedule
	g.Expect(pc.Get(context.Background(), client.ObjectKey{Name: name}, &s)).To(Succeed())
	patch := client.MergeFrom(s.DeepCopy())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations["e2e/poke"] = time.Now().Format(time.RFC3339Nano)
	g.Expect(pc.Patch(context.Background(), &s, patch)).To(Succeed())
}
