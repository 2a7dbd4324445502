package labelpolicy

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// A Pod is judged through its controller, and not on its own, only when that
// controller is of a kind the policy trusts to create pods: the built-in workload
// controllers, and the kinds the platform lists in spec.match.podOwners. Everything
// else (no ownerReferences, references that are not controllers, a controller of any
// other kind) is judged as a bare Pod. Anyone who may create a Pod may write any
// ownerReferences on it, so the reference alone proves nothing; what makes the rule
// hold is that a reference with controller: true to an object that does not exist
// (or exists with another UID) gets the Pod deleted by the garbage collector, which
// resolves only the apiVersions its API server serves: trusted references are
// therefore matched by exact apiVersion and kind, never by group alone.
//
// The rule exists three times, tested against each other: the match condition of
// every generated admission object (ownerExemptExpr), its Go twin for Orderly's
// webhook and the audit (judgedThroughOwner), and the audit's own check that a
// trusted controller really vouches for the Pod (vouches, audit.go).

// builtinPodOwners are the built-in controllers that create Pods.
var builtinPodOwners = []policyv1alpha1.PodOwner{
	{APIVersion: "apps/v1", Kind: "ReplicaSet"},
	{APIVersion: "apps/v1", Kind: "StatefulSet"},
	{APIVersion: "apps/v1", Kind: "DaemonSet"},
	{APIVersion: "batch/v1", Kind: "Job"},
	{APIVersion: "v1", Kind: "ReplicationController"},
}

// podOwners are the kinds whose Pods the policy judges through them: the built-in
// controllers and spec.match.podOwners, without duplicates, by apiVersion and kind.
func podOwners(p *policyv1alpha1.LabelPolicy) []policyv1alpha1.PodOwner {
	out := slices.Concat(builtinPodOwners, p.Spec.Match.PodOwners)
	cmp := func(a, b policyv1alpha1.PodOwner) int {
		return strings.Compare(a.APIVersion+" "+a.Kind, b.APIVersion+" "+b.Kind)
	}
	slices.SortFunc(out, cmp)
	return slices.CompactFunc(out, func(a, b policyv1alpha1.PodOwner) bool { return cmp(a, b) == 0 })
}

// ownerRef is what the rule reads of one ownerReference.
type ownerRef struct {
	apiVersion, kind string
	controller       bool
}

// ownerRefs reads refs.
func ownerRefs(refs []metav1.OwnerReference) []ownerRef {
	out := make([]ownerRef, 0, len(refs))
	for _, r := range refs {
		out = append(out, ownerRef{apiVersion: r.APIVersion, kind: r.Kind, controller: r.Controller != nil && *r.Controller})
	}
	return out
}

// ownerRefsOf reads the ownerReferences of an object decoded from JSON (the webhook's
// request).
func ownerRefsOf(obj map[string]any) []ownerRef {
	var out []ownerRef
	for _, item := range getSlice(obj, "metadata", "ownerReferences") {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		r := ownerRef{}
		r.apiVersion, _ = m["apiVersion"].(string)
		r.kind, _ = m["kind"].(string)
		r.controller, _ = m["controller"].(bool)
		out = append(out, r)
	}
	return out
}

// trustedController is the index in refs of the reference that makes the Pod exempt:
// a controller reference of a kind in podOwners(p); -1 when the Pod is judged as a
// bare Pod.
func trustedController(p *policyv1alpha1.LabelPolicy, refs []ownerRef) int {
	owners := podOwners(p)
	return slices.IndexFunc(refs, func(r ownerRef) bool {
		return r.controller && slices.ContainsFunc(owners, func(o policyv1alpha1.PodOwner) bool {
			return r.apiVersion == o.APIVersion && r.kind == o.Kind
		})
	})
}

// judgedThroughOwner is the Go twin of ownerExemptExpr: true when a Pod with refs is
// left to its controller.
func judgedThroughOwner(p *policyv1alpha1.LabelPolicy, refs []ownerRef) bool {
	return trustedController(p, refs) >= 0
}

// ownerExemptExpr is a CEL expression, over obj (object in admission), that is true
// when obj has a controller reference of a kind in podOwners(p).
func ownerExemptExpr(p *policyv1alpha1.LabelPolicy, obj string) string {
	byVersion := map[string][]string{}
	var versions []string
	for _, o := range podOwners(p) {
		if _, ok := byVersion[o.APIVersion]; !ok {
			versions = append(versions, o.APIVersion)
		}
		byVersion[o.APIVersion] = append(byVersion[o.APIVersion], celString(o.Kind))
	}
	alts := make([]string, 0, len(versions))
	for _, v := range versions {
		alts = append(alts, fmt.Sprintf("(r.apiVersion == %s && r.kind in [%s])", celString(v), strings.Join(byVersion[v], ", ")))
	}
	return fmt.Sprintf("has(%[1]s.metadata.ownerReferences) && %[1]s.metadata.ownerReferences.exists(r, has(r.controller) && r.controller == true && (%[2]s))",
		obj, strings.Join(alts, " || "))
}

