//go:build integration

// Package labelpolicytest is what the LabelPolicy integration suites share: the one
// table of what filling labels in at admission does, run through both paths (the
// native MutatingAdmissionPolicy in the controller's suite, Orderly's webhook in the
// webhook's suite) so that the two cannot drift, and a look at the metrics.
//
// It must not import the controller's package, whose own tests import it.
package labelpolicytest

import (
	"context"
	"maps"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// Path is one way labels are filled in, as a suite runs it.
type Path struct {
	// Client goes straight to the suite's API server.
	Client        client.Client
	Timeout, Poll time.Duration
	// Enforced checks, on the latest version of a policy that fills labels in, what
	// says that this path does it (status, generated objects).
	Enforced func(g gomega.Gomega, p *policyv1alpha1.LabelPolicy)
}

// Case is one policy and the requests made under it.
type Case struct {
	// ID names the policy and prefixes its namespaces.
	ID   string
	Name string
	Spec policyv1alpha1.LabelPolicySpec
	// Namespaces are created with these labels (and the one that selects them), named
	// ID-key.
	Namespaces map[string]map[string]string
	// Before are created before the policy, so its admission never saw them.
	Before []Workload
	// Steps run in order once the policy is enforced; the first must create.
	Steps []Step
	// Probes are the steps whose outcome shows that the policy is enforced, each
	// waited for in turn; the first step when empty. The validating and mutating
	// policies load independently: a case whose steps need both probes both.
	Probes []int
}

// Workload is an object in one of a case's namespaces.
type Workload struct {
	// Namespace is a key of Case.Namespaces.
	Namespace string
	Object    func(namespace string) client.Object
}

// Step is one request and what must come of it.
type Step struct {
	Name string
	Workload
	// Update, when set, changes the existing object that Object names (one of Before)
	// and updates it; otherwise Object is created.
	Update func(client.Object)
	// WantLabel is the policy's label on the admitted object, "" for none.
	WantLabel string
	// WantTemplateLabel is the policy's label on a Deployment's pod template, "" for none.
	WantTemplateLabel string
	// WantErr, when set, are in the message of the request's rejection.
	WantErr []string
}

// Cases are the admission cases every mutation path must pass.
var Cases = []Case{
	{
		ID:   "mut-fill",
		Name: "fills the label in from the namespace, else defaultValue, and propagates it to pod templates",
		Spec: policyv1alpha1.LabelPolicySpec{Label: "cc-fill", Action: policyv1alpha1.ActionDefault, DefaultValue: "shared", PropagateToPodTemplate: true},
		Namespaces: map[string]map[string]string{
			"ns":    {"cc-fill": "from-ns"},
			"plain": nil,
		},
		Before: []Workload{{"plain", legacy}},
		Steps: []Step{
			{Name: "a workload gets its namespace's value, on its pod template too", Workload: Workload{"ns", deploymentNamed("web", nil)},
				WantLabel: "from-ns", WantTemplateLabel: "from-ns"},
			{Name: "in a namespace without the label, defaultValue", Workload: Workload{"plain", deploymentNamed("web", nil)},
				WantLabel: "shared", WantTemplateLabel: "shared"},
			{Name: "a label that is set is kept, and propagated", Workload: Workload{"plain", deploymentNamed("own", map[string]string{"cc-fill": "mine"})},
				WantLabel: "mine", WantTemplateLabel: "mine"},
			{Name: "a bare pod is labelled", Workload: Workload{"plain", podNamed("bare")},
				WantLabel: "shared"},
			{Name: "a ReplicaSet's pod is left alone", Workload: Workload{"plain", podNamed("owned",
				metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "00000000-0000-0000-0000-000000000001", Controller: ptr.To(true)})}},
			{Name: "a pod some other object owns is labelled like a bare pod", Workload: Workload{"plain", podNamed("dressed",
				metav1.OwnerReference{APIVersion: "v1", Kind: "ConfigMap", Name: "mine", UID: "00000000-0000-0000-0000-000000000002", Controller: ptr.To(true)},
				metav1.OwnerReference{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "rs", UID: "00000000-0000-0000-0000-000000000001"})},
				WantLabel: "shared"},
			// Labelling the template on its own would roll the workload out.
			{Name: "an update that leaves the pod template alone does not label it", Workload: Workload{"plain", legacy},
				Update:    func(o client.Object) { o.(*appsv1.Deployment).Spec.Replicas = ptr.To(int32(3)) },
				WantLabel: "shared"},
			{Name: "an update that changes the pod template labels it", Workload: Workload{"plain", legacy},
				Update: func(o client.Object) {
					o.(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Image = "registry.example/app:2"
				},
				WantLabel: "shared", WantTemplateLabel: "shared"},
		},
	},
	{
		ID:         "mut-none",
		Name:       "with nothing to fill in, the validating policy rejects and says how to fix it",
		Spec:       policyv1alpha1.LabelPolicySpec{Label: "cc-none", Action: policyv1alpha1.ActionDefault, AllowedPattern: "cc-[0-9]+"},
		Namespaces: map[string]map[string]string{"ns": nil},
		Steps: []Step{
			{Name: "no value anywhere", Workload: Workload{"ns", deploymentNamed("web", nil)},
				WantErr: []string{"has no label cc-none", "label the namespace with cc-none="}},
			{Name: "an allowed value is admitted as it is", Workload: Workload{"ns", deploymentNamed("ok", map[string]string{"cc-none": "cc-42"})},
				WantLabel: "cc-42"},
		},
	},
	{
		ID:   "mut-except",
		Name: "an active exception admits a workload the policy would refuse, and what can be filled in still is",
		Spec: policyv1alpha1.LabelPolicySpec{Label: "cc-exc", Action: policyv1alpha1.ActionDefault, AllowedPattern: "cc-[0-9]+",
			Exceptions: []policyv1alpha1.LabelPolicyException{
				{Name: "legacy-apps", Namespaces: []string{"mut-except-legacy", "mut-except-filled"}, Reason: "being migrated", Expires: metav1.NewTime(time.Now().Add(24 * time.Hour))},
				{Name: "batch", Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "batch"}}, Reason: "batch jobs are billed centrally", Expires: metav1.NewTime(time.Now().Add(24 * time.Hour))},
			}},
		Namespaces: map[string]map[string]string{"ns": nil, "legacy": nil, "filled": {"cc-exc": "cc-7"}},
		// The refusal shows the validating policy, the filled-in label the mutating one.
		Probes: []int{0, 2},
		Steps: []Step{
			{Name: "outside every exception, refused", Workload: Workload{"ns", deploymentNamed("web", nil)},
				WantErr: []string{"has no label cc-exc"}},
			{Name: "in an excepted namespace, admitted without the label", Workload: Workload{"legacy", deploymentNamed("web", nil)}},
			{Name: "in an excepted namespace with a label to fill in, filled in", Workload: Workload{"filled", deploymentNamed("web", nil)},
				WantLabel: "cc-7"},
			{Name: "a workload the selector excepts, admitted", Workload: Workload{"ns", deploymentNamed("batch", map[string]string{"tier": "batch"})}},
		},
	},
}

