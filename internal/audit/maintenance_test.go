package audit

import (
	"strings"
	"testing"
)

func TestMaintenanceFindings(t *testing.T) {
	cases := []struct {
		name        string
		images      []string
		labels      map[string]string
		wantVersion string
		// wantPenalties are those of maintenance.version and maintenance.image-tag.
		wantVersionPenalty, wantTagPenalty int
		wantInMessage                      string
	}{
		{name: "a release tag", images: []string{"ghcr.io/cloudnative-pg/cloudnative-pg:1.30.0"}, wantVersion: "1.30.0"},
		{name: "a v-prefixed release tag with a suffix", images: []string{"quay.io/strimzi/kafka:v1.2.0-kafka-4.3.1"}, wantVersion: "1.2.0-kafka-4.3.1"},
		{name: "a registry with a port and a release tag", images: []string{"registry.local:5000/op:v0.4.0"}, wantVersion: "0.4.0"},
		{
			// Before, :latest cost what a pinned release tag costs.
			name: "latest", images: []string{"example.com/op:latest"},
			wantVersionPenalty: 10, wantTagPenalty: 25, wantInMessage: "image by :latest (or no tag) for container c0 (example.com/op:latest)",
		},
		{name: "no tag at all is latest", images: []string{"example.com/op"}, wantVersionPenalty: 10, wantTagPenalty: 25},
		{name: "a branch's tag names no release", images: []string{"example.com/op:main"}, wantVersionPenalty: 10, wantTagPenalty: 10, wantInMessage: "names no release"},
		{
			name: "a digest pins the image; the version comes from the label", images: []string{"example.com/op@sha256:" + strings.Repeat("ab", 32)},
			labels: map[string]string{"app.kubernetes.io/version": "v2.3.1"}, wantVersion: "2.3.1",
		},
		{name: "the chart's version when nothing else says", images: []string{"example.com/op@sha256:" + strings.Repeat("ab", 32)},
			labels: map[string]string{"helm.sh/chart": "ledger-2.3.1"}, wantVersion: "2.3.1"},
		{name: "a sidecar by latest beside a pinned manager", images: []string{"example.com/op:1.0.0", "example.com/proxy:latest"}, wantVersion: "1.0.0", wantTagPenalty: 25},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			d := newDeployment("ops", "op", "op", 1)
			d.Labels = tc.labels
			d.Spec.Template.Spec.Containers = nil
			for i, img := range tc.images {
				d.Spec.Template.Spec.Containers = append(d.Spec.Template.Spec.Containers, containerOf(i, img))
			}
			dep := d.build()
			w := workload{kind: "Deployment", namespace: "ops", name: "op", labels: dep.Labels, template: dep.Spec.Template}
			if v, _ := versionOf(w); v != tc.wantVersion {
				t.Errorf("version = %q, want %q", v, tc.wantVersion)
			}
			fs := maintenanceFindings(w)
			if fs[0].Penalty != tc.wantVersionPenalty || fs[1].Penalty != tc.wantTagPenalty {
				t.Errorf("penalties %d (%s), %d (%s); want %d, %d", fs[0].Penalty, fs[0].Message, fs[1].Penalty, fs[1].Message, tc.wantVersionPenalty, tc.wantTagPenalty)
			}
			if tc.wantInMessage != "" && !strings.Contains(fs[1].Message, tc.wantInMessage) {
				t.Errorf("message %q does not say %q", fs[1].Message, tc.wantInMessage)
			}
		})
	}
}
