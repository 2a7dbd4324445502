// Package overview gathers one view across Orderly's capabilities for `orderly
// status` (and `kubectl orderly status`): how many objects of each kind there are,
// which of them are not Ready, and what needs a person's attention (a namespace
// asleep, label violations, a database about to expire, a backup that failed its
// verification, a rotation rolled back).
//
// Objects are read as unstructured, by kind, so that the view works against a
// cluster whose CRDs are older or newer than this binary, and skips a kind whose CRD
// is not installed or that the user may not list instead of failing.
package overview

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options narrow what Collect reads.
type Options struct {
	// Namespace limits namespaced kinds to one namespace; empty for all.
	Namespace string
	// ExpiringWithin is how soon a DevDatabase's expiry must be to be reported.
	ExpiringWithin time.Duration
	// Now is the time expiries are measured from.
	Now time.Time
}

// Overview is what Collect found, a section per kind in a fixed order.
type Overview struct {
	Sections []Section `json:"sections"`
}

// Section is one kind.
type Section struct {
	Kind string `json:"kind"`
	// Plural names the kind's objects in the text output.
	Plural string `json:"-"`
	// Unavailable says why the kind was not read ("not installed", "not allowed to
	// list"); empty when it was.
	Unavailable string `json:"unavailable,omitempty"`
	Total       int    `json:"total"`
	NotReady    int    `json:"notReady"`
	// Highlights sums up the kind in a few words, e.g. "2 asleep".
	Highlights []string `json:"highlights,omitempty"`
	// Attention lists the objects that need a look, at most MaxItems.
	Attention []Item `json:"attention,omitempty"`
	// More counts the objects needing attention beyond Attention.
	More int `json:"more,omitempty"`
}

// Item is one object that needs attention, and why.
type Item struct {
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name"`
	Why       string `json:"why"`
}

// MaxItems bounds the objects listed per kind.
const MaxItems = 10

// kind is how one of Orderly's kinds is read and summed up.
type kind struct {
	gvk        schema.GroupVersionKind
	plural     string
	namespaced bool
	// look returns what is worth saying about one object beyond its Ready
	// condition (empty when nothing), and adds to the kind's counters.
	look func(o *unstructured.Unstructured, opts Options, counts map[string]int) string
	// highlights turns the counters into words.
	highlights func(counts map[string]int) []string
}

func gvk(group, k string) schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: group, Version: "v1alpha1", Kind: k}
}