// legacy is a workload that predates the policy.
var legacy = deploymentNamed("legacy", map[string]string{"cc-fill": "shared"})

// Run runs every case through path, each as a subtest.
func Run(t *testing.T, path Path) {
	for _, tc := range Cases {
		t.Run(tc.Name, func(t *testing.T) { run(t, path, tc) })
	}
}

func run(t *testing.T, path Path, tc Case) {
	g := gomega.NewWithT(t)
	ctx, c := context.Background(), path.Client
	ns := func(key string) string { return tc.ID + "-" + key }
	for key, lbls := range tc.Namespaces {
		lbls = maps.Clone(lbls)
		if lbls == nil {
			lbls = map[string]string{}
		}
		lbls["test"] = tc.ID
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(key), Labels: lbls}})).To(gomega.Succeed())
	}
	for _, w := range tc.Before {
		g.Expect(c.Create(ctx, w.Object(ns(w.Namespace)))).To(gomega.Succeed())
	}
	p := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: tc.ID}, Spec: *tc.Spec.DeepCopy()}
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"test": tc.ID}}
	g.Expect(c.Create(ctx, p)).To(gomega.Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })

	// Wait until the API server enforces the policy: until a probe like the first
	// step's object fares as that step says.
	probes := tc.Probes
	if len(probes) == 0 {
		probes = []int{0}
	}
	for _, i := range probes {
		first := tc.Steps[i]
		g.Eventually(func(g gomega.Gomega) {
			probe := first.Object(ns(first.Namespace))
			probe.SetGenerateName(probe.GetName() + "-probe-")
			probe.SetName("")
			sent := probe.DeepCopyObject().(client.Object)
			err := c.Create(ctx, probe)
			if err == nil {
				_ = c.Delete(ctx, probe)
			}
			check(g, tc.Spec.Label, first, sent, probe, err)
		}, path.Timeout, path.Poll).Should(gomega.Succeed(), "the policy was never enforced as step %q says", first.Name)
	}

	for _, s := range tc.Steps {
		obj := s.Object(ns(s.Namespace))
		var err error
		if s.Update != nil {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(gomega.Succeed())
			s.Update(obj)
		}
		sent := obj.DeepCopyObject().(client.Object)
		if s.Update != nil {
			err = c.Update(ctx, obj)
		} else {
			err = c.Create(ctx, obj)
		}
		t.Run(s.Name, func(t *testing.T) { check(gomega.NewWithT(t), tc.Spec.Label, s, sent, obj, err) })
	}

	g.Eventually(func(g gomega.Gomega) {
		var latest policyv1alpha1.LabelPolicy
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(p), &latest)).To(gomega.Succeed())
		g.Expect(latest.Status.ObservedGeneration).To(gomega.Equal(latest.Generation))
		path.Enforced(g, &latest)
	}, path.Timeout, path.Poll).Should(gomega.Succeed())
}

