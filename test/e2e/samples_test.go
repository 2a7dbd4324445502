//go:build e2e

package e2e

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/devstack"
	"orderly.dev/orderly/internal/overview"
)

// samplesWait is how long every sample may take to be Ready once applied: the
// figure `make run` promises.
const samplesWait = 2 * time.Minute

// TestSamples is what `make run` shows a new user: every capability working on the
// local cluster. Every stand-in comes up beside the run's cluster through
// internal/devstack, the code `orderly dev run` runs (on free ports and in the run's
// directory, so that it never meets a developer's `make run`), the manager runs with
// the flags `orderly dev run` gives it (as its ServiceAccount, like every e2e
// manager), config/samples is applied as `orderly dev run` applies it, and every
// sample must be Ready within two minutes, with nothing of them that `orderly status`
// would list as needing a look. A stand-in that does not come up fails the test with
// its reason: CI installs every package.
func TestSamples(t *testing.T) {
	ctx := context.Background()
	out := &logWriter{t: t}
	ports, err := devstack.FreePorts()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(runDir, "stand-ins")
	kubeconfig := devcluster.KubeconfigPath(clusterName)
	start := time.Now()
	stack, err := devstack.Up(ctx, devstack.Options{
		Cluster: clusterName, Kubeconfig: kubeconfig, Dir: dir, PostgresDir: filepath.Join(dir, "postgres"),
		Ports: ports, Parts: devstack.AllParts, OrderlyBin: managerBin,
		MemberCluster: devcluster.RunName("orderly-e2e-samples-member"),
	}, out)
	t.Cleanup(func() {
		if stack != nil {
			if err := stack.Down(context.Background(), out); err != nil {
				t.Errorf("taking the stand-ins down: %v", err)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range stack.Results {
		if !r.Ready {
			t.Errorf("stand-in %s did not come up: %s %s", r.Part, r.Detail, r.Fix)
		}
	}
	if t.Failed() {
		t.FailNow()
	}
	t.Logf("the stand-ins came up in %s", time.Since(start).Round(100*time.Millisecond))
	restartManager(t, stack.ManagerArgs(freePort())...)

	samples, err := stack.Samples()
	if err != nil {
		t.Fatal(err)
	}
	var standIns []config.File
	for _, name := range []string{"gateway-api.yaml", "cert-manager.yaml"} {
		b, err := config.DevFile(name)
		if err != nil {
			t.Fatal(err)
		}
		standIns = append(standIns, config.File{Name: name, Data: b})
	}
	t.Cleanup(func() { deleteSamples(t, append(standIns, samples...)) })
	applied := time.Now()
	if err := devstack.ApplySamples(ctx, kubeconfig, samples, out); err != nil {
		t.Fatal(err)
	}
	objects, err := devstack.SampleObjects(samples)
	if err != nil {
		t.Fatal(err)
	}
	objects = devstack.WaitSamples(ctx, k, objects, applied, samplesWait, out)
	if notReady := devstack.NotReady(objects); len(notReady) > 0 {
		t.Fatalf("%d of %d samples not Ready %s after they were applied:\n  %s", len(notReady), len(objects), samplesWait, strings.Join(notReady, "\n  "))
	}
	var slowest time.Duration
	for _, o := range objects {
		slowest = max(slowest, o.After)
	}
	t.Logf("every sample Ready %s after it was applied, %s after the stand-ins started", slowest.Round(100*time.Millisecond), time.Since(start).Round(time.Second))

	// `orderly status` lists none of them as needing a look, but for the sample
	// SleepSchedule when the test runs in its off-hours: an asleep schedule is listed
	// by design, to say what sleeps (internal/overview).
	ov, err := overview.Collect(ctx, k, overview.Options{Now: time.Now(), ExpiringWithin: 24 * time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ov.Sections {
		for _, item := range s.Attention {
			if s.Kind == "SleepSchedule" && strings.HasPrefix(item.Why, "asleep: ") {
				continue
			}
			if slices.ContainsFunc(objects, func(o devstack.Sample) bool {
				return o.Kind == s.Kind && o.Namespace == item.Namespace && o.Name == item.Name
			}) {
				t.Errorf("orderly status lists %s %s/%s: %s", s.Kind, item.Namespace, item.Name, item.Why)
			}
		}
	}
}

// deleteSamples deletes what the samples (and the stand-ins' manifests beside them)
// created, the objects with Orderly's finalizers first (while the stand-ins their
// clean-up talks to still run), then the rest and the namespaces the samples and
// their Tenant made, so that the tests after this one find no cluster-wide policy or
// issuer of the samples.
func deleteSamples(t *testing.T, files []config.File) {
	ctx := context.Background()
	var objs []*unstructured.Unstructured
	for _, f := range files {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(f.Data)))
		for {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Errorf("reading %s: %v", f.Name, err)
				return
			}
			u := &unstructured.Unstructured{}
			if err := yaml.Unmarshal(raw, &u.Object); err != nil || u.Object == nil {
				continue
			}
			objs = append(objs, u)
		}
	}
	slices.Reverse(objs)
	orderly := func(u *unstructured.Unstructured) bool {
		return strings.HasSuffix(u.GroupVersionKind().Group, ".orderly.dev")
	}
	for _, u := range objs {
		if orderly(u) {
			_ = k.Delete(ctx, u.DeepCopy())
		}
	}
	deadline := time.Now().Add(2 * time.Minute)
	for _, u := range objs {
		if !orderly(u) {
			continue
		}
		for {
			err := k.Get(ctx, client.ObjectKeyFromObject(u), u.DeepCopy())
			if apierrors.IsNotFound(err) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("%s %s/%s is not gone 2 minutes after its deletion", u.GetKind(), u.GetNamespace(), u.GetName())
				break
			}
			time.Sleep(poll)
		}
	}
	for _, u := range objs {
		if !orderly(u) && u.GetKind() != "Namespace" {
			_ = k.Delete(ctx, u.DeepCopy())
		}
	}
	for _, ns := range []string{"shop", "storefront", "payments-dev", "payments-staging", "gateways", "infra", "cert-manager"} {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion("v1")
		u.SetKind("Namespace")
		u.SetName(ns)
		_ = k.Delete(ctx, u)
	}
}

// logWriter writes each line to the test's log.
type logWriter struct {
	t   *testing.T
	buf []byte
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.buf = append(w.buf, b...)
	for {
		i := bytes.IndexByte(w.buf, '\n')
		if i < 0 {
			return len(b), nil
		}
		w.t.Log(string(w.buf[:i]))
		w.buf = w.buf[i+1:]
	}
}
