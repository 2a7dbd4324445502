package devcluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

const pollInterval = 500 * time.Millisecond

// poll calls check until it reports done, the timeout passes or ctx ends; on timeout
// the error carries the last state check observed, which is what a person needs.
func poll(ctx context.Context, timeout time.Duration, what string, check func(context.Context) (done bool, state string, err error)) error {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var last string
	for {
		done, state, err := check(pctx)
		switch {
		case err != nil:
			last = err.Error()
		case done:
			return nil
		default:
			last = state
		}
		select {
		case <-pctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("timed out after %s waiting for %s: %s", timeout, what, last)
		case <-time.After(pollInterval):
		}
	}
}

func apiServerReady(ctx context.Context, cfg *rest.Config) error {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	body, err := cs.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return err
	}
	if strings.TrimSpace(string(body)) != "ok" {
		return fmt.Errorf("/readyz: %s", strings.TrimSpace(string(body)))
	}
	return nil
}

func waitAPIServerReady(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	return poll(ctx, timeout, "the API server's /readyz", func(ctx context.Context) (bool, string, error) {
		err := apiServerReady(ctx, cfg)
		return err == nil, "", err
	})
}

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

func waitCRDsEstablished(ctx context.Context, cfg *rest.Config, names []string, timeout time.Duration) error {
	if len(names) == 0 {
		return nil
	}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	return poll(ctx, timeout, "CustomResourceDefinitions to be Established", func(ctx context.Context) (bool, string, error) {
		var pending []string
		for _, n := range names {
			crd, err := dc.Resource(crdResource).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, "", err
			}
			if !crdEstablished(crd) {
				pending = append(pending, n)
			}
		}
		return len(pending) == 0, "not Established yet: " + strings.Join(pending, ", "), nil
	})
}

func crdEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}

// waitClusterSettled waits until there are at least nodes Ready nodes, none of them
// not Ready, the default ServiceAccount exists (Pods cannot be created in the
// default namespace before it does) and admission policies are configured; it
// returns a summary of the cluster.
func waitClusterSettled(ctx context.Context, cfg *rest.Config, nodes int, timeout time.Duration) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	err = poll(ctx, timeout, fmt.Sprintf("%d Ready nodes", nodes), func(ctx context.Context) (bool, string, error) {
		list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, "", err
		}
		ready := countReady(list.Items)
		return ready >= nodes && ready == len(list.Items),
			fmt.Sprintf("%d of %d nodes Ready", ready, len(list.Items)), nil
	})
	if err != nil {
		return "", err
	}
	err = poll(ctx, timeout, "the default ServiceAccount", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().ServiceAccounts(metav1.NamespaceDefault).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, "", err
	})
	if err != nil {
		return "", err
	}
	if err := waitAdmissionConfigured(ctx, cs, timeout); err != nil {
		return "", err
	}
	return describe(ctx, cfg)
}

// waitAdmissionConfigured waits until a Namespace can be created as far as admission
// is concerned (a server-side dry run). A restarted API server refuses every request
// that a ValidatingAdmissionPolicy with a custom paramKind matches ("failed to
// configure policy: failed to find resource referenced by paramKind") until its
// admission plugin has discovered the CRD again, some seconds after /readyz; a policy
// Orderly's manager left in the cluster (the Tenant self-service one matches every
// Namespace) would otherwise fail whatever comes next. Any other refusal counts as
// configured: it is a policy's decision, not the plugin's state.
func waitAdmissionConfigured(ctx context.Context, cs kubernetes.Interface, timeout time.Duration) error {
	probe := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "orderly-dev-admission-probe"}}
	return poll(ctx, timeout, "admission policies to be configured", func(ctx context.Context) (bool, string, error) {
		_, err := cs.CoreV1().Namespaces().Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && admissionNotConfigured(err) {
			return false, err.Error(), nil
		}
		return true, "", nil
	})
}

// admissionNotConfigured tells a policy's configuration failure from its decision.
func admissionNotConfigured(err error) bool {
	return strings.Contains(err.Error(), "failed to configure policy")
}

func countReady(nodes []corev1.Node) int {
	n := 0
	for _, node := range nodes {
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				n++
				break
			}
		}
	}
	return n
}

// describe summarizes a running cluster in a few words: server version, address and
// nodes.
func describe(ctx context.Context, cfg *rest.Config) (string, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return "", err
	}
	v, err := cs.Discovery().ServerVersion()
	if err != nil {
		return "", err
	}
	list, err := cs.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("Kubernetes %s at %s, %d/%d nodes Ready", v.GitVersion, cfg.Host, countReady(list.Items), len(list.Items)), nil
}