// podsMatchCondition keeps out of the policy the Pods that a trusted controller
// created (judged through it, so that the policy never stops a ReplicaSet, Job or
// listed operator from creating its pods), and only those.
func podsMatchCondition(p *policyv1alpha1.LabelPolicy) admissionv1.MatchCondition {
	return admissionv1.MatchCondition{
		Name:       "pods-without-trusted-controller",
		Expression: fmt.Sprintf("request.kind.kind != 'Pod' || !(%s)", ownerExemptExpr(p, "object")),
	}
}

// trustedControllerRef is trustedController on a Pod's ownerReferences: the one that
// makes it exempt, nil when there is none.
func trustedControllerRef(p *policyv1alpha1.LabelPolicy, refs []metav1.OwnerReference) *metav1.OwnerReference {
	if i := trustedController(p, ownerRefs(refs)); i >= 0 {
		return &refs[i]
	}
	return nil
}

// maxOwnerLookups bounds the controllers one audit reads to tell whether they vouch
// for their violating pods: a cluster whose pod templates lack the label has one per
// workload, and the audit must stay cheap there. Controllers beyond it are trusted
// unread until the next audit.
const maxOwnerLookups = 500

// ownerFacts is what the audit read of a pod's controller.
type ownerFacts struct {
	// found: the controller exists, with uid.
	found bool
	uid   types.UID
	// template is the value of the policy's label on the controller's pod
	// template, "" when it has none.
	template string
	// unknown: the controller could not be read (not a built-in kind, an error, or
	// the lookups were used up); it is trusted.
	unknown bool
}

// vouches says whether a pod's controller, as read, stands behind the pod: it exists
// with the UID the pod's reference names, and its pod template gives the label the
// pod's value (a pod is made from its controller's template, so a pod that differs
// from it was not made by it, or was changed by hand). Pure.
func vouches(facts ownerFacts, ref metav1.OwnerReference, podValue string) bool {
	if facts.unknown {
		return true
	}
	return facts.found && facts.uid == ref.UID && facts.template == podValue
}

// ownerChecker reads, once per audit and controller, the controllers of pods that
// violate the policy although a trusted controller exempts them. Only the built-in
// kinds are read (the manager may get them); the pods of podOwners kinds are trusted.
type ownerChecker struct {
	reader  client.Reader
	label   string
	lookups int
	seen    map[types.UID]ownerFacts
}

func newOwnerChecker(reader client.Reader, label string) *ownerChecker {
	return &ownerChecker{reader: reader, label: label, seen: map[types.UID]ownerFacts{}}
}

// vouchFor says whether the controller ref of pod vouches for it.
func (c *ownerChecker) vouchFor(ctx context.Context, pod *metav1.PartialObjectMetadata, ref metav1.OwnerReference) bool {
	facts, ok := c.seen[ref.UID]
	if !ok {
		facts = c.read(ctx, pod.Namespace, ref)
		c.seen[ref.UID] = facts
	}
	return vouches(facts, ref, pod.Labels[c.label])
}

func (c *ownerChecker) read(ctx context.Context, namespace string, ref metav1.OwnerReference) ownerFacts {
	if !slices.Contains(builtinPodOwners, policyv1alpha1.PodOwner{APIVersion: ref.APIVersion, Kind: ref.Kind}) || c.lookups >= maxOwnerLookups {
		return ownerFacts{unknown: true}
	}
	c.lookups++
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.FromAPIVersionAndKind(ref.APIVersion, ref.Kind))
	err := c.reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: ref.Name}, u)
	switch {
	case apierrors.IsNotFound(err):
		return ownerFacts{}
	case err != nil:
		log.FromContext(ctx).V(1).Info("Reading a pod's controller for the LabelPolicy audit", "kind", ref.Kind, "namespace", namespace, "name", ref.Name, "error", err.Error())
		return ownerFacts{unknown: true}
	}
	value, _, _ := unstructured.NestedString(u.Object, "spec", "template", "metadata", "labels", c.label)
	return ownerFacts{found: true, uid: u.GetUID(), template: value}
}
