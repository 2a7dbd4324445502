package devstack

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
)

// SamplesFieldManager applies the samples, as `kubectl apply --server-side` would
// for a person: the samples are the user's objects, not Orderly's.
const SamplesFieldManager = "kubectl"

// SamplesFor returns config/samples with the stand-ins' well-known addresses (the
// DefaultPorts the samples name) replaced by the ports given: what the e2e test
// applies for a stack on free ports. With DefaultPorts they are the files as they are.
func SamplesFor(p Ports) ([]config.File, error) {
	files, err := config.Samples()
	if err != nil {
		return nil, err
	}
	d := DefaultPorts
	r := strings.NewReplacer(
		fmt.Sprintf("127.0.0.1:%d", d.DNS), fmt.Sprintf("127.0.0.1:%d", p.DNS),
		fmt.Sprintf("http://127.0.0.1:%d", d.S3), fmt.Sprintf("http://127.0.0.1:%d", p.S3),
		fmt.Sprintf("http://127.0.0.1:%d", d.Prometheus), fmt.Sprintf("http://127.0.0.1:%d", p.Prometheus),
		fmt.Sprintf("127.0.0.1:%d/", d.Registry), fmt.Sprintf("127.0.0.1:%d/", p.Registry),
		fmt.Sprintf("port: %d", d.Postgres), fmt.Sprintf("port: %d", p.Postgres),
	)
	for i := range files {
		files[i].Data = []byte(r.Replace(string(files[i].Data)))
	}
	return files, nil
}

// Samples are config/samples for this stack's ports.
func (s *Stack) Samples() ([]config.File, error) { return SamplesFor(s.Ports) }

// ApplySamples server-side applies the samples to the cluster of kubeconfig, in
// name order (the namespaces first), as a person's kubectl would.
func ApplySamples(ctx context.Context, kubeconfig string, files []config.File, out io.Writer) error {
	docs := make([][]byte, 0, len(files))
	for _, f := range files {
		docs = append(docs, f.Data)
	}
	return devcluster.Apply(ctx, kubeconfig, SamplesFieldManager, docs, out)
}

// Sample is one object of Orderly's kinds in the samples, and its state.
type Sample struct {
	APIVersion, Kind string
	types.NamespacedName
	// Ready is true once its Ready condition is True; After is how long that took.
	Ready bool
	After time.Duration
	// Why is the Ready condition's reason and message while it is not True.
	Why string
}

func (s Sample) String() string {
	if s.Namespace == "" {
		return s.Kind + " " + s.Name
	}
	return s.Kind + " " + s.Namespace + "/" + s.Name
}

// SampleObjects lists the objects of Orderly's kinds (group *.orderly.dev) in files.
func SampleObjects(files []config.File) ([]Sample, error) {
	var out []Sample
	for _, f := range files {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(f.Data)))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			var u unstructured.Unstructured
			if err := yaml.Unmarshal(raw, &u.Object); err != nil {
				return nil, fmt.Errorf("%s: %w", f.Name, err)
			}
			if u.Object == nil || !strings.HasSuffix(u.GroupVersionKind().Group, ".orderly.dev") {
				continue
			}
			out = append(out, Sample{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(),
				NamespacedName: types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()}})
		}
	}
	return out, nil
}

// objectsOf lists the objects of kind in a YAML stream.
func objectsOf(stream []byte, kind string) ([]types.NamespacedName, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
	var out []types.NamespacedName
	for {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		var u unstructured.Unstructured
		if err := yaml.Unmarshal(raw, &u.Object); err != nil {
			return nil, err
		}
		if u.Object != nil && u.GetKind() == kind {
			out = append(out, types.NamespacedName{Namespace: u.GetNamespace(), Name: u.GetName()})
		}
	}
}

