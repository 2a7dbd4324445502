package labelpolicy

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/gitops"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// maxTopViolations bounds status.topViolations.
const maxTopViolations = 20

// maxRecentlyRemediated bounds status.recentlyRemediated, and the workloads one audit
// remembers having labelled: an audit that labels thousands holds 20 names.
const maxRecentlyRemediated = 20

// auditPageSize is the page size of workload lists: metadata only, so a page is small.
const auditPageSize = 500

// auditResult is what one audit found.
type auditResult struct {
	violations int32
	remediated int32
	// remediatedGitOps counts the labelled workloads a GitOps tool manages.
	remediatedGitOps int32
	top              []policyv1alpha1.Violation
	byNamespace      map[string]int
	// workloads counts the matched workloads; namespaces tallies them and their
	// violations per namespace, and tenants names each namespace's tenant. One entry
	// per namespace, never per workload.
	workloads  int32
	namespaces map[string]tally
	tenants    map[string]string
	// retainedPeak is the most violations the audit held at once: at most
	// maxTopViolations, however many it found.
	retainedPeak int
	// labelled names the first maxRecentlyRemediated workloads the audit labelled
	// (Time unset: the status stamps the audit's time).
	labelled []policyv1alpha1.RemediatedWorkload
	// excepted counts the violating workloads an active exception admitted, in all
	// and per exception.
	excepted     int32
	exceptedByEx map[string]int32
	// drift lists the matched namespaces whose cost-center label is missing or differs
	// from their Tenant's costCenter (defaultFromTenant), the first maxTenantDrift by
	// name, and driftCount counts them all.
	drift      []policyv1alpha1.TenantDrift
	driftCount int32
	// tenantsRead is true when the audit compared namespaces with Tenants.
	tenantsRead bool
	// remediationErrors counts workloads whose label could not be written;
	// remediationConflicts those of them that changed between the list and the
	// write (a controller's status update): worth another audit soon.
	remediationErrors    int
	remediationConflicts int
	firstRemediationErr  error
	// ownerLookups counts the controllers of violating pods the audit read to tell
	// whether they vouch for their pods (at most maxOwnerLookups).
	ownerLookups int
}

// workload is the part of a workload the audit reads.
type workload struct {
	kind, namespace, name string
	labels                map[string]string
}

// verdict says whether a workload violates p and, when remediation applies, which
// value to write. Pure, so it is unit tested.
func verdict(p *policyv1alpha1.LabelPolicy, re *regexp.Regexp, w workload, nsLabels map[string]string) (violation *policyv1alpha1.Violation, fix string) {
	return verdictWith(p, re, nil, w, nsLabels)
}

// verdictWith is verdict with the values of the policy's LabelValueSet (vs, nil
// without allowedValuesFrom): a retired value is reported as Retired.
func verdictWith(p *policyv1alpha1.LabelPolicy, re *regexp.Regexp, vs *valueSet, w workload, nsLabels map[string]string) (violation *policyv1alpha1.Violation, fix string) {
	return verdictFrom(p, re, vs, w, nsLabels, "")
}

// verdictFrom is verdictWith with the costCenter of the namespace's Tenant (""
// without defaultFromTenant or Tenant), which remediation tries first.
func verdictFrom(p *policyv1alpha1.LabelPolicy, re *regexp.Regexp, vs *valueSet, w workload, nsLabels map[string]string, tenantCC string) (violation *policyv1alpha1.Violation, fix string) {
	v := w.labels[p.Spec.Label]
	if allowedWith(p, re, vs, v) {
		return nil, ""
	}
	out := &policyv1alpha1.Violation{Kind: w.kind, Namespace: w.namespace, Name: w.name, Reason: policyv1alpha1.ViolationMissing}
	if v != "" {
		out.Reason, out.Value = policyv1alpha1.ViolationNotAllowed, v
		if vs.retired(v) {
			out.Reason = policyv1alpha1.ViolationRetired
		}
		// A value someone chose is reported, never overwritten.
		return out, ""
	}
	if p.Spec.Remediate != policyv1alpha1.RemediateLabelOnly {
		return out, ""
	}
	for _, candidate := range []string{tenantCC, nsLabels[p.Spec.Label], p.Spec.DefaultValue} {
		if allowedWith(p, re, vs, candidate) {
			return out, candidate
		}
	}
	return out, ""
}

