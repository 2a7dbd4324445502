//go:build integration

package sleepschedule

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/yaml"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// crd is a CRD of a namespaced kind served at v1 whose spec holds anything, with a
// scale subresource on .spec.replicas when scale is true.
func crd(group, kind, plural string, scale bool) string {
	sub := ""
	if scale {
		sub = `
    subresources:
      scale: {specReplicasPath: .spec.replicas, statusReplicasPath: .status.replicas}`
	}
	return fmt.Sprintf(`
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[3]s, singular: %[4]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true%[5]s
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, x-kubernetes-preserve-unknown-fields: true}
          status: {type: object, x-kubernetes-preserve-unknown-fields: true}
`, group, kind, plural, strings.ToLower(kind), sub)
}

func installCRD(t *testing.T, content string) {
	t.Helper()
	dir := t.TempDir()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "crd.yaml"), []byte(content), 0o600)).To(Succeed())
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// custom creates an object of gvk from YAML.
func custom(t *testing.T, gvk schema.GroupVersionKind, ns, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	NewWithT(t).Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
	u.SetGroupVersionKind(gvk)
	u.SetNamespace(ns)
	NewWithT(t).Expect(k.Create(context.Background(), u)).To(Succeed())
	return u
}

func getCustom(g Gomega, gvk schema.GroupVersionKind, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(gvk)
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)).To(Succeed())
	return u
}

var (
	widgetGVK = schema.GroupVersionKind{Group: "scale.sleep.test", Version: "v1", Kind: "Widget"}
	redisGVK  = schema.GroupVersionKind{Group: "patch.sleep.test", Version: "v1", Kind: "RedisFailover"}
	cacheGVK  = schema.GroupVersionKind{Group: "patch.sleep.test", Version: "v1", Kind: "Cache"}
	kedaGVK   = schema.GroupVersionKind{Group: "keda.sh", Version: "v1alpha1", Kind: "ScaledObject"}
)

func installTestKinds(t *testing.T) {
	installCRD(t, crd(widgetGVK.Group, widgetGVK.Kind, "widgets", true))
	installCRD(t, crd(redisGVK.Group, redisGVK.Kind, "redisfailovers", false))
	installCRD(t, crd(cacheGVK.Group, cacheGVK.Kind, "caches", false))
	installCRDFile(t, kedaCRD)
}

// KEDA's and Kubeflow's own CRDs (testdata/crds/README.md).
const (
	kedaCRD          = "testdata/crds/keda.sh_scaledobjects.yaml"
	kedaScaledJobCRD = "testdata/crds/keda.sh_scaledjobs.yaml"
	notebookCRD      = "testdata/crds/kubeflow.org_notebooks.yaml"
)

