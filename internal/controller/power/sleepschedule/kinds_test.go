package sleepschedule

import (
	"errors"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/gitops"
	"orderly.dev/orderly/internal/kit"
)

func TestResolveKinds(t *testing.T) {
	served := map[schema.GroupKind]kit.KindInfo{
		{Group: "example.com", Kind: "Scaled"}:   {Version: "v1", Resource: "scaleds", Namespaced: true, Scale: true},
		{Group: "example.com", Kind: "Plain"}:    {Version: "v1", Resource: "plains", Namespaced: true},
		{Group: "example.com", Kind: "Global"}:   {Version: "v1", Resource: "globals", Scale: true},
		{Group: "keda.sh", Kind: "ScaledObject"}: {Version: "v1alpha1", Resource: "scaledobjects", Namespaced: true, Scale: true},
	}
	info := func(gk schema.GroupKind) (kit.KindInfo, error) {
		if gk.Kind == "Broken" {
			return kit.KindInfo{}, errors.New("discovery down")
		}
		return served[gk], nil
	}
	patch := &powerv1alpha1.SleepPatch{Fields: []powerv1alpha1.SleepField{field("/spec/replicas", "0")}}
	tests := []struct {
		kind       powerv1alpha1.SleepKind
		wantMode   kindMode
		wantReason string
	}{
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Scaled"}, modeScale, ""},
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Scaled", Patch: patch}, modePatch, ""},
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Plain", Patch: patch}, modePatch, ""},
		{powerv1alpha1.SleepKind{Group: "keda.sh", Kind: "ScaledObject"}, modeKEDA, ""},
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Plain"}, 0, ReasonNoScaleSubresource},
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Missing"}, 0, ReasonKindNotFound},
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Global"}, 0, ReasonClusterScoped},
		{powerv1alpha1.SleepKind{Group: "example.com", Kind: "Broken"}, 0, ReasonKindUnreadable},
	}
	for _, tt := range tests {
		kinds, problems := resolveKinds([]powerv1alpha1.SleepKind{tt.kind}, info)
		switch {
		case tt.wantReason != "":
			if len(kinds) != 0 || len(problems) != 1 || problems[0].reason != tt.wantReason || problems[0].kind != tt.kind.Kind+"."+tt.kind.Group {
				t.Errorf("%s: kinds %v problems %+v, want one problem %s", tt.kind.Kind, kinds, problems, tt.wantReason)
			}
		case len(problems) != 0 || len(kinds) != 1 || kinds[0].mode != tt.wantMode:
			t.Errorf("%s: kinds %v problems %+v, want mode %d", tt.kind.Kind, kinds, problems, tt.wantMode)
		}
	}
	_, problems := resolveKinds([]powerv1alpha1.SleepKind{{Group: "example.com", Kind: "Missing"}}, info)
	if got := problems[0].message; got != "Missing.example.com is not served by the API server (is its CRD installed?)" {
		t.Errorf("message = %q", got)
	}
}

func TestGitOpsTool(t *testing.T) {
	tests := []struct {
		name        string
		labels      map[string]string
		annotations map[string]string
		want        powerv1alpha1.GitOpsTool
	}{
		{"none", nil, nil, ""},
		{"Helm's instance label alone tells nothing", map[string]string{"app.kubernetes.io/instance": "web"}, nil, ""},
		{"Argo CD annotation tracking", nil, map[string]string{gitops.ArgoTrackingAnnotation: "app:apps/Deployment:dev/web"}, powerv1alpha1.GitOpsArgoCD},
		{"Argo CD annotation+label tracking", map[string]string{"app.kubernetes.io/instance": "app"}, map[string]string{gitops.ArgoTrackingAnnotation: ""}, powerv1alpha1.GitOpsArgoCD},
		{"Argo CD custom label", map[string]string{gitops.ArgoInstanceLabel: "app"}, nil, powerv1alpha1.GitOpsArgoCD},
		{"Flux Kustomization", map[string]string{gitops.FluxKustomizationLabel: "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"}, nil, powerv1alpha1.GitOpsFlux},
		{"Flux HelmRelease", map[string]string{gitops.FluxHelmReleaseLabel: "web"}, nil, powerv1alpha1.GitOpsFlux},
	}
	for _, tt := range tests {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Labels: tt.labels, Annotations: tt.annotations}}
		if got := gitOpsTool(d); got != tt.want {
			t.Errorf("%s: gitOpsTool = %q, want %q", tt.name, got, tt.want)
		}
	}
}

