//go:build integration

// Package apivalidation checks, against a real API server with config/crd/bases
// installed, that the objects the API review (issue 43, docs/api-review.md) found
// admitted and failing only at reconcile are refused when written, each with a
// message that says what is wrong. Every case starts from a valid object that the API
// server accepts (the control) and changes one field.
package apivalidation

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"orderly.dev/orderly/internal/testing/testenv"
)

var k client.Client

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		return nil, nil
	})
}

// Valid objects, one per kind the cases change; the smallest each kind admits.
const (
	tenant = `
apiVersion: tenancy.orderly.dev/v1alpha1
kind: Tenant
metadata: {name: t}
spec:
  owners: [{kind: Group, name: team}]
  namespaces: [{name: t-dev}]
  resources:
    - name: settings
      object: {apiVersion: v1, kind: ConfigMap, metadata: {name: settings}}
  additionalRoleBindings:
    - roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: view}
      subjects: [{kind: Group, name: sre}]
`
	placement = `
apiVersion: fleet.orderly.dev/v1alpha1
kind: PlacementPolicy
metadata: {name: p, namespace: default}
spec:
  resourceSelectors: [{apiVersion: apps/v1, kind: Deployment, name: web}]
  clusterSelector: {}
  strategy: Divide
  weights:
    - {cluster: a, weight: 0}
    - {cluster: b, weight: 1}
  overrides:
    - clusterSelector: {}
      patches: [{op: replace, path: /spec/replicas, value: 1}]
`
	canary = `
apiVersion: delivery.orderly.dev/v1alpha1
kind: Canary
metadata: {name: c, namespace: default}
spec:
  targetRef: {name: web}
  service: {port: 8080}
  traffic:
    httpRoute: {name: web}
  steps:
    - {weight: 10, interval: 1m}
  analysis:
    provider: {address: "http://prometheus.monitoring:9090"}
    metrics:
      - name: errors
        query: sum(rate(errors[1m]))
        threshold: {max: "1"}
`
	secretRotation = `
apiVersion: secrets.orderly.dev/v1alpha1
kind: SecretRotation
metadata: {name: s, namespace: default}
spec:
  secretName: s
  interval: 720h
  generator:
    password: {length: 40}
`
	backupVerification = `
apiVersion: data.orderly.dev/v1alpha1
kind: BackupVerification
metadata: {name: b, namespace: default}
spec:
  source:
    s3:
      endpoint: https://s3.example.com
      bucket: backups
      credentialsSecretRef: {name: creds}
  target: {serverRef: shared}
`
	domainZone = `
apiVersion: network.orderly.dev/v1alpha1
kind: DomainZone
metadata: {name: z}
spec:
  zone: int.example.com
  allowedNamespaces: {}
  dns:
    provider: RFC2136
    rfc2136:
      server: 127.0.0.1:53
      tsigSecretRef: {name: tsig}
  route: {ingressClassName: nginx}
`
	sleepSchedule = `
apiVersion: power.orderly.dev/v1alpha1
kind: SleepSchedule
metadata: {name: s}
spec:
  namespaces: [dev]
  timeZone: Europe/Berlin
  awake: [{days: Mon-Fri, from: "07:30", to: "19:00"}]
`
	imagePolicy = `
apiVersion: policy.orderly.dev/v1alpha1
kind: ImagePolicy
metadata: {name: i}
spec:
  maxSeverity: High
`
)