func installCRDFile(t *testing.T, path string) {
	t.Helper()
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{path}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// kedaTrigger is a trigger of a test ScaledObject; KEDA does not run here.
const kedaTrigger = `triggers: [{type: cron, metadata: {timezone: UTC, start: "0 8 * * *", end: "0 18 * * *", desiredReplicas: "2"}}]`

func jsonValue(s string) apiextensionsv1.JSON { return apiextensionsv1.JSON{Raw: []byte(s)} }

// withKindsRecheck is the controller looking at targets.kinds again every d.
func withKindsRecheck(d time.Duration) kit.Controller {
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := newReconciler(mgr, deps)
		r.KindsRecheck = d
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	return c
}

// A kind with a scale subresource sleeps by being named; kinds without one sleep by
// their declared patch (JSON patch and merge patch); a KEDA ScaledObject is paused
// with KEDA's annotation (the user's own value kept) and its target left to KEDA.
// Waking restores every object exactly, and workloads managed by Argo CD or Flux
// are reported.
func TestKindsSleepAndWakeRestoreExactly(t *testing.T) {
	installTestKinds(t)
	clk := clocktesting.NewFakePassiveClock(wedNoon)
	startManager(t, clk)
	ns := "kinds"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 3, nil)
	deployment(t, ns, "worker", 2, nil) // KEDA's
	web := getDeployment(NewWithT(t), ns, "web")
	web.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:kinds/web"}
	NewWithT(t).Expect(k.Update(context.Background(), web)).To(Succeed())

	custom(t, widgetGVK, ns, `{metadata: {name: w1, labels: {kustomize.toolkit.fluxcd.io/name: apps}}, spec: {replicas: 3, colour: blue}}`)
	custom(t, widgetGVK, ns, `{metadata: {name: excluded, annotations: {power.orderly.dev/exclude: "true"}}, spec: {replicas: 2}}`)
	redis := custom(t, redisGVK, ns, `{metadata: {name: rf}, spec: {redis: {replicas: 3, image: redis:7}, sentinel: {replicas: 3}, shards: [{replicas: 2}, {replicas: 4}]}}`)
	cache := custom(t, cacheGVK, ns, `{metadata: {name: c1, annotations: {team: payments}}, spec: {size: 5, tier: {name: gold}}}`)
	custom(t, kedaGVK, ns, `{metadata: {name: worker}, spec: {scaleTargetRef: {name: worker}, `+kedaTrigger+`}}`)
	custom(t, kedaGVK, ns, `{metadata: {name: paused-by-owner, annotations: {autoscaling.keda.sh/paused-replicas: "1"}}, spec: {scaleTargetRef: {name: other}, `+kedaTrigger+`}}`)

	s := newSchedule("kinds", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{
			{Group: widgetGVK.Group, Kind: widgetGVK.Kind},
			{Group: redisGVK.Group, Kind: redisGVK.Kind, Patch: &powerv1alpha1.SleepPatch{Type: powerv1alpha1.JSONPatchType, Fields: []powerv1alpha1.SleepField{
				{Path: "/spec/redis/replicas", Value: jsonValue("0")},
				{Path: "/spec/sentinel/replicas", Value: jsonValue("0")},
				{Path: "/spec/shards/1/replicas", Value: jsonValue("0")},
				{Path: "/spec/paused", Value: jsonValue("true")}, // absent before: removed on waking
			}}},
			{Group: cacheGVK.Group, Kind: cacheGVK.Kind, Patch: &powerv1alpha1.SleepPatch{Type: powerv1alpha1.MergePatchType, Fields: []powerv1alpha1.SleepField{
				{Path: "/spec/size", Value: jsonValue("0")},
				{Path: "/spec/tier/name", Value: jsonValue(`"none"`)},
			}}},
			{Group: kedaGVK.Group, Kind: kedaGVK.Kind},
		}
	}).create(t)

	got := waitState(t, s.Name, powerv1alpha1.StateAwake, 0)
	g := NewWithT(t)
	// web, w1, rf, c1, both ScaledObjects; not worker (KEDA's) nor the excluded Widget.
	g.Expect(got.Status.Workloads).To(BeEquivalentTo(6), "%+v", got.Status)
	g.Expect(condition(got, powerv1alpha1.ConditionKindsAvailable).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(condition(got, powerv1alpha1.ConditionGitOpsManaged).Status).To(Equal(metav1.ConditionTrue))
	g.Expect(got.Status.GitOpsManaged).To(ConsistOf(
		powerv1alpha1.GitOpsWorkload{Tool: powerv1alpha1.GitOpsArgoCD, Workload: "Deployment kinds/web"},
		powerv1alpha1.GitOpsWorkload{Tool: powerv1alpha1.GitOpsFlux, Workload: "Widget.scale.sleep.test kinds/w1"},
	))
	eventually(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, ReasonGitOpsManaged)).To(HaveLen(1)) })

	at(t, clk, wedEvening, s.Name, powerv1alpha1.StateAsleep, 6)
	w1 := getCustom(g, widgetGVK, ns, "w1")
	g.Expect(w1.Object["spec"]).To(Equal(map[string]any{"replicas": int64(0), "colour": "blue"}))
	g.Expect(w1.GetAnnotations()[powerv1alpha1.SleepStateAnnotation]).To(MatchJSON(`{"replicas":3,"sleepReplicas":0}`))
	g.Expect(getCustom(g, widgetGVK, ns, "excluded").Object["spec"]).To(Equal(map[string]any{"replicas": int64(2)}))
	rf := getCustom(g, redisGVK, ns, "rf")
	g.Expect(rf.Object["spec"]).To(Equal(map[string]any{
		"redis": map[string]any{"replicas": int64(0), "image": "redis:7"}, "sentinel": map[string]any{"replicas": int64(0)},
		"shards": []any{map[string]any{"replicas": int64(2)}, map[string]any{"replicas": int64(0)}}, "paused": true}))
	c1 := getCustom(g, cacheGVK, ns, "c1")
	g.Expect(c1.Object["spec"]).To(Equal(map[string]any{"size": int64(0), "tier": map[string]any{"name": "none"}}))
	g.Expect(c1.GetAnnotations()).To(HaveKeyWithValue("team", "payments"))
	g.Expect(getCustom(g, kedaGVK, ns, "worker").GetAnnotations()).To(HaveKeyWithValue(powerv1alpha1.KEDAPausedReplicasAnnotation, "0"))
	g.Expect(getCustom(g, kedaGVK, ns, "paused-by-owner").GetAnnotations()).To(HaveKeyWithValue(powerv1alpha1.KEDAPausedReplicasAnnotation, "0"))
	// KEDA scales its target: Orderly does not.
	g.Expect(replicas(g, ns, "worker")).To(BeEquivalentTo(2))
	g.Expect(getDeployment(g, ns, "worker").Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(0))

	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	w1 = getCustom(g, widgetGVK, ns, "w1")
	g.Expect(w1.Object["spec"]).To(Equal(map[string]any{"replicas": int64(3), "colour": "blue"}))
	g.Expect(w1.GetLabels()).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
	g.Expect(w1.GetAnnotations()).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation))
	rf = getCustom(g, redisGVK, ns, "rf")
	g.Expect(rf.Object["spec"]).To(Equal(redis.Object["spec"]), "restored exactly")
	g.Expect(rf.GetLabels()).To(BeEmpty())
	g.Expect(rf.GetAnnotations()).To(BeEmpty())
	c1 = getCustom(g, cacheGVK, ns, "c1")
	g.Expect(c1.Object["spec"]).To(Equal(cache.Object["spec"]), "restored exactly")
	g.Expect(c1.GetAnnotations()).To(Equal(map[string]string{"team": "payments"}))
	g.Expect(getCustom(g, kedaGVK, ns, "worker").GetAnnotations()).To(BeEmpty())
	g.Expect(getCustom(g, kedaGVK, ns, "paused-by-owner").GetAnnotations()).To(Equal(map[string]string{powerv1alpha1.KEDAPausedReplicasAnnotation: "1"}))
	g.Expect(replicas(g, ns, "web")).To(BeEquivalentTo(3))
}