// The cache keeps that Argo CD tracks a workload, not the annotation's value.
func TestTrimWorkloadKeepsArgoTracking(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{gitops.ArgoTrackingAnnotation: "app:apps/Deployment:dev/web", "other": "x"}}}
	out, _ := trimWorkload(d)
	got := out.(*appsv1.Deployment)
	if v, ok := got.Annotations[gitops.ArgoTrackingAnnotation]; !ok || v != "" || len(got.Annotations) != 1 {
		t.Errorf("annotations = %v", got.Annotations)
	}
	if gitOpsTool(got) != powerv1alpha1.GitOpsArgoCD {
		t.Error("the trimmed copy no longer tells Argo CD tracks it")
	}
}

func TestDecideKinds(t *testing.T) {
	scale := &extraKind{mode: modeScale, name: "Widget.example.com"}
	patched := &extraKind{mode: modePatch, name: "Redis.example.com"}
	keda := &extraKind{mode: modeKEDA, name: "ScaledObject.keda.sh"}
	u := func(s string) *unstructured.Unstructured { return &unstructured.Unstructured{Object: object(t, s)} }
	withAnn := func(v *string) *unstructured.Unstructured {
		o := u(`{"spec":{}}`)
		if v != nil {
			o.SetAnnotations(map[string]string{powerv1alpha1.KEDAPausedReplicasAnnotation: *v})
		}
		return o
	}
	patchRec := &sleepRecord{Fields: []fieldRecord{{Path: "/spec/replicas", Before: []byte("3"), Slept: []byte("0")}}}
	tests := []struct {
		name string
		w    workload
		want action
	}{
		{"scale kind asleep as recorded", workload{extra: scale, value: 0, want: true, asleepBy: "me", record: &sleepRecord{Replicas: ptr.To(int32(3)), SleepReplicas: ptr.To(int32(0))}}, actNone},
		{"scale kind scaled by hand", workload{extra: scale, value: 2, want: true, asleepBy: "me", record: &sleepRecord{Replicas: ptr.To(int32(3)), SleepReplicas: ptr.To(int32(0))}}, actLeftAlone},
		{"patched kind asleep as recorded", workload{extra: patched, obj: u(`{"spec":{"replicas":0}}`), want: true, asleepBy: "me", record: patchRec}, actNone},
		{"patched kind changed by hand", workload{extra: patched, obj: u(`{"spec":{"replicas":5}}`), want: true, asleepBy: "me", record: patchRec}, actLeftAlone},
		{"patched kind wakes", workload{extra: patched, obj: u(`{"spec":{"replicas":0}}`), asleepBy: "me", record: patchRec}, actWake},
		{"paused ScaledObject", workload{extra: keda, obj: withAnn(ptr.To("0")), want: true, asleepBy: "me", record: &sleepRecord{}}, actNone},
		{"ScaledObject unpaused by hand", workload{extra: keda, obj: withAnn(nil), want: true, asleepBy: "me", record: &sleepRecord{}}, actLeftAlone},
		{"ScaledObject paused at 2 by hand", workload{extra: keda, obj: withAnn(ptr.To("2")), asleepBy: "me", record: &sleepRecord{}}, actRelease},
		{"ScaledObject wakes", workload{extra: keda, obj: withAnn(ptr.To("0")), asleepBy: "me", record: &sleepRecord{PausedReplicas: ptr.To("1")}}, actWake},
	}
	for _, tt := range tests {
		if got := decide(&tt.w, "me"); got != tt.want {
			t.Errorf("%s: decide() = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestReadRecordOfKinds(t *testing.T) {
	for _, tt := range []struct {
		kind, raw string
		ok        bool
	}{
		{recordScale, `{"replicas":3,"sleepReplicas":0}`, true},
		{recordScale, `{"sleepReplicas":0}`, false},
		{recordScale, `{"replicas":-1}`, false},
		{recordPatch, `{"fields":[{"path":"/spec/replicas","before":3,"slept":0}]}`, true},
		{recordPatch, `{"fields":[{"path":"/metadata/labels","before":{},"slept":0}]}`, false},
		{recordPatch, `{}`, false},
		{recordKEDA, `{}`, true},
		{recordKEDA, `{"pausedReplicas":"2"}`, true},
	} {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{powerv1alpha1.SleepStateAnnotation: tt.raw}}}
		_, err := readRecord(d, tt.kind)
		if (err == nil) != tt.ok {
			t.Errorf("%q %s: error %v, want ok %v", tt.kind, tt.raw, err, tt.ok)
		}
	}
}

func TestComputeStatusReportsKindsAndGitOps(t *testing.T) {
	s := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "me", Generation: 1}}
	s.Spec.Targets.Kinds = []powerv1alpha1.SleepKind{{Group: "example.com", Kind: "Gadget"}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "dev", Name: "web"}}
	obs := &observation{now: time.Unix(0, 0), state: powerv1alpha1.StateAwake, namespaces: []string{"dev"}, hasKinds: true,
		kindProblems: []kindProblem{{kind: "Gadget.example.com", reason: ReasonKindNotFound, message: "Gadget.example.com is not served by the API server (is its CRD installed?)"}},
		workloads:    []*workload{{kind: "Deployment", obj: d, targeted: true, ready: true, gitOps: powerv1alpha1.GitOpsFlux}}}
	st := computeStatus(s, obs)
	k := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionKindsAvailable)
	if k == nil || k.Status != metav1.ConditionFalse || k.Reason != ReasonKindNotFound || k.Message != "Gadget.example.com is not served by the API server (is its CRD installed?)" {
		t.Errorf("KindsAvailable = %+v", k)
	}
	gc := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionGitOpsManaged)
	if gc == nil || gc.Status != metav1.ConditionTrue || st.GitOpsManagedCount != 1 ||
		len(st.GitOpsManaged) != 1 || st.GitOpsManaged[0] != (powerv1alpha1.GitOpsWorkload{Tool: powerv1alpha1.GitOpsFlux, Workload: "Deployment dev/web"}) {
		t.Errorf("GitOpsManaged = %+v, %+v", gc, st.GitOpsManaged)
	}
	// A kind that is not served has no objects to sleep: Ready says so, and stays True.
	if r := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionTrue ||
		!strings.HasSuffix(r.Message, "; not served, so nothing of them to sleep (see KindsAvailable): Gadget.example.com") {
		t.Errorf("a missing kind made Ready %+v", r)
	}
	// A kind that is served and cannot sleep makes Ready False, naming it and why
	// (issue 42).
	obs.kindProblems = append(obs.kindProblems, kindProblem{kind: "Notebook.kubeflow.org", reason: ReasonNoScaleSubresource,
		message: "Notebook.kubeflow.org has no scale subresource: declare a patch for it"})
	st = computeStatus(s, obs)
	if r := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionReady); r == nil || r.Status != metav1.ConditionFalse || r.Reason != ReasonNoScaleSubresource ||
		!strings.HasPrefix(r.Message, "Notebook.kubeflow.org of targets.kinds cannot sleep: Notebook.kubeflow.org has no scale subresource: declare a patch for it. Awake") {
		t.Errorf("a kind that cannot sleep left Ready %+v", r)
	}
	obs.kindProblems = obs.kindProblems[:1]

	// Without kinds, the condition goes; without GitOps marks, GitOpsManaged is False.
	s.Status = st
	s.Spec.Targets.Kinds = nil
	obs.hasKinds, obs.kindProblems = false, nil
	obs.workloads[0].gitOps = ""
	st = computeStatus(s, obs)
	if meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionKindsAvailable) != nil {
		t.Error("KindsAvailable kept without kinds")
	}
	if gc := meta.FindStatusCondition(st.Conditions, powerv1alpha1.ConditionGitOpsManaged); gc.Status != metav1.ConditionFalse || st.GitOpsManaged != nil || st.GitOpsManagedCount != 0 {
		t.Errorf("GitOpsManaged = %+v, %+v", gc, st.GitOpsManaged)
	}
}
