package kit

import (
	"fmt"
	"maps"
	"reflect"
	goruntime "runtime"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheRules say how the manager's shared cache holds the kinds one controller
// reads: by a label, without managed fields, and so on. Kinds not named are cached
// whole.
type CacheRules map[client.Object]cache.ByObject

// MergeCache merges the cache rules of the controllers that run, by kind. The cache
// holds one view of each kind, so two controllers asking for the same kind in
// different ways is an error, found at start-up, that names both.
func MergeCache(scheme *runtime.Scheme, controllers []Controller) (map[client.Object]cache.ByObject, error) {
	type entry struct {
		controller string
		obj        client.Object
		rule       cache.ByObject
	}
	byKind := map[schema.GroupVersionKind]entry{}
	for _, c := range controllers {
		if c.Cache == nil {
			continue
		}
		for obj, rule := range c.Cache() {
			gvks, _, err := scheme.ObjectKinds(obj)
			if err != nil {
				return nil, fmt.Errorf("controller %s caches %T: %w", c.Name, obj, err)
			}
			gvk := gvks[0]
			if prev, ok := byKind[gvk]; ok {
				if describeRule(prev.rule) != describeRule(rule) {
					return nil, fmt.Errorf("controllers %s and %s ask the cache for %s in different ways (%s; %s): give them one rule",
						prev.controller, c.Name, gvk.Kind, describeRule(prev.rule), describeRule(rule))
				}
				continue
			}
			byKind[gvk] = entry{controller: c.Name, obj: obj, rule: rule}
		}
	}
	out := make(map[client.Object]cache.ByObject, len(byKind))
	for _, e := range byKind {
		out[e.obj] = e.rule
	}
	return out, nil
}

// describeRule is a comparable description of a rule. Transforms are compared by the
// function they run.
func describeRule(r cache.ByObject) string {
	var parts []string
	if r.Label != nil {
		parts = append(parts, "label "+r.Label.String())
	}
	if r.Field != nil {
		parts = append(parts, "field "+r.Field.String())
	}
	if r.Namespaces != nil {
		parts = append(parts, "namespaces "+strings.Join(slices.Sorted(maps.Keys(r.Namespaces)), ","))
	}
	if r.Transform != nil {
		parts = append(parts, "transform "+goruntime.FuncForPC(reflect.ValueOf(r.Transform).Pointer()).Name())
	}
	if r.UnsafeDisableDeepCopy != nil && *r.UnsafeDisableDeepCopy {
		parts = append(parts, "no deep copy")
	}
	if len(parts) == 0 {
		return "whole"
	}
	return strings.Join(parts, ", ")
}
