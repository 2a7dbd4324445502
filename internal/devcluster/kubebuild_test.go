package devcluster

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestParseStagingReplaces(t *testing.T) {
	tests := []struct {
		name        string
		gomod       string
		wantModules []string
		wantErr     string
	}{
		{
			name: "block, as in k8s.io/kubernetes",
			gomod: `module k8s.io/kubernetes

go 1.26.0

require (
	k8s.io/api v0.0.0
	github.com/foo/bar v1.2.3 // indirect
)

replace (
	k8s.io/client-go => ./staging/src/k8s.io/client-go
	k8s.io/api => ./staging/src/k8s.io/api
	github.com/other/mod => github.com/fork/mod v1.0.0
)
`,
			wantModules: []string{"k8s.io/api", "k8s.io/client-go"},
		},
		{
			name: "single-line directives, versioned left side and comments",
			gomod: `module x
replace k8s.io/api v0.0.0 => ./staging/src/k8s.io/api // staging
// replace k8s.io/commented => ./staging/src/k8s.io/commented
replace k8s.io/kubectl => ./staging/src/k8s.io/kubectl
replace k8s.io/api => ./staging/src/k8s.io/api
replacements/notadirective v1.0.0
`,
			wantModules: []string{"k8s.io/api", "k8s.io/kubectl"},
		},
		{
			name: "several blocks and a require block in between",
			gomod: `module x
replace (
	k8s.io/a => ./staging/src/k8s.io/a
)
require (
	k8s.io/b v1.0.0
)
replace(
	k8s.io/b => ./staging/src/k8s.io/b
)
`,
			wantModules: []string{"k8s.io/a", "k8s.io/b"},
		},
		{
			name:    "no staging replace",
			gomod:   "module x\n\nreplace a.b/c => a.b/d v1.0.0\n",
			wantErr: "no replace directive points at ./staging/",
		},
		{
			name:    "malformed",
			gomod:   "module x\nreplace (\n\tk8s.io/a ./staging/src/k8s.io/a\n)\n",
			wantErr: "malformed replace directive",
		},
		{
			name:    "unterminated block",
			gomod:   "module x\nreplace (\n\tk8s.io/a => ./staging/src/k8s.io/a\n",
			wantErr: "unterminated replace block",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStagingReplaces([]byte(tt.gomod))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, tt.wantModules) {
				t.Errorf("modules = %v, want %v", got, tt.wantModules)
			}
		})
	}
}

func TestKubeLDFlags(t *testing.T) {
	tests := []struct {
		name      string
		version   string
		wantFlags []string
		wantErr   bool
	}{
		{
			name:    "release",
			version: "v1.37.2",
			wantFlags: []string{
				"-s", "-w",
				"-X", "k8s.io/component-base/version.gitVersion=v1.37.2",
				"-X", "k8s.io/client-go/pkg/version.gitVersion=v1.37.2",
				"-X", "k8s.io/component-base/version.gitMajor=1",
				"-X", "k8s.io/client-go/pkg/version.gitMajor=1",
				"-X", "k8s.io/component-base/version.gitMinor=37",
				"-X", "k8s.io/client-go/pkg/version.gitMinor=37",
				"-X", "k8s.io/component-base/version.gitTreeState=clean",
				"-X", "k8s.io/client-go/pkg/version.gitTreeState=clean",
				"-X", "k8s.io/component-base/version.gitCommit=0000000000000000000000000000000000000000",
				"-X", "k8s.io/client-go/pkg/version.gitCommit=0000000000000000000000000000000000000000",
				"-X", "k8s.io/component-base/version.buildDate=2026-01-01T00:00:00Z",
				"-X", "k8s.io/client-go/pkg/version.buildDate=2026-01-01T00:00:00Z",
			},
		},
		{name: "no v prefix", version: "1.37.2", wantErr: true},
		{name: "two parts", version: "v1.37", wantErr: true},
		{name: "not a number", version: "v1.x.2", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := kubeLDFlags(tt.version, "2026-01-01T00:00:00Z")
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if tt.wantErr {
				return
			}
			if fields := strings.Fields(got); !slices.Equal(fields, tt.wantFlags) {
				t.Errorf("ldflags =\n%v\nwant\n%v", fields, tt.wantFlags)
			}
		})
	}
}

func TestStagingVersion(t *testing.T) {
	tests := []struct {
		version     string
		wantVersion string
		wantErr     bool
	}{
		{version: "v1.37.2", wantVersion: "v0.37.2"},
		{version: "v1.40.0", wantVersion: "v0.40.0"},
		{version: "v2.0.0", wantErr: true},
		{version: "latest", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.version, func(t *testing.T) {
			got, err := stagingVersion(tt.version)
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if got != tt.wantVersion {
				t.Errorf("staging version = %q, want %q", got, tt.wantVersion)
			}
		})
	}
}