// namespaceFilter says which namespaces a policy applies to: never a protected one
// (Protected), whatever its match says.
func namespaceFilter(p *policyv1alpha1.LabelPolicy, managerNS string) (func(ns *corev1.Namespace) bool, error) {
	sel := k8slabels.Everything()
	if p.Spec.Match.NamespaceSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(p.Spec.Match.NamespaceSelector)
		if err != nil {
			return nil, fmt.Errorf("spec.match.namespaceSelector: %w", err)
		}
		sel = s
	}
	excluded := excludedNamespaces(p, managerNS)
	return func(ns *corev1.Namespace) bool {
		return !kit.ProtectedNamespace(ns.Name, managerNS) && !slices.Contains(excluded, ns.Name) && sel.Matches(k8slabels.Set(ns.Labels))
	}, nil
}

// audit lists every matched workload (metadata only, page by page), counts the
// violations and, with remediate LabelOnly, labels the workloads' metadata. p carries
// the exceptions active now only (withActiveExceptions). tenants are the Tenants'
// cost centers with defaultFromTenant (nil without): remediation fills them in first,
// and the namespaces whose label drifted from them are reported.
func (r *Reconciler) audit(ctx context.Context, p *policyv1alpha1.LabelPolicy, re *regexp.Regexp, vs *valueSet, tenants map[string]TenantDefault) (*auditResult, error) {
	inScope, err := namespaceFilter(p, r.Namespace)
	if err != nil {
		return nil, err
	}
	// Namespaces are read live, like the workloads: a namespace created a moment ago
	// may not be in a cache yet, and its workloads would be missed.
	var nsList corev1.NamespaceList
	if err := r.APIReader.List(ctx, &nsList); err != nil {
		return nil, fmt.Errorf("listing namespaces: %w", err)
	}
	nsLabels := map[string]map[string]string{}
	tenantCC := map[string]string{}
	res := &auditResult{byNamespace: map[string]int{}, exceptedByEx: map[string]int32{}, namespaces: map[string]tally{}, tenants: map[string]string{}}
	var drift []policyv1alpha1.TenantDrift
	for i := range nsList.Items {
		ns := &nsList.Items[i]
		if !inScope(ns) {
			continue
		}
		nsLabels[ns.Name] = ns.Labels
		res.tenants[ns.Name] = tenantOf(ns.Labels)
		if tenants == nil {
			continue
		}
		tenantCC[ns.Name] = tenantCostCenter(ns.Labels, ns.Annotations, tenants)
		if d := driftOf(ns, tenants); d != nil {
			drift = append(drift, *d)
		}
	}
	res.drift, res.driftCount, res.tenantsRead = firstDrift(drift), int32(len(drift)), tenants != nil
	top := newTopViolations()
	owners := newOwnerChecker(r.APIReader, p.Spec.Label)
	for _, k := range matchKinds(p) {
		info := kinds[k]
		gvk := schema.GroupVersionKind{Group: info.group, Version: info.version, Kind: string(k) + "List"}
		cont := ""
		for {
			list := &metav1.PartialObjectMetadataList{}
			list.SetGroupVersionKind(gvk)
			if err := r.APIReader.List(ctx, list, client.Limit(auditPageSize), client.Continue(cont)); err != nil {
				return nil, fmt.Errorf("listing %ss: %w", k, err)
			}
			for i := range list.Items {
				item := &list.Items[i]
				nl, ok := nsLabels[item.Namespace]
				if !ok {
					continue
				}
				w := workload{kind: string(k), namespace: item.Namespace, name: item.Name, labels: item.Labels}
				if k == policyv1alpha1.KindPod {
					// A trusted controller's pod is judged through its controller, unless
					// it violates the policy and the controller does not vouch for it:
					// then it is judged as the bare pod it is.
					if ref := trustedControllerRef(p, item.OwnerReferences); ref != nil {
						if v, _ := verdictFrom(p, re, vs, w, nl, ""); v == nil || owners.vouchFor(ctx, item, *ref) {
							continue
						}
					}
				}
				res.workloads++
				t := res.namespaces[item.Namespace]
				t.workloads++
				res.namespaces[item.Namespace] = t
				v, fix := verdictFrom(p, re, vs, w, nl, tenantCC[item.Namespace])
				if v == nil {
					continue
				}
				// An excepted workload is neither a violation nor labelled: the
				// exception says it may go without the label for now.
				if ex := exceptedBy(p, w); ex != "" {
					res.excepted++
					res.exceptedByEx[ex]++
					continue
				}
				if fix != "" {
					if err := r.labelMetadata(ctx, item, gvk, p.Spec.Label, fix); err != nil {
						res.remediationErrors++
						if apierrors.IsConflict(err) {
							res.remediationConflicts++
						}
						if res.firstRemediationErr == nil {
							res.firstRemediationErr = err
						}
					} else {
						res.remediated++
						tool := policyv1alpha1.GitOpsTool(gitops.ToolOf(item))
						if tool != "" {
							res.remediatedGitOps++
						}
						if len(res.labelled) < maxRecentlyRemediated {
							res.labelled = append(res.labelled, policyv1alpha1.RemediatedWorkload{Kind: w.kind, Namespace: w.namespace, Name: w.name, Value: fix, GitOps: tool})
						}
						continue
					}
				}
				res.violations++
				res.byNamespace[item.Namespace]++
				t = res.namespaces[item.Namespace]
				t.violations++
				res.namespaces[item.Namespace] = t
				top.add(*v)
			}
			cont = list.Continue
			if cont == "" {
				break
			}
		}
	}
	res.top, res.retainedPeak = top.sorted(), top.peak
	res.ownerLookups = owners.lookups
	if res.remediationErrors > 0 {
		log.FromContext(ctx).Error(res.firstRemediationErr, "Labelling workloads for LabelPolicy", "labelpolicy", p.Name, "failed", res.remediationErrors)
	}
	return res, nil
}

