package devcluster

import (
	"bufio"
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// kubeBuildDate is stamped into the Kubernetes binaries. It is fixed so that a rebuild
// links the same bytes and reuses the Go build cache.
const kubeBuildDate = "2026-01-01T00:00:00Z"

// Kubernetes commands built from k8s.io/kubernetes, by binary name.
const (
	kubeAPIServer         = "kube-apiserver"
	kubeControllerManager = "kube-controller-manager"
	kubeScheduler         = "kube-scheduler"
	kubectl               = "kubectl"
)

var kubeCommands = []string{kubeAPIServer, kubeControllerManager, kubeScheduler, kubectl}

func kubeCommandPackage(name string) string { return "k8s.io/kubernetes/cmd/" + name }

// parseStagingReplaces returns, sorted, the module paths that a go.mod replaces with a
// directory under ./staging/, which is how k8s.io/kubernetes points at its staging
// modules (k8s.io/api, k8s.io/client-go, ...). Those directories are not part of the
// module zip, so a module that requires k8s.io/kubernetes has to replace each of them
// with the published version.
func parseStagingReplaces(gomod []byte) ([]string, error) {
	var mods []string
	inReplaceBlock := false
	sc := bufio.NewScanner(bytes.NewReader(gomod))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for lineNo := 1; sc.Scan(); lineNo++ {
		line := sc.Text()
		if i := strings.Index(line, "//"); i >= 0 {
			line = line[:i]
		}
		line = strings.TrimSpace(line)
		var spec string
		switch {
		case line == "":
			continue
		case inReplaceBlock && line == ")":
			inReplaceBlock = false
			continue
		case inReplaceBlock:
			spec = line
		case isDirective(line, "replace"):
			rest := strings.TrimSpace(strings.TrimPrefix(line, "replace"))
			if rest == "(" {
				inReplaceBlock = true
				continue
			}
			spec = rest
		default:
			continue
		}
		left, right, ok := strings.Cut(spec, "=>")
		lf, rf := strings.Fields(left), strings.Fields(right)
		if !ok || len(lf) == 0 || len(lf) > 2 || len(rf) == 0 || len(rf) > 2 {
			return nil, fmt.Errorf("go.mod line %d: malformed replace directive %q", lineNo, spec)
		}
		if strings.HasPrefix(rf[0], "./staging/") {
			mods = append(mods, lf[0])
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if inReplaceBlock {
		return nil, fmt.Errorf("go.mod: unterminated replace block")
	}
	if len(mods) == 0 {
		return nil, fmt.Errorf("go.mod: no replace directive points at ./staging/")
	}
	slices.Sort(mods)
	return slices.Compact(mods), nil
}

// isDirective reports whether a go.mod line starts with the given verb, as a whole word.
func isDirective(line, verb string) bool {
	rest, ok := strings.CutPrefix(line, verb)
	return ok && (rest == "" || rest[0] == ' ' || rest[0] == '\t' || rest[0] == '(')
}

// parseKubeVersion splits "v1.37.2" into 1, 37 and 2.
func parseKubeVersion(version string) (major, minor, patch int, err error) {
	parts := strings.Split(strings.TrimPrefix(version, "v"), ".")
	if !strings.HasPrefix(version, "v") || len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("kubernetes version %q is not of the form vMAJOR.MINOR.PATCH", version)
	}
	nums := make([]int, 3)
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return 0, 0, 0, fmt.Errorf("kubernetes version %q is not of the form vMAJOR.MINOR.PATCH", version)
		}
		nums[i] = n
	}
	return nums[0], nums[1], nums[2], nil
}

// stagingVersion maps a Kubernetes release to the version its staging modules are
// published at: v1.37.2 -> v0.37.2.
func stagingVersion(kubeVersion string) (string, error) {
	major, minor, patch, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	if major != 1 {
		return "", fmt.Errorf("kubernetes version %q: only 1.x releases publish staging modules as v0.x", kubeVersion)
	}
	return fmt.Sprintf("v0.%d.%d", minor, patch), nil
}

// kubeLDFlags stamps the release into both places Kubernetes reads it from; without it
// /version reports v0.0.0-master+$Format:%H$, which kubectl and clients fail to parse.
func kubeLDFlags(kubeVersion, buildDate string) (string, error) {
	major, minor, _, err := parseKubeVersion(kubeVersion)
	if err != nil {
		return "", err
	}
	vars := []struct{ key, value string }{
		{"gitVersion", kubeVersion},
		{"gitMajor", strconv.Itoa(major)},
		{"gitMinor", strconv.Itoa(minor)},
		{"gitTreeState", "clean"},
		{"gitCommit", strings.Repeat("0", 40)},
		{"buildDate", buildDate},
	}
	flags := []string{"-s", "-w"}
	for _, v := range vars {
		for _, pkg := range []string{"k8s.io/component-base/version", "k8s.io/client-go/pkg/version"} {
			flags = append(flags, "-X", pkg+"."+v.key+"="+v.value)
		}
	}
	return strings.Join(flags, " "), nil
}

// kubeBuildGoMod is the go.mod of the throwaway module that builds the Kubernetes
// commands; `go mod tidy` completes it.
func kubeBuildGoMod(kubeVersion, stagingVersion string, stagingModules []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "module orderly.dev/kubebuild\n\ngo 1.26\n\nrequire k8s.io/kubernetes %s\n\nreplace (\n", kubeVersion)
	for _, m := range stagingModules {
		fmt.Fprintf(&b, "\t%s => %s %s\n", m, m, stagingVersion)
	}
	b.WriteString(")\n")
	return b.String()
}

// kubeBuildToolsGo keeps the commands' packages in the module graph for go mod tidy.
func kubeBuildToolsGo(commands []string) string {
	var b strings.Builder
	b.WriteString("//go:build tools\n\n// Package tools pins the Kubernetes commands this module builds.\npackage tools\n\nimport (\n")
	for _, c := range commands {
		fmt.Fprintf(&b, "\t_ %q\n", kubeCommandPackage(c))
	}
	b.WriteString(")\n")
	return b.String()
}