// A kind changed by its owner while asleep is left alone, and not restored on waking.
func TestKindChangedWhileAsleepIsLeftAlone(t *testing.T) {
	installTestKinds(t)
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	startManager(t, clk)
	ns := "kinds-owner"
	namespace(t, ns, nil)
	custom(t, widgetGVK, ns, `{metadata: {name: w}, spec: {replicas: 3}}`)
	custom(t, redisGVK, ns, `{metadata: {name: rf}, spec: {redis: {replicas: 3}}}`)
	s := newSchedule("kinds-owner", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{
			{Group: widgetGVK.Group, Kind: widgetGVK.Kind},
			{Group: redisGVK.Group, Kind: redisGVK.Kind, Patch: &powerv1alpha1.SleepPatch{Fields: []powerv1alpha1.SleepField{{Path: "/spec/redis/replicas", Value: jsonValue("0")}}}},
		}
	}).create(t)
	waitState(t, s.Name, powerv1alpha1.StateAsleep, 2)

	g := NewWithT(t)
	for _, o := range []struct {
		gvk  schema.GroupVersionKind
		name string
		path []string
	}{{widgetGVK, "w", []string{"spec", "replicas"}}, {redisGVK, "rf", []string{"spec", "redis", "replicas"}}} {
		u := getCustom(g, o.gvk, ns, o.name)
		g.Expect(unstructured.SetNestedField(u.Object, int64(1), o.path...)).To(Succeed())
		g.Expect(k.Update(context.Background(), u)).To(Succeed())
	}
	poke(t, s.Name)
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(got.Status.LeftAlone).To(ConsistOf("Widget.scale.sleep.test kinds-owner/w", "RedisFailover.patch.sleep.test kinds-owner/rf"))
	})
	at(t, clk, thuMorning, s.Name, powerv1alpha1.StateAwake, 0)
	eventually(t, func(g Gomega) {
		w := getCustom(g, widgetGVK, ns, "w")
		g.Expect(w.GetLabels()).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
		g.Expect(w.Object["spec"]).To(Equal(map[string]any{"replicas": int64(1)}))
		rf := getCustom(g, redisGVK, ns, "rf")
		g.Expect(rf.GetLabels()).NotTo(HaveKey(powerv1alpha1.AsleepLabel))
		g.Expect(rf.Object["spec"]).To(Equal(map[string]any{"redis": map[string]any{"replicas": int64(1)}}))
	})
}