func TestKubeBuildGoMod(t *testing.T) {
	got := kubeBuildGoMod("v1.37.2", "v0.37.2", []string{"k8s.io/api", "k8s.io/client-go"})
	want := `module orderly.dev/kubebuild

go 1.26

require k8s.io/kubernetes v1.37.2

replace (
	k8s.io/api => k8s.io/api v0.37.2
	k8s.io/client-go => k8s.io/client-go v0.37.2
)
`
	if got != want {
		t.Errorf("go.mod =\n%s\nwant\n%s", got, want)
	}
	// The generated file is itself a valid go.mod for the parser, with no staging left.
	if _, err := parseStagingReplaces([]byte(got)); err == nil {
		t.Errorf("generated go.mod still has staging replaces")
	}
}

func TestKubeBuildToolsGo(t *testing.T) {
	got := kubeBuildToolsGo(kubeCommands)
	for _, want := range []string{
		"//go:build tools\n",
		`_ "k8s.io/kubernetes/cmd/kube-apiserver"`,
		`_ "k8s.io/kubernetes/cmd/kube-controller-manager"`,
		`_ "k8s.io/kubernetes/cmd/kube-scheduler"`,
		`_ "k8s.io/kubernetes/cmd/kubectl"`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("tools.go lacks %q:\n%s", want, got)
		}
	}
}

func TestCacheDirFrom(t *testing.T) {
	tmp := t.TempDir()
	cwd, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name         string
		env          string
		userCache    string
		userCacheErr error
		wantDir      string
	}{
		{name: "env wins", env: tmp + "/custom", userCache: "/home/u/.cache", wantDir: tmp + "/custom"},
		{name: "env is cleaned", env: tmp + "/a/../b/", userCache: "/home/u/.cache", wantDir: tmp + "/b"},
		{name: "relative env made absolute", env: "rel", userCache: "/home/u/.cache", wantDir: filepath.Join(cwd, "rel")},
		{name: "user cache dir", userCache: "/home/u/.cache", wantDir: "/home/u/.cache/orderly"},
		{name: "no user cache dir", userCacheErr: errors.New("no HOME"), wantDir: filepath.Join(filepath.Clean(os.TempDir()), "orderly")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := cacheDirFrom(
				func(k string) string {
					if k == CacheDirEnv {
						return tt.env
					}
					return ""
				},
				func() (string, error) { return tt.userCache, tt.userCacheErr },
			)
			if got != tt.wantDir {
				t.Errorf("cache dir = %q, want %q", got, tt.wantDir)
			}
		})
	}
}

func TestCacheLayout(t *testing.T) {
	t.Setenv(CacheDirEnv, "/c")
	b := binariesIn(CacheDir())
	tests := []struct {
		name     string
		got      string
		wantPath string
	}{
		{"bin dir", b.Dir, "/c/bin"},
		{"kube-apiserver", b.KubeAPIServer, "/c/bin/kubernetes-" + KubernetesVersion + "/kube-apiserver"},
		{"kube-controller-manager", b.KubeControllerManager, "/c/bin/kubernetes-" + KubernetesVersion + "/kube-controller-manager"},
		{"kube-scheduler", b.KubeScheduler, "/c/bin/kubernetes-" + KubernetesVersion + "/kube-scheduler"},
		{"kubectl", b.Kubectl, "/c/bin/kubernetes-" + KubernetesVersion + "/kubectl"},
		{"etcd", b.Etcd, "/c/bin/etcd-" + EtcdVersion + "/etcd"},
		{"kwok", b.Kwok, "/c/bin/kwok-" + KwokVersion + "/kwok"},
		{"kwokctl", b.Kwokctl, "/c/bin/kwok-" + KwokVersion + "/kwokctl"},
		{"kubeconfig", KubeconfigPath(""), "/c/kwok/clusters/orderly/kubeconfig.yaml"},
		{"named kubeconfig", KubeconfigPath("bench"), "/c/kwok/clusters/bench/kubeconfig.yaml"},
		{"envtest", envtestDir(CacheDir()), "/c/envtest/kubernetes-" + KubernetesVersion + "-etcd-" + EtcdVersion},
	}
	for _, tt := range tests {
		if tt.got != tt.wantPath {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.wantPath)
		}
	}
}

func TestShellJoin(t *testing.T) {
	tests := []struct {
		words []string
		want  string
	}{
		{[]string{"build", "-o", "/x/"}, "build -o /x/"},
		{[]string{"-ldflags", "-s -w -X a=b"}, "-ldflags '-s -w -X a=b'"},
		{[]string{"it's", ""}, `'it'\''s' ''`},
	}
	for _, tt := range tests {
		if got := shellJoin(tt.words, " "); got != tt.want {
			t.Errorf("shellJoin(%q) = %s, want %s", tt.words, got, tt.want)
		}
	}
}
