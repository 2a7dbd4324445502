package main

import (
	"bytes"
	"context"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/yaml"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// withFakeCluster makes the commands use a fake client holding objs, and returns it
// with a kubeconfig that loads (it is never dialled).
func withFakeCluster(t *testing.T, objs ...client.Object) (client.Client, string) {
	t.Helper()
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	old := clientFor
	clientFor = func(*rest.Config) (client.Client, error) { return c, nil }
	t.Cleanup(func() { clientFor = old })
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	const cfg = `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u, namespace: team}}]
current-context: c
`
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return c, kubeconfig
}

// run runs the root command with args and returns what it printed.
func run(t *testing.T, args ...string) []byte {
	t.Helper()
	cmd := newRootCommand()
	var out, stderr bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&stderr)
	cmd.SetArgs(args)
	if err := cmd.Execute(); err != nil {
		t.Fatalf("orderly %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return out.Bytes()
}

// decode reads a verb's output as JSON or YAML (by its JSON field names) into a map,
// and checks that both formats say the same. It returns the second (YAML) run's
// output: that run's action is what the cluster holds afterwards.
func decode(t *testing.T, args ...string) map[string]any {
	t.Helper()
	var fromJSON, fromYAML map[string]any
	if err := json.Unmarshal(run(t, append(args, "-o", "json")...), &fromJSON); err != nil {
		t.Fatalf("-o json is not JSON: %v", err)
	}
	if err := yaml.Unmarshal(run(t, append(args, "-o", "yaml")...), &fromYAML); err != nil {
		t.Fatalf("-o yaml is not YAML: %v", err)
	}
	last := maps.Clone(fromYAML)
	// The two runs act twice; their results differ only in what the second changed.
	for _, volatile := range []string{"wakeUntil", "rotateNow", "ttl", "expiresAt"} {
		if _, ok := fromJSON[volatile]; ok {
			if _, ok := fromYAML[volatile]; !ok {
				t.Errorf("-o yaml lacks %s", volatile)
			}
			delete(fromYAML, volatile)
			fromYAML[volatile] = fromJSON[volatile]
		}
	}
	if a, b := mustJSON(t, fromJSON), mustJSON(t, fromYAML); a != b {
		t.Errorf("-o json and -o yaml differ:\n%s\n%s", a, b)
	}
	return last
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestSleepWakeAndResumeOutput(t *testing.T) {
	c, kc := withFakeCluster(t, &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "dev-nights"}})
	before := time.Now().UTC().Truncate(time.Second)
	got := decode(t, "sleep", "wake", "dev-nights", "--for", "90m", "--kubeconfig", kc)
	var s powerv1alpha1.SleepSchedule
	if err := c.Get(context.Background(), client.ObjectKey{Name: "dev-nights"}, &s); err != nil {
		t.Fatal(err)
	}
	if s.Spec.WakeUntil == nil {
		t.Fatal("spec.wakeUntil not set")
	}
	until, err := time.Parse(time.RFC3339, got["wakeUntil"].(string))
	if err != nil || !until.Equal(s.Spec.WakeUntil.Time) || until.Before(before.Add(90*time.Minute)) {
		t.Errorf("wakeUntil %v (%v), spec.wakeUntil %s", got["wakeUntil"], err, s.Spec.WakeUntil)
	}
	if got["sleepSchedule"] != "dev-nights" || got["for"] != "1h30m0s" {
		t.Errorf("wake: %v", got)
	}

	got = decode(t, "sleep", "resume", "dev-nights", "--kubeconfig", kc)
	if got["sleepSchedule"] != "dev-nights" || got["followsSchedule"] != true {
		t.Errorf("resume: %v", got)
	}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "dev-nights"}, &s); err != nil || s.Spec.WakeUntil != nil {
		t.Errorf("spec.wakeUntil %v after resume (%v)", s.Spec.WakeUntil, err)
	}
}

func TestSleepSavingsOutput(t *testing.T) {
	asleep := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "dev-nights"}, Status: powerv1alpha1.SleepScheduleStatus{
		State: powerv1alpha1.StateAsleep, SleepingWorkloads: 3,
		SavedRequests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("3Gi")},
		Savings:       &powerv1alpha1.SleepSavings{AsleepHours: "12", CPUCoreHours: "18", MemoryGiBHours: "36"},
	}}
	awake := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "ci"}, Status: powerv1alpha1.SleepScheduleStatus{State: powerv1alpha1.StateAwake}}
	_, kc := withFakeCluster(t, asleep, awake)
	got := decode(t, "sleep", "savings", "--kubeconfig", kc)
	want := `{"schedules":[` +
		`{"name":"ci","sleepingWorkloads":0,"state":"Awake"},` +
		`{"name":"dev-nights","savedRequests":{"cpu":"1500m","memory":"3Gi"},"sleepingWorkloads":3,"state":"Asleep",` +
		`"thisWeek":` + mustJSON(t, asleep.Status.Savings) + `}]}`
	var wantMap map[string]any
	if err := json.Unmarshal([]byte(want), &wantMap); err != nil {
		t.Fatal(err)
	}
	if mustJSON(t, got) != mustJSON(t, wantMap) {
		t.Errorf("savings:\n got %s\nwant %s", mustJSON(t, got), mustJSON(t, wantMap))
	}
	// The text is the table, as before.
	if text := string(run(t, "sleep", "savings", "--kubeconfig", kc)); !strings.HasPrefix(text, "SCHEDULE") || !strings.Contains(text, "dev-nights") {
		t.Errorf("text:\n%s", text)
	}
}