// check holds what came of one request (sent, answered with got and err) to what s
// wants. Whatever labels the request carried are always kept.
func check(g gomega.Gomega, label string, s Step, sent, got client.Object, err error) {
	if len(s.WantErr) > 0 {
		g.Expect(err).To(gomega.HaveOccurred(), "the request was admitted")
		for _, want := range s.WantErr {
			g.Expect(err.Error()).To(gomega.ContainSubstring(want))
		}
		return
	}
	g.Expect(err).NotTo(gomega.HaveOccurred())
	sentOwn, sentTmpl := labelsOf(sent)
	own, tmpl := labelsOf(got)
	for k, v := range sentOwn {
		g.Expect(own).To(gomega.HaveKeyWithValue(k, v), "a label the request set was changed")
	}
	for k, v := range sentTmpl {
		g.Expect(tmpl).To(gomega.HaveKeyWithValue(k, v), "a pod template label the request set was changed")
	}
	if s.WantLabel == "" {
		g.Expect(own).NotTo(gomega.HaveKey(label))
	} else {
		g.Expect(own).To(gomega.HaveKeyWithValue(label, s.WantLabel))
	}
	if _, isDeployment := got.(*appsv1.Deployment); !isDeployment {
		return
	}
	if s.WantTemplateLabel == "" {
		g.Expect(tmpl).NotTo(gomega.HaveKey(label))
	} else {
		g.Expect(tmpl).To(gomega.HaveKeyWithValue(label, s.WantTemplateLabel))
	}
}

// labelsOf returns an object's labels and, for a Deployment, its pod template's.
func labelsOf(o client.Object) (own, template map[string]string) {
	if d, ok := o.(*appsv1.Deployment); ok {
		return d.Labels, d.Spec.Template.Labels
	}
	return o.GetLabels(), nil
}

func deploymentNamed(name string, lbls map[string]string) func(string) client.Object {
	return func(ns string) client.Object {
		sel := map[string]string{"app": name}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: maps.Clone(lbls)},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: maps.Clone(sel)},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
				},
			},
		}
	}
}

// podNamed is a pod with the given ownerReferences (a bare pod without).
func podNamed(name string, owners ...metav1.OwnerReference) func(string) client.Object {
	return func(ns string) client.Object {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: owners},
			Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:1"}}},
		}
	}
}

// SeriesOf counts the series of metric in controller-runtime's registry (which the
// managers of a suite share with the test) whose label has value.
func SeriesOf(g gomega.Gomega, metric, label, value string) int {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(gomega.HaveOccurred())
	n := 0
	for _, f := range families {
		if f.GetName() != metric {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					n++
				}
			}
		}
	}
	return n
}