// kinds are Orderly's kinds in the order the overview shows them.
var kinds = []kind{
	{gvk: gvk("tenancy.orderly.dev", "Tenant"), plural: "Tenants",
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			n, _, _ := unstructured.NestedInt64(o.Object, "status", "namespaceCount")
			r, _, _ := unstructured.NestedInt64(o.Object, "status", "readyNamespaces")
			c["namespaces"] += int(n)
			if r < n {
				return fmt.Sprintf("%d of %d namespaces ready", r, n)
			}
			return ""
		},
		highlights: func(c map[string]int) []string { return []string{plural(c["namespaces"], "namespace")} }},
	{gvk: gvk("power.orderly.dev", "SleepSchedule"), plural: "SleepSchedules",
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			state, _, _ := unstructured.NestedString(o.Object, "status", "state")
			if state != "Asleep" {
				return ""
			}
			c["asleep"]++
			n, _, _ := unstructured.NestedInt64(o.Object, "status", "sleepingWorkloads")
			c["workloads"] += int(n)
			if cpu, ok, _ := unstructured.NestedString(o.Object, "status", "savedRequests", "cpu"); ok {
				return fmt.Sprintf("asleep: %s, %s CPU requests saved", plural(int(n), "workload"), cpu)
			}
			return "asleep: " + plural(int(n), "workload")
		},
		highlights: func(c map[string]int) []string {
			return []string{fmt.Sprintf("%d asleep (%s)", c["asleep"], plural(c["workloads"], "workload"))}
		}},
	{gvk: gvk("policy.orderly.dev", "LabelPolicy"), plural: "LabelPolicies",
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			v, _, _ := unstructured.NestedInt64(o.Object, "status", "violations")
			c["violations"] += int(v)
			if v > 0 {
				return plural(int(v), "workload") + " without an allowed label"
			}
			return ""
		},
		highlights: func(c map[string]int) []string { return []string{plural(c["violations"], "violation")} }},
	{gvk: gvk("data.orderly.dev", "DatabaseServer"), plural: "DatabaseServers",
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			// reachable is omitted when false: a server checked at least once that is
			// not reachable.
			reachable, _, _ := unstructured.NestedBool(o.Object, "status", "reachable")
			if _, checked, _ := unstructured.NestedString(o.Object, "status", "lastCheckTime"); checked && !reachable {
				c["unreachable"]++
				return "unreachable"
			}
			return ""
		},
		highlights: func(c map[string]int) []string { return []string{fmt.Sprintf("%d unreachable", c["unreachable"])} }},
	{gvk: gvk("data.orderly.dev", "DevDatabase"), plural: "DevDatabases", namespaced: true,
		look: func(o *unstructured.Unstructured, opts Options, c map[string]int) string {
			s, ok, _ := unstructured.NestedString(o.Object, "status", "expiresAt")
			if !ok {
				return ""
			}
			at, err := time.Parse(time.RFC3339, s)
			if err != nil {
				return ""
			}
			if left := at.Sub(opts.Now); left > 0 && left <= opts.ExpiringWithin {
				c["expiring"]++
				return "expires in " + left.Round(time.Minute).String() + " (orderly db extend)"
			}
			return ""
		},
		highlights: func(c map[string]int) []string { return []string{fmt.Sprintf("%d expiring soon", c["expiring"])} }},
	{gvk: gvk("data.orderly.dev", "BackupVerification"), plural: "BackupVerifications", namespaced: true,
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			n, _, _ := unstructured.NestedInt64(o.Object, "status", "consecutiveFailures")
			if n == 0 {
				return ""
			}
			c["failing"]++
			return fmt.Sprintf("the last %s did not pass", plural(int(n), "run"))
		},
		highlights: func(c map[string]int) []string { return []string{fmt.Sprintf("%d failing", c["failing"])} }},
	{gvk: gvk("secrets.orderly.dev", "SecretRotation"), plural: "SecretRotations", namespaced: true,
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
			switch phase {
			case "", "Done":
				return ""
			case "RolledBack", "Held":
				c["attention"]++
				return "last rotation " + phase
			}
			c["inFlight"]++
			return "rotating: " + phase
		},
		highlights: func(c map[string]int) []string {
			return []string{fmt.Sprintf("%d rotating", c["inFlight"]), fmt.Sprintf("%d rolled back or held", c["attention"])}
		}},
	{gvk: gvk("delivery.orderly.dev", "Canary"), plural: "Canaries", namespaced: true,
		look: func(o *unstructured.Unstructured, _ Options, c map[string]int) string {
			phase, _, _ := unstructured.NestedString(o.Object, "status", "phase")
			switch phase {
			case "Progressing", "Paused", "Holding", "Promoting":
				c["analysing"]++
				w, _, _ := unstructured.NestedInt64(o.Object, "status", "canaryWeight")
				return fmt.Sprintf("%s at %d%% canary traffic", phase, w)
			case "RolledBack":
				c["rolledBack"]++
				return "rolled back"
			}
			return ""
		},
		highlights: func(c map[string]int) []string {
			return []string{fmt.Sprintf("%d in analysis", c["analysing"]), fmt.Sprintf("%d rolled back", c["rolledBack"])}
		}},
}

// Collect reads every kind and sums it up. Errors other than a kind that is not
// installed or not allowed end it.
func Collect(ctx context.Context, c client.Client, opts Options) (Overview, error) {
	var ov Overview
	for _, k := range kinds {
		s, err := collect(ctx, c, k, opts)
		if err != nil {
			return Overview{}, err
		}
		ov.Sections = append(ov.Sections, s)
	}
	return ov, nil
}

