package devcluster

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
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

// applyManifests server-side applies docs with the cluster's own kubectl under
// fieldManager and returns what kubectl printed. Conflicts are forced: the files are
// the source of truth of a development cluster.
func applyManifests(ctx context.Context, kubectlPath, kubeconfig, fieldManager string, docs []manifest) (string, error) {
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
		"apply", "--server-side", "--force-conflicts", "--field-manager="+fieldManager, "-f", f.Name())
	out, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(out))
	if err != nil {
		return text, fmt.Errorf("kubectl apply: %w", err)
	}
	return text, nil
}

// GatewayAPIVersion is the Gateway API release whose standard-channel CRDs
// `orderly dev up --with gateway-api` installs (the Canary's HTTPRoutes). v1.7 needs a
// newer Go than the project's.
const GatewayAPIVersion = "v1.6.3"

// GatewayAPICRDDir returns the directory of the Gateway API standard channel's CRDs,
// from the sigs.k8s.io/gateway-api module in Go's module cache, downloaded through the
// module proxy the first time (like the cluster's binaries).
func GatewayAPICRDDir(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	tmp, err := os.MkdirTemp("", "orderly-gateway-api-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	// Outside any module, so that no go.mod is read or changed.
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", "sigs.k8s.io/gateway-api@"+GatewayAPIVersion)
	cmd.Dir = tmp
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
	out, err := cmd.Output()
	var dl struct {
		Dir   string
		Error string
	}
	if jerr := json.Unmarshal(out, &dl); jerr == nil && dl.Error != "" {
		return "", fmt.Errorf("downloading sigs.k8s.io/gateway-api@%s: %s", GatewayAPIVersion, dl.Error)
	}
	if err != nil {
		return "", fmt.Errorf("go mod download sigs.k8s.io/gateway-api@%s: %w", GatewayAPIVersion, err)
	}
	if dl.Dir == "" {
		return "", fmt.Errorf("go mod download sigs.k8s.io/gateway-api@%s returned no directory", GatewayAPIVersion)
	}
	return filepath.Join(dl.Dir, "config", "crd", "standard"), nil
}

// GatewayAPIManifests returns the Gateway API standard channel's CRDs, one YAML stream
// each. The ValidatingAdmissionPolicy shipped beside them (which guards upgrades) is
// left out: only the CRDs are needed to write routes.
func GatewayAPIManifests(ctx context.Context) ([][]byte, error) {
	dir, err := GatewayAPICRDDir(ctx)
	if err != nil {
		return nil, err
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return nil, err
	}
	var out [][]byte
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		crds, _, err := splitManifests([][]byte{b})
		if err != nil {
			return nil, fmt.Errorf("%s: %w", f, err)
		}
		if len(crds) > 0 {
			out = append(out, joinManifests(crds))
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no CRDs in %s", dir)
	}
	return out, nil
}
