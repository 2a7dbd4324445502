package devcluster

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestOptionsWithDefaults(t *testing.T) {
	tests := []struct {
		name      string
		opts      Options
		wantName  string
		wantNodes int
		wantErr   string
	}{
		{name: "defaults", wantName: "orderly", wantNodes: 3},
		{name: "given", opts: Options{Name: "bench-1", Nodes: 10}, wantName: "bench-1", wantNodes: 10},
		{name: "bad name", opts: Options{Name: "Bench_1"}, wantErr: "must be lower-case"},
		{name: "negative nodes", opts: Options{Nodes: -1}, wantErr: "nodes must be positive"},
		{name: "bad extra arg", opts: Options{ExtraArgs: []string{"kube-apiserver=v"}}, wantErr: "component=flag=value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := tt.opts.withDefaults()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got.Name != tt.wantName || got.Nodes != tt.wantNodes {
				t.Errorf("got name %q nodes %d, want %q %d", got.Name, got.Nodes, tt.wantName, tt.wantNodes)
			}
		})
	}
}

func TestCreateClusterArgs(t *testing.T) {
	bins := binariesIn("/c")
	tests := []struct {
		name          string
		extraArgs     []string
		wantExtraArgs []string
	}{
		{
			name: "QPS always raised, leader election always off",
			wantExtraArgs: []string{"kube-controller-manager=kube-api-qps=500", "kube-controller-manager=kube-api-burst=1000",
				"kube-controller-manager=leader-elect=false", "kube-scheduler=leader-elect=false"},
		},
		{
			name:      "caller's extra args come after, so they win",
			extraArgs: []string{"kube-apiserver=max-requests-inflight=2000", "kube-controller-manager=kube-api-qps=800"},
			wantExtraArgs: []string{
				"kube-controller-manager=kube-api-qps=500", "kube-controller-manager=kube-api-burst=1000",
				"kube-controller-manager=leader-elect=false", "kube-scheduler=leader-elect=false",
				"kube-apiserver=max-requests-inflight=2000", "kube-controller-manager=kube-api-qps=800",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			args := createClusterArgs("dev", bins, tt.extraArgs)
			flags := flagValues(args)
			if got := flags["--extra-args"]; !slices.Equal(got, tt.wantExtraArgs) {
				t.Errorf("--extra-args = %v, want %v", got, tt.wantExtraArgs)
			}
			// Every component binary is given, so kwokctl never downloads one.
			for flag, wantPath := range map[string]string{
				"--name":                           "dev",
				"--runtime":                        "binary",
				"--etcd-binary":                    "/c/bin/etcd-" + EtcdVersion + "/etcd",
				"--kube-apiserver-binary":          "/c/bin/kubernetes-" + KubernetesVersion + "/kube-apiserver",
				"--kube-controller-manager-binary": "/c/bin/kubernetes-" + KubernetesVersion + "/kube-controller-manager",
				"--kube-scheduler-binary":          "/c/bin/kubernetes-" + KubernetesVersion + "/kube-scheduler",
				"--kwok-controller-binary":         "/c/bin/kwok-" + KwokVersion + "/kwok",
			} {
				if got := flags[flag]; !slices.Equal(got, []string{wantPath}) {
					t.Errorf("%s = %v, want %q", flag, got, wantPath)
				}
			}
			if !slices.Contains(args, "--kubeconfig=") {
				t.Errorf("args %v do not keep kwokctl away from the user's kubeconfig", args)
			}
			if args[0] != "create" || args[1] != "cluster" {
				t.Errorf("args start with %v", args[:2])
			}
		})
	}
}

func TestRunName(t *testing.T) {
	tests := []struct {
		prefix     string
		wantPrefix string
	}{
		{prefix: "orderly-e2e", wantPrefix: "orderly-e2e-"},
		{prefix: "orderly-bench-labelpolicy", wantPrefix: "orderly-bench-labelpolicy-"},
		// Cut to fit, without leaving a double dash where it was cut.
		{prefix: strings.Repeat("a", 55) + "-bbbbbbbbbb", wantPrefix: strings.Repeat("a", 55) + "-"},
	}
	for _, tt := range tests {
		seen := map[string]bool{}
		for range 20 {
			got := RunName(tt.prefix)
			if err := validateName(got); err != nil {
				t.Errorf("RunName(%q) = %q: %v", tt.prefix, got, err)
			}
			if !strings.HasPrefix(got, tt.wantPrefix) || strings.Contains(got, "--") {
				t.Errorf("RunName(%q) = %q, want it to start with %q", tt.prefix, got, tt.wantPrefix)
			}
			seen[got] = true
		}
		// Six random hex digits: a repeat among twenty draws has a chance of about 1 in
		// 90,000, two repeats far less; one is allowed.
		if len(seen) < 19 {
			t.Errorf("RunName(%q) gave only %d distinct names in 20 calls", tt.prefix, len(seen))
		}
	}
}

