package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// manifest is one YAML document of Options.Manifests.
type manifest struct {
	raw        []byte
	apiVersion string
	kind       string
	name       string
}

func (m manifest) isCRD() bool {
	return m.kind == "CustomResourceDefinition" && strings.HasPrefix(m.apiVersion, "apiextensions.k8s.io/")
}

// splitManifests cuts YAML streams into documents, drops empty ones, and separates the
// CustomResourceDefinitions, which must be Established before objects of their kinds
// can be applied.
func splitManifests(streams [][]byte) (crds, others []manifest, err error) {
	for i, stream := range streams {
		r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(stream)))
		for doc := 1; ; doc++ {
			raw, err := r.Read()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, nil, fmt.Errorf("manifest %d, document %d: %w", i+1, doc, err)
			}
			var anything any
			if err := yaml.Unmarshal(raw, &anything); err != nil {
				return nil, nil, fmt.Errorf("manifest %d, document %d: %w", i+1, doc, err)
			}
			if anything == nil {
				continue // only comments, or nothing, between two separators
			}
			var head struct {
				APIVersion string `json:"apiVersion"`
				Kind       string `json:"kind"`
				Metadata   struct {
					Name string `json:"name"`
				} `json:"metadata"`
			}
			if err := yaml.Unmarshal(raw, &head); err != nil {
				return nil, nil, fmt.Errorf("manifest %d, document %d: %w", i+1, doc, err)
			}
			if head.APIVersion == "" || head.Kind == "" || head.Metadata.Name == "" {
				return nil, nil, fmt.Errorf("manifest %d, document %d: apiVersion, kind and metadata.name are required", i+1, doc)
			}
			m := manifest{raw: raw, apiVersion: head.APIVersion, kind: head.Kind, name: head.Metadata.Name}
			if m.isCRD() {
				crds = append(crds, m)
			} else {
				others = append(others, m)
			}
		}
	}
	return crds, others, nil
}

func manifestNames(ms []manifest) []string {
	names := make([]string, 0, len(ms))
	for _, m := range ms {
		names = append(names, m.name)
	}
	return names
}

func joinManifests(ms []manifest) []byte {
	docs := make([][]byte, 0, len(ms))
	for _, m := range ms {
		docs = append(docs, bytes.TrimSpace(m.raw))
	}
	return append(bytes.Join(docs, []byte("\n---\n")), '\n')
}

// applyManifests server-side applies docs with the cluster's own kubectl and returns
// what kubectl printed. Conflicts are forced: the files are the source of truth of a
// development cluster.
func applyManifests(ctx context.Context, kubectlPath, kubeconfig string, docs []manifest) (string, error) {
	f, err := os.CreateTemp("", "orderly-dev-*.yaml")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	if _, err := f.Write(joinManifests(docs)); err != nil {
		_ = f.Close()
		return "", err
	}
	if err := f.Close(); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectlPath, "--kubeconfig", kubeconfig,
		"apply", "--server-side", "--force-conflicts", "--field-manager=orderly", "-f", f.Name())
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return text, fmt.Errorf("kubectl apply: %w", err)
	}
	return text, nil
}
