// Package testenv starts a real kube-apiserver and etcd (controller-runtime's envtest)
// for integration tests, from the binaries `orderly dev assets` builds and caches.
package testenv

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// RepoRoot is the repository's root directory, found from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..")
}

// Start runs an API server with Orderly's CRDs installed. KUBEBUILDER_ASSETS must name
// the directory with etcd and kube-apiserver: `make integration` sets it.
func Start() (*envtest.Environment, *rest.Config, error) {
	return start(false)
}

// StartWithoutMutatingAdmissionPolicy runs an API server as one that predates
// MutatingAdmissionPolicy: the resources are not served and the admission plugin
// (whose informers would wait for them) is off.
func StartWithoutMutatingAdmissionPolicy() (*envtest.Environment, *rest.Config, error) {
	return start(true)
}

func start(withoutMAP bool) (*envtest.Environment, *rest.Config, error) {
	if os.Getenv("KUBEBUILDER_ASSETS") == "" {
		return nil, nil, errors.New("KUBEBUILDER_ASSETS is not set: run `make integration`, or export KUBEBUILDER_ASSETS=$(go run ./cmd/orderly dev assets)")
	}
	env := &envtest.Environment{
		CRDDirectoryPaths:     []string{filepath.Join(RepoRoot(), "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
	}
	if withoutMAP {
		env.ControlPlane.GetAPIServer().Configure().
			Append("runtime-config", "admissionregistration.k8s.io/v1/mutatingadmissionpolicies=false,admissionregistration.k8s.io/v1/mutatingadmissionpolicybindings=false").
			Append("disable-admission-plugins", "MutatingAdmissionPolicy")
	}
	cfg, err := env.Start()
	if err != nil {
		return nil, nil, err
	}
	return env, cfg, nil
}