// flagValues collects "--flag value" pairs (not "--flag=value" ones).
func flagValues(args []string) map[string][]string {
	out := map[string][]string{}
	for i := 0; i+1 < len(args); i++ {
		if strings.HasPrefix(args[i], "--") && !strings.Contains(args[i], "=") && !strings.HasPrefix(args[i+1], "--") {
			out[args[i]] = append(out[args[i]], args[i+1])
			i++
		}
	}
	return out
}

func TestScaleNodesArgs(t *testing.T) {
	got := scaleNodesArgs("dev", 5)
	want := []string{"scale", "node", "--name", "dev", "--replicas", "5", "--param", ".allocatable.pods=1000"}
	if !slices.Equal(got, want) {
		t.Errorf("args = %v, want %v", got, want)
	}
}

func TestKwokctlEnv(t *testing.T) {
	t.Setenv("PATH", "/usr/bin")
	k := kwokctlRunner{root: "/c", bins: binariesIn("/c")}
	got := k.env()
	for _, want := range []string{
		"KWOK_WORKDIR=/c/kwok",
		"KWOK_KUBE_VERSION=" + KubernetesVersion,
		"KWOK_KUBECTL_BINARY=/c/bin/kubernetes-" + KubernetesVersion + "/kubectl",
		"PATH=/c/bin/kubernetes-" + KubernetesVersion + string(os.PathListSeparator) + "/usr/bin",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("env %v lacks %q", got, want)
		}
	}
}

func TestSplitManifests(t *testing.T) {
	crd := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: tenants.tenancy.orderly.dev
spec: {}
`
	role := `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: orderly-tenant-admin
`
	tests := []struct {
		name       string
		streams    []string
		wantCRDs   []string
		wantOthers []string
		wantErr    string
	}{
		{
			name:       "one file each",
			streams:    []string{crd, role},
			wantCRDs:   []string{"tenants.tenancy.orderly.dev"},
			wantOthers: []string{"orderly-tenant-admin"},
		},
		{
			name:       "multi-document stream with empty and comment-only documents",
			streams:    []string{"---\n# header\n---\n" + role + "---\n" + crd + "---\n"},
			wantCRDs:   []string{"tenants.tenancy.orderly.dev"},
			wantOthers: []string{"orderly-tenant-admin"},
		},
		{
			name:    "document without kind",
			streams: []string{"apiVersion: v1\nmetadata:\n  name: x\n"},
			wantErr: "manifest 1, document 1: apiVersion, kind and metadata.name are required",
		},
		{
			name:    "invalid YAML",
			streams: []string{role, "kind: [\n"},
			wantErr: "manifest 2, document 1",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var streams [][]byte
			for _, s := range tt.streams {
				streams = append(streams, []byte(s))
			}
			crds, others, err := splitManifests(streams)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := manifestNames(crds); !slices.Equal(got, tt.wantCRDs) {
				t.Errorf("CRDs = %v, want %v", got, tt.wantCRDs)
			}
			if got := manifestNames(others); !slices.Equal(got, tt.wantOthers) {
				t.Errorf("others = %v, want %v", got, tt.wantOthers)
			}
			joined := string(joinManifests(append(crds, others...)))
			if n := strings.Count(joined, "\n---\n"); n != len(crds)+len(others)-1 {
				t.Errorf("joined stream has %d separators:\n%s", n, joined)
			}
		})
	}
}

func TestMissing(t *testing.T) {
	dir := t.TempDir()
	write := func(name string, mode os.FileMode) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("x"), mode); err != nil {
			t.Fatal(err)
		}
	}
	write("exe", 0o755)
	write("notexe", 0o644)
	if err := os.Mkdir(filepath.Join(dir, "adir"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := missing(dir, []string{"exe", "notexe", "adir", "absent"})
	want := []string{"notexe", "adir", "absent"}
	if !slices.Equal(got, want) {
		t.Errorf("missing = %v, want %v", got, want)
	}
}

func TestEnsureSymlink(t *testing.T) {
	dir := t.TempDir()
	link := filepath.Join(dir, "etcd")
	for _, target := range []string{"/a/etcd", "/a/etcd", "/b/etcd"} {
		if err := ensureSymlink(target, link); err != nil {
			t.Fatal(err)
		}
		if got, _ := os.Readlink(link); got != target {
			t.Errorf("link -> %q, want %q", got, target)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir has %d entries, want only the link", len(entries))
	}
}

func TestContainsLine(t *testing.T) {
	tests := []struct {
		text string
		want bool
	}{
		{"orderly\nbench\n", true},
		{"orderly-2\n", false},
		{"", false},
	}
	for _, tt := range tests {
		if got := containsLine(tt.text, "orderly"); got != tt.want {
			t.Errorf("containsLine(%q) = %v, want %v", tt.text, got, tt.want)
		}
	}
}