func TestDBExtendOutput(t *testing.T) {
	created := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
	db := &datav1alpha1.DevDatabase{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "app", CreationTimestamp: created},
		Spec:       datav1alpha1.DevDatabaseSpec{ServerRef: "shared", TTL: metav1.Duration{Duration: 8 * time.Hour}},
	}
	c, kc := withFakeCluster(t, db)
	got := decode(t, "db", "extend", "app", "--by", "2h", "--kubeconfig", kc) // the namespace is the context's
	var after datav1alpha1.DevDatabase
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(db), &after); err != nil {
		t.Fatal(err)
	}
	// Two runs, each 2h later: 8h + 2h + 2h; got is the second run's output.
	if after.Spec.TTL.Duration != 12*time.Hour || got["ttl"] != "12h0m0s" {
		t.Errorf("spec.ttl %s, second run's ttl %v", after.Spec.TTL.Duration, got["ttl"])
	}
	if got["expiresAt"] != created.Add(12*time.Hour).UTC().Format(time.RFC3339) {
		t.Errorf("expiresAt %v, want creation + 12h", got["expiresAt"])
	}
	if got["namespace"] != "team" || got["name"] != "app" || got["serverMissing"] != true {
		t.Errorf("extend: %v", got)
	}
}

func TestRotateNowOutput(t *testing.T) {
	sr := &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: "payments", Name: "db-password"}}
	c, kc := withFakeCluster(t, sr)
	got := decode(t, "rotate", "now", "db-password", "-n", "payments", "--kubeconfig", kc)
	var after secretsv1alpha1.SecretRotation
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(sr), &after); err != nil {
		t.Fatal(err)
	}
	if got["namespace"] != "payments" || got["name"] != "db-password" || got["rotateNow"] == "" {
		t.Errorf("rotate: %v", got)
	}
	if after.Spec.RotateNow == "" {
		t.Error("spec.rotateNow not set")
	}
}

func TestCanaryPromoteAndAbortOutput(t *testing.T) {
	cn := &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Status:     deliveryv1alpha1.CanaryStatus{Phase: deliveryv1alpha1.PhasePaused, Revision: "7d9f", CurrentStep: 2},
	}
	c, kc := withFakeCluster(t, cn)
	got := decode(t, "canary", "promote", "web", "-n", "shop", "--kubeconfig", kc)
	want := map[string]any{"namespace": "shop", "name": "web", "action": "promote", "revision": "7d9f", "step": float64(2)}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Errorf("promote: %v, want %v", got, want)
	}
	got = decode(t, "canary", "abort", "web", "-n", "shop", "--kubeconfig", kc)
	want = map[string]any{"namespace": "shop", "name": "web", "action": "abort", "revision": "7d9f"}
	if mustJSON(t, got) != mustJSON(t, want) {
		t.Errorf("abort: %v, want %v", got, want)
	}
	var after deliveryv1alpha1.Canary
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(cn), &after); err != nil {
		t.Fatal(err)
	}
	if after.Annotations[deliveryv1alpha1.PromoteAnnotation] == "" || after.Annotations[deliveryv1alpha1.AbortAnnotation] != "7d9f" {
		t.Errorf("annotations %v", after.Annotations)
	}
}

// A typo in -o fails before anything in the cluster changes.
func TestUnknownOutputChangesNothing(t *testing.T) {
	c, kc := withFakeCluster(t, &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "dev-nights"}})
	for _, args := range [][]string{
		{"sleep", "wake", "dev-nights"}, {"sleep", "resume", "dev-nights"}, {"sleep", "savings"}, {"db", "extend", "app"},
		{"rotate", "now", "x"}, {"canary", "promote", "web"}, {"canary", "abort", "web"}, {"status"},
	} {
		cmd := newRootCommand()
		cmd.SetOut(&bytes.Buffer{})
		cmd.SetErr(&bytes.Buffer{})
		cmd.SetArgs(append(args, "--kubeconfig", kc, "-o", "jsno"))
		if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), `--output must be text, json or yaml, not "jsno"`) {
			t.Errorf("%s -o jsno: err = %v", strings.Join(args, " "), err)
		}
	}
	var s powerv1alpha1.SleepSchedule
	if err := c.Get(context.Background(), client.ObjectKey{Name: "dev-nights"}, &s); err != nil || s.Spec.WakeUntil != nil {
		t.Errorf("the schedule changed: %v (%v)", s.Spec.WakeUntil, err)
	}
}
