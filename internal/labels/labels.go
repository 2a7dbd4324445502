// Package labels holds the labels Orderly puts on everything it creates.
package labels

const (
	// ManagedBy is the standard label naming the tool that manages an object.
	ManagedBy = "app.kubernetes.io/managed-by"
	// ManagedByValue is ManagedBy's value on every object Orderly creates.
	ManagedByValue = "orderly"
	// FieldManager is the field manager of every write Orderly makes.
	FieldManager = "orderly"
)
