package imagescan

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// Ref is an image reference as a pod or workload names it, normalized.
type Ref struct {
	// Image is the reference as written.
	Image string
	// Repository is registry host and path; Docker Hub's is docker.io (never
	// index.docker.io), with library/ for official images.
	Repository string
	// Tag is the tag, "latest" when neither tag nor digest is given.
	Tag string
	// Digest is sha256:<hex> when the reference names one.
	Digest string
}

// ParseRef normalizes image. "nginx" is docker.io/library/nginx:latest.
func ParseRef(image string) (Ref, error) {
	r, err := name.ParseReference(image, name.WeakValidation)
	if err != nil {
		return Ref{}, fmt.Errorf("image %q: %w", image, err)
	}
	out := Ref{Image: image, Repository: NormalizeRepository(r.Context().Name())}
	switch t := r.(type) {
	case name.Digest:
		out.Digest = t.DigestStr()
		// Registries, the scanner and ImageScan names know sha256 only; another
		// algorithm would make an ImageScan name the API server refuses.
		if !strings.HasPrefix(out.Digest, "sha256:") {
			return Ref{}, fmt.Errorf("image %q: digest %s: only sha256 digests are supported", image, out.Digest)
		}
		// A reference with both keeps its tag for the index; the digest decides.
		if base, _, ok := strings.Cut(image, "@"); ok {
			if tag, err := name.NewTag(base, name.WeakValidation); err == nil && strings.Contains(lastSegment(base), ":") {
				out.Tag = tag.TagStr()
			}
		}
	case name.Tag:
		out.Tag = t.TagStr()
	}
	return out, nil
}

func lastSegment(s string) string {
	if i := strings.LastIndex(s, "/"); i >= 0 {
		return s[i+1:]
	}
	return s
}

// NormalizeRepository writes Docker Hub as docker.io, as people write it in
// allowedRegistries.
func NormalizeRepository(repo string) string {
	if rest, ok := strings.CutPrefix(repo, name.DefaultRegistry+"/"); ok {
		return "docker.io/" + rest
	}
	return repo
}

// Pullable is the reference the scanner pulls: repository@digest, or repository:tag.
// Docker Hub goes back to the name registries answer to.
func (r Ref) Pullable() string {
	repo := r.Repository
	if rest, ok := strings.CutPrefix(repo, "docker.io/"); ok {
		repo = name.DefaultRegistry + "/" + rest
	}
	if r.Digest != "" {
		return repo + "@" + r.Digest
	}
	return repo + ":" + r.Tag
}

// Registry is the registry host (with port) of the repository.
func (r Ref) Registry() string {
	host, _, _ := strings.Cut(r.Repository, "/")
	return host
}

func shortHash(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}

// ScanName is the name of the ImageScan of digest in repository: the digest's first
// 40 hex digits and a hash of the repository, since one digest may be pushed to
// several repositories (with different credentials).
func ScanName(repository, digest string) string {
	hexDigest := strings.TrimPrefix(digest, "sha256:")
	if len(hexDigest) > 40 {
		hexDigest = hexDigest[:40]
	}
	return "sha256-" + hexDigest + "-" + shortHash(repository, 8)
}

// PendingName is the name of the pending ImageScan of a tag admission met before
// any scan knew it.
func PendingName(repository, tag string) string {
	return "pending-" + shortHash(repository+":"+tag, 40)
}

// TagKey is how the tag index names a tag: repository:tag.
func TagKey(repository, tag string) string { return repository + ":" + tag }

// TagIndex is the cache index of ImageScans by the tags seen pointing at them
// (TagKey), and of pending ImageScans by their tag: admission's tag -> digest index.
const TagIndex = "imagescan.policy.orderly.dev/tags"

// IndexTags is the TagIndex function.
func IndexTags(o client.Object) []string {
	s, ok := o.(*policyv1alpha1.ImageScan)
	if !ok {
		return nil
	}
	if s.Spec.Digest == "" {
		return []string{"pending/" + TagKey(s.Spec.Repository, s.Spec.Tag)}
	}
	out := make([]string, 0, len(s.Status.Tags))
	for _, t := range s.Status.Tags {
		out = append(out, TagKey(s.Spec.Repository, t))
	}
	return out
}

// digestFromImageID takes the digest out of a container status's imageID
// ("docker-pullable://repo@sha256:...", "repo@sha256:..." or "sha256:...").
func digestFromImageID(id string) string {
	if i := strings.LastIndex(id, "sha256:"); i >= 0 {
		d := id[i:]
		if len(d) == len("sha256:")+64 {
			return d
		}
	}
	return ""
}

// PodImage is one image a pod uses.
type PodImage struct {
	Ref
	// Container is the container's name.
	Container string
}

// PodImages returns the images of every container of pod (init and ephemeral too),
// with the digest the kubelet reported for a running container whose reference is a
// tag. References that do not parse are returned in bad.
func PodImages(pod *corev1.Pod) (images []PodImage, bad []string) {
	ids := map[string]string{}
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses, pod.Status.EphemeralContainerStatuses} {
		for _, cs := range list {
			if d := digestFromImageID(cs.ImageID); d != "" {
				ids[cs.Name] = d
			}
		}
	}
	add := func(container, image string) {
		r, err := ParseRef(image)
		if err != nil {
			bad = append(bad, image)
			return
		}
		if r.Digest == "" {
			r.Digest = ids[container]
		}
		images = append(images, PodImage{Ref: r, Container: container})
	}
	for _, c := range pod.Spec.InitContainers {
		add(c.Name, c.Image)
	}
	for _, c := range pod.Spec.Containers {
		add(c.Name, c.Image)
	}
	for _, c := range pod.Spec.EphemeralContainers {
		add(c.Name, c.Image)
	}
	return images, bad
}

// WorkloadOf names the pod's workload: its controller (kind and name), else the pod.
func WorkloadOf(pod *corev1.Pod) policyv1alpha1.ImageWorkload {
	for _, o := range pod.OwnerReferences {
		if o.Controller != nil && *o.Controller {
			return policyv1alpha1.ImageWorkload{Namespace: pod.Namespace, Kind: o.Kind, Name: o.Name}
		}
	}
	return policyv1alpha1.ImageWorkload{Namespace: pod.Namespace, Kind: "Pod", Name: pod.Name}
}