// WaitSamples waits until every sample object is Ready, or timeout passes, printing
// each as it becomes Ready; it returns every object's state. The wait is measured
// from since (when the samples were applied).
func WaitSamples(ctx context.Context, c client.Client, samples []Sample, since time.Time, timeout time.Duration, out io.Writer) []Sample {
	if out == nil {
		out = io.Discard
	}
	deadline := since.Add(timeout)
	for {
		pending := 0
		for i := range samples {
			sm := &samples[i]
			if sm.Ready {
				continue
			}
			u := &unstructured.Unstructured{}
			u.SetAPIVersion(sm.APIVersion)
			u.SetKind(sm.Kind)
			if err := c.Get(ctx, sm.NamespacedName, u); err != nil {
				sm.Why = err.Error()
				pending++
				continue
			}
			if ok, why := readyOf(u); ok {
				sm.Ready, sm.After, sm.Why = true, time.Since(since), ""
				fmt.Fprintf(out, "  %-7s %-46s Ready\n", sm.After.Round(100*time.Millisecond), sm.String())
				continue
			} else {
				sm.Why = why
			}
			pending++
		}
		if pending == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return samples
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// NotReady lists the samples that are not Ready, one line each with why.
func NotReady(samples []Sample) []string {
	var out []string
	for _, s := range samples {
		if !s.Ready {
			out = append(out, fmt.Sprintf("%s: %s", s.String(), s.Why))
		}
	}
	return out
}

// ManagerArgs are the flags `orderly manager` needs beside the stand-ins: the
// ImagePolicy webhook served on 127.0.0.1:webhookPort (the API server calls it there),
// and the image scanner reading the offline vulnerability database and the local
// registry over plain HTTP.
func (s *Stack) ManagerArgs(webhookPort int) []string {
	args := []string{"--imagepolicy-webhook", "--webhook-host=127.0.0.1", "--webhook-port=" + strconv.Itoa(webhookPort),
		fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", webhookPort)}
	if s.OSVDir != "" {
		args = append(args, "--imagescan-db-dir="+s.OSVDir)
	}
	if s.RegistryHost != "" {
		args = append(args, "--imagescan-insecure-registries="+s.RegistryHost)
	}
	return args
}

// Tour prints one line per capability with the commands that show it working on
// this stack (kubectl as the cluster's, orderly as the binary).
func (s *Stack) Tour(out io.Writer, orderly string) {
	p := s.Ports
	member := "--kubeconfig " + devcluster.KubeconfigPath(s.MemberCluster)
	lines := []struct {
		part        Part
		what, shows string
	}{
		{"", "Tenant onboarding", "kubectl get tenants; kubectl get ns -l tenancy.orderly.dev/tenant=payments"},
		{"", "Cost labels", "kubectl get labelpolicies,labelvaluesets; kubectl -n payments-dev create deployment x --image=nginx --dry-run=server -o jsonpath='{.metadata.labels}'"},
		{"", "Power saving", "kubectl get sleepschedules; " + orderly + " sleep savings"},
		{Postgres, "Test databases", "kubectl get databaseservers,devdatabases; kubectl get secret checkout-tests -o jsonpath='{.data.uri}' | base64 -d"},
		{Postgres, "Secret rotation", orderly + " rotate now checkout-api-key -n default; kubectl get secretrotations -w"},
		{S3, "Backup verification", "kubectl get backupverifications; kubectl get bv orders-nightly -o jsonpath='{.status.lastRun.checks}'"},
		{Prometheus, "Canary (promote)", fmt.Sprintf("kubectl -n storefront set image deployment/storefront storefront=127.0.0.1:%d/storefront:1.1.0; %s canary status storefront -n storefront", p.Registry, orderly)},
		{Prometheus, "Canary (roll back)", fmt.Sprintf("kubectl -n storefront set image deployment/checkout checkout=127.0.0.1:%d/checkout:2.1.0; %s canary status checkout -n storefront", p.Registry, orderly)},
		{Images, "Image compliance", fmt.Sprintf("kubectl get imagescans; kubectl -n shop create deployment old-web --image=127.0.0.1:%d/shop/web:1.4.1   # refused", p.Registry)},
		{DNS, "Service domains", fmt.Sprintf("kubectl get domainzones,servicedomains -A; %s dev dig shop.int.example.com --server 127.0.0.1:%d   # or dig @127.0.0.1 -p %d shop.int.example.com", orderly, p.DNS, p.DNS)},
		{Member, "Placement", "kubectl get placementpolicies -A; kubectl " + member + " -n shop get deployments"},
		{"", "Overview", orderly + " status"},
	}
	fmt.Fprintln(out, "A tour, one line per capability (in another shell, with the exports above):")
	for _, l := range lines {
		note := ""
		if l.part != "" && slices.Contains(s.Parts, l.part) && !s.Ready(l.part) {
			note = "   (its stand-in " + string(l.part) + " is not running: see above)"
		}
		fmt.Fprintf(out, "  %-20s %s%s\n", l.what, l.shows, note)
	}
}