// A kind whose CRD is missing is reported in KindsAvailable, does not keep the rest
// from sleeping, and is picked up once its CRD is installed, without a restart; an
// object of it created then sleeps. Both through watches (the CRDs', then the kind's
// objects'): the schedule's recheck is an hour away.
func TestMissingKindIsReportedAndPickedUpWhenInstalled(t *testing.T) {
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	env.StartManagerForTest(t, kit.Deps{Clock: clk, Namespace: managerNamespace}, []kit.Controller{withKindsRecheck(time.Hour)})
	ns := "kinds-later"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	gadget := schema.GroupVersionKind{Group: "later.sleep.test", Version: "v1", Kind: "Gadget"}
	s := newSchedule("kinds-later", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: gadget.Group, Kind: gadget.Kind}}
	}).create(t)

	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	g := NewWithT(t)
	c := condition(got, powerv1alpha1.ConditionKindsAvailable)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal(ReasonKindNotFound))
	g.Expect(c.Message).To(ContainSubstring("Gadget.later.sleep.test is not served"))
	// Not served, so none of its objects is awake: not fatal, and said in Ready too.
	g.Expect(condition(got, powerv1alpha1.ConditionReady).Reason).To(Equal(ReasonAsleep), "a missing kind is not fatal")
	g.Expect(condition(got, powerv1alpha1.ConditionReady).Message).To(ContainSubstring("not served, so nothing of them to sleep (see KindsAvailable): Gadget.later.sleep.test"))
	eventually(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, ReasonKindNotFound)).To(HaveLen(1)) })

	installCRD(t, crd(gadget.Group, gadget.Kind, "gadgets", true))
	eventually(t, func(g Gomega) {
		g.Expect(condition(getSchedule(g, s.Name), powerv1alpha1.ConditionKindsAvailable).Status).To(Equal(metav1.ConditionTrue))
	})
	custom(t, gadget, ns, `{metadata: {name: gz}, spec: {replicas: 4}}`)
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(condition(got, powerv1alpha1.ConditionKindsAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(2))
		g.Expect(condition(got, powerv1alpha1.ConditionReady).Reason).To(Equal(ReasonAsleep))
		g.Expect(getCustom(g, gadget, ns, "gz").Object["spec"]).To(Equal(map[string]any{"replicas": int64(0)}))
	})
}

