package imagepolicy

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	orderlyadmission "orderly.dev/orderly/internal/admission"
	controller "orderly.dev/orderly/internal/controller/policy/imagepolicy"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/kit"
)

// Pinner pins the tags of matched workloads to digests for the ImagePolicies with
// requireDigest.rewrite, each at controller.MutatePathPrefix + its name. The digest
// is the one the scanner last resolved the tag to, read from the cache: like the
// validating webhook, it never calls a registry in the request.
type Pinner struct {
	// Reader reads ImagePolicies and ImageScans from the cache (with
	// imagescan.TagIndex).
	Reader client.Reader
	// Namespace is the manager's namespace, out of every policy's reach.
	Namespace string
	// Queue asks the scanner to resolve a tag it could not pin (the validating
	// webhook's queue), so that a retry is pinned; nil queues nothing.
	Queue func(ref imagescan.Ref, pullSecrets []client.ObjectKey)
}

// Webhook is the http.Handler to register at controller.MutatePathPrefix.
func (p *Pinner) Webhook() *admission.Webhook {
	return &admission.Webhook{
		Handler: p,
		WithContextFunc: func(ctx context.Context, r *http.Request) context.Context {
			return context.WithValue(ctx, policyNameKey{}, strings.TrimPrefix(r.URL.Path, controller.MutatePathPrefix))
		},
	}
}

// Handle answers with the patch that pins every tag it can.
func (p *Pinner) Handle(ctx context.Context, req admission.Request) admission.Response {
	name, _ := ctx.Value(policyNameKey{}).(string)
	if kit.ProtectedNamespace(req.Namespace, p.Namespace) {
		return admission.Allowed("namespace " + req.Namespace + " is out of every ImagePolicy's reach")
	}
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	var policy policyv1alpha1.ImagePolicy
	if err := p.Reader.Get(ctx, client.ObjectKey{Name: name}, &policy); err != nil {
		if apierrors.IsNotFound(err) {
			return admission.Allowed("ImagePolicy " + name + " no longer exists")
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if !controller.NeedsRewrite(&policy) {
		return admission.Allowed("requireDigest.rewrite is off")
	}
	spec, err := orderlyadmission.PodSpecOf(req.Kind.Kind, req.Object.Raw)
	if err != nil {
		return admission.Errored(http.StatusBadRequest, err)
	}
	lookup := controller.CacheLookup{Ctx: ctx, Reader: p.Reader}
	dryRun := req.DryRun != nil && *req.DryRun
	patches := Pins(req.Kind.Kind, spec, func(repository, tag string) string {
		scan, pending := lookup.ByTag(repository, tag)
		if scan != nil {
			return scan.Spec.Digest
		}
		if pending == nil && p.Queue != nil && !dryRun {
			p.Queue(imagescan.Ref{Image: repository + ":" + tag, Repository: repository, Tag: tag},
				imagescan.PullSecretsFor(req.Namespace, spec.ImagePullSecrets))
		}
		return ""
	})
	if len(patches) == 0 {
		return admission.Allowed("")
	}
	return admission.Patched(fmt.Sprintf("ImagePolicy %s pinned %d image(s) to their digests", policy.Name, len(patches)), patches...)
}

// Pins returns the JSON patch operations that replace each image of spec given by
// tag only with tag@digest, where digestOf knows the tag's digest ("" when it does
// not). spec belongs to an object of kind (see Images), which decides the paths.
func Pins(kind string, spec *corev1.PodSpec, digestOf func(repository, tag string) string) []jsonpatch.JsonPatchOperation {
	base, ok := orderlyadmission.SpecPointer(kind)
	if !ok {
		return nil
	}
	var out []jsonpatch.JsonPatchOperation
	pin := func(field string, i int, image string) {
		ref, err := imagescan.ParseRef(image)
		if err != nil || ref.Digest != "" || ref.Tag == "" {
			return
		}
		if d := digestOf(ref.Repository, ref.Tag); d != "" {
			out = append(out, jsonpatch.NewOperation("replace", fmt.Sprintf("%s/%s/%d/image", base, field, i), image+"@"+d))
		}
	}
	for i, c := range spec.InitContainers {
		pin("initContainers", i, c.Image)
	}
	for i, c := range spec.Containers {
		pin("containers", i, c.Image)
	}
	for i, c := range spec.EphemeralContainers {
		pin("ephemeralContainers", i, c.Image)
	}
	return out
}
