// Package labelpolicy implements the LabelPolicy controller: it compiles each policy
// into the API server's own admission (ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy with bindings) or, where MutatingAdmissionPolicy is not
// served, a MutatingWebhookConfiguration for Orderly's webhook (internal/webhook/labelpolicy,
// which runs Mutate, the Go twin of the mutating policy); keeps those objects as
// compiled; and audits (and optionally labels) the workloads that already run.
package labelpolicy
