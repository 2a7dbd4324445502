package imagescan

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// MaxPullSecrets bounds the pull secrets remembered per repository (from the pods
// that run it, or the object admission met): a registry is asked with at most this
// many credentials, then the configured Secret, before anonymously.
const MaxPullSecrets = 4

// addPullSecrets adds the pull secrets of a pod (or pod template) in namespace ns to
// refs, without repeats and up to MaxPullSecrets.
func addPullSecrets(refs []client.ObjectKey, ns string, secrets []corev1.LocalObjectReference) []client.ObjectKey {
	for _, s := range secrets {
		key := client.ObjectKey{Namespace: ns, Name: s.Name}
		if s.Name == "" || slices.Contains(refs, key) || len(refs) >= MaxPullSecrets {
			continue
		}
		refs = append(refs, key)
	}
	return refs
}

// FormatPullSecrets writes refs as the value of the pull-secrets annotation of a
// pending ImageScan: "namespace/name,namespace/name".
func FormatPullSecrets(refs []client.ObjectKey) string {
	parts := make([]string, 0, len(refs))
	for _, r := range refs {
		parts = append(parts, r.Namespace+"/"+r.Name)
	}
	return strings.Join(parts, ",")
}

// ParsePullSecrets reads the pull-secrets annotation; malformed entries are skipped.
func ParsePullSecrets(v string) []client.ObjectKey {
	var refs []client.ObjectKey
	for part := range strings.SplitSeq(v, ",") {
		ns, n, ok := strings.Cut(strings.TrimSpace(part), "/")
		if !ok || ns == "" || n == "" {
			continue
		}
		refs = addPullSecrets(refs, ns, []corev1.LocalObjectReference{{Name: n}})
	}
	return refs
}

// admittedWith adds to refs the pull secrets admission recorded on sc (those of the
// object that queued it), up to MaxPullSecrets.
func admittedWith(sc *policyv1alpha1.ImageScan, refs []client.ObjectKey) []client.ObjectKey {
	out := slices.Clone(refs)
	for _, r := range ParsePullSecrets(sc.Annotations[policyv1alpha1.ImageScanPullSecretsAnnotation]) {
		out = addPullSecrets(out, r.Namespace, []corev1.LocalObjectReference{{Name: r.Name}})
	}
	return out
}

// PullSecretsFor returns the pull secrets, in namespace ns, that a pod (or pod
// template) names; admission records them on the pending ImageScans it creates.
func PullSecretsFor(ns string, secrets []corev1.LocalObjectReference) []client.ObjectKey {
	return addPullSecrets(nil, ns, secrets)
}

// credentials are the keychains to try for one repository, in order: each pull
// secret that has credentials for its registry, then the configured Secret when it
// has some, and anonymous access only when none of them does (as the kubelet).
func (s *Scanner) credentials(ctx context.Context, repository string, refs []client.ObjectKey) ([]authn.Keychain, error) {
	repo, err := name.NewRepository(repository, name.WeakValidation)
	if err != nil {
		return nil, fmt.Errorf("repository %q: %w", repository, err)
	}
	var out []authn.Keychain
	add := func(kc authn.Keychain) {
		if a, err := kc.Resolve(repo); err == nil && a != authn.Anonymous {
			out = append(out, kc)
		}
	}
	if !s.PodPullSecrets {
		refs = nil
	}
	for _, ref := range refs {
		kc, err := s.secretKeychain(ctx, ref)
		if err != nil {
			// A pod's missing or malformed pull secret is the pod's problem (its pull
			// fails too): the scan goes on with what else there is.
			log.FromContext(ctx).V(1).Info("Skipping a pull secret", "secret", ref.String(), "reason", err.Error())
			continue
		}
		add(kc)
	}
	if s.CredentialsSecret != "" {
		kc, err := s.secretKeychain(ctx, client.ObjectKey{Namespace: s.Namespace, Name: s.CredentialsSecret})
		if err != nil {
			// Reported only when nothing else has credentials for the registry: a
			// broken platform Secret does not stop the pods' own from working.
			if len(out) == 0 {
				return nil, fmt.Errorf("%w: %w", errCredentials, err)
			}
			log.FromContext(ctx).Error(err, "Reading the registry credentials Secret; trying the pods' pull secrets only")
		} else {
			add(kc)
		}
	}
	if len(out) == 0 {
		out = append(out, authn.NewMultiKeychain())
	}
	return out, nil
}

// secretKeychain reads a kubernetes.io/dockerconfigjson (or legacy dockercfg) Secret.
func (s *Scanner) secretKeychain(ctx context.Context, ref client.ObjectKey) (authn.Keychain, error) {
	var sec corev1.Secret
	if err := s.APIReader.Get(ctx, ref, &sec); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the Secret %s does not exist", ref)
		}
		return nil, fmt.Errorf("reading Secret %s: %w", ref, err)
	}
	data := sec.Data[corev1.DockerConfigJsonKey]
	if data == nil {
		data = sec.Data[corev1.DockerConfigKey]
	}
	if data == nil {
		return nil, fmt.Errorf("the Secret %s has no %s", ref, corev1.DockerConfigJsonKey)
	}
	return ParseDockerConfig(data)
}

// withCredentials runs call with each of the repository's keychains in turn until
// one is not refused by the registry; the last refusal is returned when all are.
func (s *Scanner) withCredentials(ctx context.Context, repository string, refs []client.ObjectKey, call func(authn.Keychain) error) error {
	kcs, err := s.credentials(ctx, repository, refs)
	if err != nil {
		return err
	}
	for _, kc := range kcs {
		if err = call(kc); err == nil || s.Engine.Reason(err) != ReasonAuthFailed {
			return err
		}
	}
	return err
}

// ReasonAuthFailed is the engine's reason for credentials a registry refused, and
// the reason given when the configured credentials cannot be read.
const ReasonAuthFailed = "AuthFailed"

// errCredentials marks a failure to read the configured credentials Secret.
var errCredentials = errors.New("the configured registry credentials")

// reason is the reason of a resolve or scan error.
func (s *Scanner) reason(err error) string {
	if errors.Is(err, errCredentials) {
		return ReasonAuthFailed
	}
	return s.Engine.Reason(err)
}
