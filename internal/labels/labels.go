// Package labels holds the labels Orderly puts on everything it creates.
package labels

import "strings"

const (
	// ManagedBy is the standard label naming the tool that manages an object.
	ManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedBy's value on every object Orderly creates.
	ManagedByValue = "orderly"
	// FieldManager is the field manager of every write Orderly makes.
	FieldManager = "orderly"
)

// IsOrderlyKey reports whether a label or annotation key is in one of Orderly's
// domains (orderly.dev/... or <group>.orderly.dev/...): what Orderly alone writes.
func IsOrderlyKey(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	return ok && (prefix == "orderly.dev" || strings.HasSuffix(prefix, ".orderly.dev"))
}