// forbiddingReader refuses to list one kind, as the API server does when the
// platform has not granted it.
type forbiddingReader struct {
	client.Reader
	kind   string
	forbid *atomic.Bool
}

func (f forbiddingReader) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	if f.forbid.Load() && list.GetObjectKind().GroupVersionKind().Kind == f.kind+"List" {
		return apierrors.NewForbidden(schema.GroupResource{Group: widgetGVK.Group, Resource: "widgets"}, "", fmt.Errorf("injected by the test"))
	}
	return f.Reader.List(ctx, list, opts...)
}

// A kind Orderly may not list is reported, naming the verb and the resource and how
// to grant it; the rest still sleeps. Once granted, the kind sleeps too; while it is
// not, a deletion of the schedule waits (what it holds asleep could not be woken).
func TestForbiddenKindIsReported(t *testing.T) {
	installTestKinds(t)
	clk := clocktesting.NewFakePassiveClock(wedEvening)
	forbid := &atomic.Bool{}
	forbid.Store(true)
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := newReconciler(mgr, deps)
		r.KindsRecheck = time.Second
		r.APIReader = forbiddingReader{Reader: r.APIReader, kind: widgetGVK.Kind, forbid: forbid}
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	env.StartManagerForTest(t, kit.Deps{Clock: clk, Namespace: managerNamespace}, []kit.Controller{c})
	ns := "kinds-forbidden"
	namespace(t, ns, nil)
	deployment(t, ns, "web", 2, nil)
	custom(t, widgetGVK, ns, `{metadata: {name: w}, spec: {replicas: 3}}`)
	s := newSchedule("kinds-forbidden", ns).with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: widgetGVK.Group, Kind: widgetGVK.Kind}}
	}).create(t)
	got := waitState(t, s.Name, powerv1alpha1.StateAsleep, 1)
	cond := condition(got, powerv1alpha1.ConditionKindsAvailable)
	g := NewWithT(t)
	g.Expect(cond.Reason).To(Equal(ReasonForbidden))
	g.Expect(cond.Message).To(ContainSubstring("may not list widgets.scale.sleep.test in namespace kinds-forbidden"))
	g.Expect(cond.Message).To(ContainSubstring(aggregationLabel + "=true"))
	g.Expect(getCustom(g, widgetGVK, ns, "w").Object["spec"]).To(Equal(map[string]any{"replicas": int64(3)}))

	forbid.Store(false)
	eventually(t, func(g Gomega) {
		got := getSchedule(g, s.Name)
		g.Expect(condition(got, powerv1alpha1.ConditionKindsAvailable).Status).To(Equal(metav1.ConditionTrue))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(2))
	})
	forbid.Store(true)
	g.Expect(k.Delete(context.Background(), s)).To(Succeed())
	consistently(t, func(g Gomega) {
		g.Expect(getCustom(g, widgetGVK, ns, "w").Object["spec"]).To(Equal(map[string]any{"replicas": int64(0)}))
		g.Expect(getSchedule(g, s.Name).Finalizers).NotTo(BeEmpty())
	})
	eventually(t, func(g Gomega) { g.Expect(eventsFor(g, s.Name, ReasonForbidden)).NotTo(BeEmpty()) })
	forbid.Store(false)
	eventually(t, func(g Gomega) {
		g.Expect(getCustom(g, widgetGVK, ns, "w").Object["spec"]).To(Equal(map[string]any{"replicas": int64(3)}))
	})
}

