package audit

import (
	"fmt"
	"regexp"
	"strings"
)

// imageTag returns the tag and the digest of an image reference (each may be empty).
func imageTag(image string) (tag, digest string) {
	repo, digest, _ := strings.Cut(image, "@")
	// A colon after the last slash starts the tag; one before it is a registry's port.
	if i := strings.LastIndex(repo, ":"); i > strings.LastIndex(repo, "/") {
		tag = repo[i+1:]
	}
	return tag, digest
}

// releaseTag matches tags that name a release: 1.30.0, v1.21.2, 1.2.0-kafka-4.3.1, v0.3.
var releaseTag = regexp.MustCompile(`^v?[0-9]+(\.[0-9]+)+([-+._][0-9A-Za-z][0-9A-Za-z.+_-]*)?$`)

// helmChart is the helm.sh/chart label's value, <chart>-<version>.
var helmChart = regexp.MustCompile(`-(v?[0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+-]*)$`)

// versionOf says which release the workload runs, and from what: the tag of its
// first container's image when it names a release, else its
// app.kubernetes.io/version label, else the version of the Helm chart that
// installed it.
func versionOf(w workload) (version, evidence string) {
	if cs := w.template.Spec.Containers; len(cs) > 0 {
		if tag, _ := imageTag(cs[0].Image); releaseTag.MatchString(tag) {
			return strings.TrimPrefix(tag, "v"), fmt.Sprintf("image %s of container %s", cs[0].Image, cs[0].Name)
		}
	}
	for _, l := range []map[string]string{w.labels, w.template.Labels} {
		if v := l["app.kubernetes.io/version"]; v != "" {
			return strings.TrimPrefix(v, "v"), "label app.kubernetes.io/version=" + v
		}
	}
	for _, l := range []map[string]string{w.labels, w.template.Labels} {
		if m := helmChart.FindStringSubmatch(l["helm.sh/chart"]); m != nil {
			return strings.TrimPrefix(m[1], "v"), "label helm.sh/chart=" + l["helm.sh/chart"]
		}
	}
	return "", ""
}

// maintenanceFindings grade what a cluster shows of an operator's maintenance: that
// it says which release it runs, and that its images are pinned to one. Whether the
// project still releases is not in the cluster; the version is shown so that a
// person can look.
func maintenanceFindings(w workload) []Finding {
	f := func(check, result string, penalty int, evidence []string, format string, args ...any) Finding {
		return Finding{Category: CategoryMaintenance, Check: check, Result: result, Penalty: penalty, Message: fmt.Sprintf(format, args...), Evidence: evidence}
	}
	var out []Finding
	if v, from := versionOf(w); v != "" {
		out = append(out, f("maintenance.version", Pass, 0, []string{from}, "runs release %s (%s)", v, from))
	} else {
		out = append(out, f("maintenance.version", Fail, 10, nil, "no release version: no image tag names one, and no app.kubernetes.io/version or helm.sh/chart label; nobody can tell which release runs, nor whether it is still supported"))
	}
	var latest, moving, ok []string
	for _, c := range w.template.Spec.Containers {
		tag, digest := imageTag(c.Image)
		img := c.Name + " (" + c.Image + ")"
		switch {
		case digest != "" || releaseTag.MatchString(tag):
			ok = append(ok, img)
		case tag == "" || tag == "latest":
			latest = append(latest, img)
		default: // main, dev, nightly, a branch's or a build's name
			moving = append(moving, img)
		}
	}
	switch {
	case len(latest) > 0:
		out = append(out, f("maintenance.image-tag", Fail, 25, latest,
			"image by :latest (or no tag) for container %s: each pod runs whatever the tag pointed at when it started, so replicas may differ and a restart upgrades it without review", strings.Join(latest, ", ")))
	case len(moving) > 0:
		out = append(out, f("maintenance.image-tag", Fail, 10, moving,
			"image by a tag that names no release (a branch's or a build's) for container %s: which release runs cannot be told from the cluster", strings.Join(moving, ", ")))
	default:
		out = append(out, f("maintenance.image-tag", Pass, 0, ok, "every image pinned to a release tag or a digest"))
	}
	return out
}