func TestRefusedWithAMessage(t *testing.T) {
	cases := []struct {
		name string
		base string
		// set changes the valid object into the bad one.
		set func(u map[string]any)
		// wantMessages must all appear in the API server's refusal.
		wantMessages []string
	}{
		{
			name: "a PlacementPolicy whose weights are all 0 (no cluster would get a replica)",
			base: placement,
			set: func(u map[string]any) {
				spec(u)["weights"] = []any{map[string]any{"cluster": "a", "weight": int64(0)}}
			},
			wantMessages: []string{"spec.weights", "at least one weight must be above 0"},
		},
		{
			name: "a PlacementPolicy override patching an empty path",
			base: placement,
			set: func(u map[string]any) {
				o := spec(u)["overrides"].([]any)[0].(map[string]any)
				o["patches"] = []any{map[string]any{"op": "replace", "path": "", "value": int64(1)}}
			},
			wantMessages: []string{"spec.overrides[0].patches[0].path", "should be at least 1 chars long"},
		},
		{
			name: "a Canary whose Prometheus address is empty",
			base: canary,
			set: func(u map[string]any) {
				spec(u)["analysis"].(map[string]any)["provider"] = map[string]any{"address": ""}
			},
			wantMessages: []string{"spec.analysis.provider.address", "should be at least 1 chars long"},
		},
		{
			name:         "a Canary with empty traffic",
			base:         canary,
			set:          func(u map[string]any) { spec(u)["traffic"] = map[string]any{} },
			wantMessages: []string{"spec.traffic", "name an httpRoute, a virtualService, or both"},
		},
		{
			name:         "a Canary step that is neither a weight nor a pause ([{}])",
			base:         canary,
			set:          func(u map[string]any) { spec(u)["steps"] = []any{map[string]any{}} },
			wantMessages: []string{"spec.steps[0]", "a step is either a weight (with an interval) or pause: true"},
		},
		{
			name:         "a SecretRotation with an empty generator",
			base:         secretRotation,
			set:          func(u map[string]any) { spec(u)["generator"] = map[string]any{} },
			wantMessages: []string{"spec.generator", "set exactly one generator"},
		},
		{
			name:         "a BackupVerification with an empty source",
			base:         backupVerification,
			set:          func(u map[string]any) { spec(u)["source"] = map[string]any{} },
			wantMessages: []string{"spec.source", "source needs exactly one kind"},
		},
		{
			name:         "a DomainZone with an empty route",
			base:         domainZone,
			set:          func(u map[string]any) { spec(u)["route"] = map[string]any{} },
			wantMessages: []string{"spec.route", "name a gateway, an ingressClassName, or both"},
		},
		{
			name: "a SleepSchedule awake window without a start",
			base: sleepSchedule,
			set: func(u map[string]any) {
				spec(u)["awake"] = []any{map[string]any{"days": "Mon-Fri", "from": "", "to": "19:00"}}
			},
			wantMessages: []string{"spec.awake[0].from", "should be at least 5 chars long"},
		},
		{
			name:         "an ImagePolicy that checks nothing",
			base:         imagePolicy,
			set:          func(u map[string]any) { u["spec"] = map[string]any{} },
			wantMessages: []string{"an ImagePolicy needs at least one of"},
		},
		{
			name:         "a Tenant resource entry without a name ([{}])",
			base:         tenant,
			set:          func(u map[string]any) { spec(u)["resources"] = []any{map[string]any{}} },
			wantMessages: []string{"spec.resources[0].name", "Required value"},
		},
		{
			name: "a Tenant resource copied from a source without a kind",
			base: tenant,
			set: func(u map[string]any) {
				spec(u)["resources"] = []any{map[string]any{"name": "copy", "from": map[string]any{
					"apiVersion": "v1", "kind": "", "namespace": "shared", "name": "ca"}}}
			},
			wantMessages: []string{"spec.resources[0].from.kind", "should be at least 1 chars long"},
		},
		{
			name: "a Tenant role binding with an empty roleRef",
			base: tenant,
			set: func(u map[string]any) {
				spec(u)["additionalRoleBindings"] = []any{map[string]any{
					"roleRef":  map[string]any{"apiGroup": "", "kind": "", "name": ""},
					"subjects": []any{map[string]any{"kind": "Group", "name": "sre"}}}}
			},
			wantMessages: []string{"roleRef must be a Role or ClusterRole of apiGroup rbac.authorization.k8s.io"},
		},
	}
	ctx := context.Background()
	controls := map[string]bool{}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if !controls[tc.base] {
				// The control: the valid object is accepted.
				if err := k.Create(ctx, object(t, tc.base), client.DryRunAll); err != nil {
					t.Fatalf("the valid object was refused: %v", err)
				}
				controls[tc.base] = true
			}
			bad := object(t, tc.base)
			tc.set(bad.Object)
			err := k.Create(ctx, bad, client.DryRunAll)
			if err == nil {
				t.Fatalf("the API server admitted it")
			}
			for _, want := range tc.wantMessages {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("the refusal does not say %q:\n%v", want, err)
				}
			}
		})
	}
}

func object(t *testing.T, manifest string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(manifest), &u.Object); err != nil {
		t.Fatalf("parsing the manifest: %v", err)
	}
	return u
}

func spec(u map[string]any) map[string]any { return u["spec"].(map[string]any) }