// The API server refuses kinds that cannot be named, pointers that are not JSON
// pointers under /spec, and merge patches through list elements.
func TestKindsValidation(t *testing.T) {
	patch := func(typ powerv1alpha1.PatchType, paths ...string) *powerv1alpha1.SleepPatch {
		p := &powerv1alpha1.SleepPatch{Type: typ}
		for _, path := range paths {
			p.Fields = append(p.Fields, powerv1alpha1.SleepField{Path: path, Value: jsonValue("0")})
		}
		return p
	}
	tests := []struct {
		name string
		kind powerv1alpha1.SleepKind
		want string
	}{
		{"built-in kind", powerv1alpha1.SleepKind{Group: "apps", Kind: "Deployment"}, "do not list them in targets.kinds"},
		{"bad group", powerv1alpha1.SleepKind{Group: "Example_com", Kind: "Widget"}, "group must be empty"},
		{"plural for kind", powerv1alpha1.SleepKind{Group: "example.com", Kind: "widgets"}, "kind must be a kind name"},
		{"outside spec", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch("", "/metadata/labels")}, "path must be a JSON pointer under /spec"},
		{"two annotation segments", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch("", "/metadata/annotations/example.com/paused")}, "an annotation path names one annotation"},
		{"Orderly's annotation", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch("", "/metadata/annotations/power.orderly.dev~1sleep-state")}, "Orderly's own annotations"},
		{"bad escape", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch("", "/spec/a~2")}, "path must be a JSON pointer (RFC 6901)"},
		{"empty segment", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch("", "/spec//x")}, "path must be a JSON pointer (RFC 6901)"},
		{"merge patch into a list", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch(powerv1alpha1.MergePatchType, "/spec/shards/0/replicas")}, "use type JSONPatch"},
		{"unknown patch type", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: patch("StrategicMergePatch", "/spec/replicas")}, "Unsupported value"},
		{"no fields", powerv1alpha1.SleepKind{Group: "example.com", Kind: "Widget", Patch: &powerv1alpha1.SleepPatch{}}, "fields"},
	}
	for _, tt := range tests {
		s := newSchedule("invalid-kinds", "x").with(func(s *powerv1alpha1.SleepScheduleSpec) {
			s.Targets.Kinds = []powerv1alpha1.SleepKind{tt.kind}
		}).s
		err := k.Create(context.Background(), s, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: error %v, want one containing %q", tt.name, err, tt.want)
		}
	}
	ok := newSchedule("valid-kinds", "x").with(func(s *powerv1alpha1.SleepScheduleSpec) {
		s.Targets.Kinds = []powerv1alpha1.SleepKind{
			{Group: "", Kind: "ReplicationController"},
			{Group: "keda.sh", Kind: "ScaledObject"},
			{Group: "example.com", Kind: "Widget", Patch: patch(powerv1alpha1.JSONPatchType, "/spec/shards/0/replicas", "/spec/a~1b")},
			{Group: "kubeflow.org", Kind: "Notebook", Patch: &powerv1alpha1.SleepPatch{Fields: []powerv1alpha1.SleepField{
				{Path: "/metadata/annotations/kubeflow-resource-stopped", Value: jsonValue(`"orderly"`)},
				{Path: "/metadata/annotations/example.com~1paused", Value: jsonValue(`"true"`)}}}},
		}
		s.Exclude.Workloads = []powerv1alpha1.WorkloadRef{{Kind: "Widget", Name: "w"}}
	}).s
	NewWithT(t).Expect(k.Create(context.Background(), ok, client.DryRunAll)).To(Succeed())

	// The sample, with its kinds, is accepted as it is.
	raw, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "samples", "power_v1beta1_sleepschedule.yaml"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	sample := &unstructured.Unstructured{}
	NewWithT(t).Expect(yaml.Unmarshal(raw, &sample.Object)).To(Succeed())
	kinds, _, _ := unstructured.NestedSlice(sample.Object, "spec", "targets", "kinds")
	NewWithT(t).Expect(kinds).To(HaveLen(3))
	NewWithT(t).Expect(k.Create(context.Background(), sample, client.DryRunAll)).To(Succeed())
}