func collect(ctx context.Context, c client.Client, k kind, opts Options) (Section, error) {
	s := Section{Kind: k.gvk.Kind, Plural: k.plural}
	list := &unstructured.UnstructuredList{}
	list.SetGroupVersionKind(k.gvk.GroupVersion().WithKind(k.gvk.Kind + "List"))
	var listOpts []client.ListOption
	if k.namespaced && opts.Namespace != "" {
		listOpts = append(listOpts, client.InNamespace(opts.Namespace))
	}
	err := c.List(ctx, list, listOpts...)
	switch {
	case meta.IsNoMatchError(err) || apierrors.IsNotFound(err):
		s.Unavailable = "not installed"
		return s, nil
	case apierrors.IsForbidden(err):
		s.Unavailable = "not allowed to list"
		return s, nil
	case err != nil:
		return Section{}, fmt.Errorf("listing %ss: %w", k.gvk.Kind, err)
	}
	counts := map[string]int{}
	sort.Slice(list.Items, func(i, j int) bool {
		a, b := list.Items[i], list.Items[j]
		if a.GetNamespace() != b.GetNamespace() {
			return a.GetNamespace() < b.GetNamespace()
		}
		return a.GetName() < b.GetName()
	})
	for i := range list.Items {
		o := &list.Items[i]
		s.Total++
		var why []string
		if msg, notReady := readiness(o); notReady {
			s.NotReady++
			why = append(why, msg)
		}
		if w := k.look(o, opts, counts); w != "" {
			why = append(why, w)
		}
		if len(why) == 0 {
			continue
		}
		if len(s.Attention) == MaxItems {
			s.More++
			continue
		}
		s.Attention = append(s.Attention, Item{Namespace: o.GetNamespace(), Name: o.GetName(), Why: strings.Join(why, "; ")})
	}
	if s.Total > 0 {
		s.Highlights = k.highlights(counts)
	}
	return s, nil
}

// readiness says whether o's Ready condition is other than True, and how: its
// reason and message, or that it has none yet.
func readiness(o *unstructured.Unstructured) (string, bool) {
	conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		if m["status"] == "True" {
			return "", false
		}
		msg := fmt.Sprintf("not ready (%v)", m["reason"])
		if text, _ := m["message"].(string); text != "" {
			msg += ": " + shorten(text, 120)
		}
		return msg, true
	}
	return "not ready (no Ready condition yet)", true
}

// shorten cuts s to at most n runes, marking the cut.
func shorten(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return fmt.Sprintf("%d %ss", n, word)
}

// ErrNothingInstalled is returned by Collect's callers when no kind is installed.
var ErrNothingInstalled = errors.New("none of Orderly's CRDs is installed in this cluster (install them first: docs/install.md)")

// Installed is true when at least one kind could be read.
func (ov Overview) Installed() bool {
	for _, s := range ov.Sections {
		if s.Unavailable != "not installed" {
			return true
		}
	}
	return false
}

// Text writes the overview for a person: a line per kind, then the objects that
// need attention under it.
func (ov Overview) Text() string {
	var b strings.Builder
	for _, s := range ov.Sections {
		if s.Unavailable != "" {
			fmt.Fprintf(&b, "%s: %s\n", s.Plural, s.Unavailable)
			continue
		}
		parts := []string{fmt.Sprintf("%d", s.Total)}
		if s.NotReady > 0 {
			parts = append(parts, fmt.Sprintf("%d not ready", s.NotReady))
		}
		parts = append(parts, s.Highlights...)
		fmt.Fprintf(&b, "%s: %s\n", s.Plural, strings.Join(parts, ", "))
		for _, it := range s.Attention {
			name := it.Name
			if it.Namespace != "" {
				name = it.Namespace + "/" + it.Name
			}
			fmt.Fprintf(&b, "  %s: %s\n", name, it.Why)
		}
		if s.More > 0 {
			fmt.Fprintf(&b, "  ... and %d more\n", s.More)
		}
	}
	return b.String()
}