// violationOrder sorts violations by namespace, kind and name, the order of
// status.topViolations.
func violationOrder(a, b policyv1alpha1.Violation) int {
	return cmp.Or(cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Name, b.Name))
}

// topViolations keeps the first maxTopViolations violations in violationOrder while an
// audit streams through the pages of every kind, so that an audit holds those, not
// every violation of a cluster with thousands of unlabelled workloads. They are few
// (20): a sorted slice with a binary search is all it takes.
type topViolations struct {
	kept []policyv1alpha1.Violation
	// peak is the most violations held at once, which tests check stays within
	// maxTopViolations.
	peak int
}

func newTopViolations() *topViolations {
	return &topViolations{kept: make([]policyv1alpha1.Violation, 0, maxTopViolations)}
}

// add offers v; it is kept when fewer than maxTopViolations are kept or it sorts
// before the last one, which then goes.
func (t *topViolations) add(v policyv1alpha1.Violation) {
	const n = maxTopViolations
	if len(t.kept) == n && violationOrder(v, t.kept[n-1]) >= 0 {
		return
	}
	if len(t.kept) == n {
		t.kept = t.kept[:n-1]
	}
	i, _ := slices.BinarySearchFunc(t.kept, v, violationOrder)
	t.kept = slices.Insert(t.kept, i, v)
	t.peak = max(t.peak, len(t.kept))
}

// sorted returns the kept violations in violationOrder; nil when there are none.
func (t *topViolations) sorted() []policyv1alpha1.Violation {
	if len(t.kept) == 0 {
		return nil
	}
	return slices.Clone(t.kept)
}

// labelMetadata adds one label to a workload's metadata with a merge patch that
// touches nothing else: a pod template is never changed, so no rollout starts.
func (r *Reconciler) labelMetadata(ctx context.Context, item *metav1.PartialObjectMetadata, listGVK schema.GroupVersionKind, key, value string) error {
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{
		"labels": map[string]string{key: value},
		// The resourceVersion makes the patch fail instead of racing a concurrent change.
		"resourceVersion": item.ResourceVersion,
	}})
	if err != nil {
		return err
	}
	obj := item.DeepCopy()
	obj.SetGroupVersionKind(listGVK.GroupVersion().WithKind(listGVK.Kind[:len(listGVK.Kind)-len("List")]))
	if err := r.Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(labels.FieldManager)); err != nil {
		return fmt.Errorf("labelling %s %s/%s: %w", obj.GetObjectKind().GroupVersionKind().Kind, item.Namespace, item.Name, err)
	}
	return nil
}
