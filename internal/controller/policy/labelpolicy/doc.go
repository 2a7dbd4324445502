// Package labelpolicy implements the LabelPolicy controller: it compiles each policy
// into the API server's own admission (ValidatingAdmissionPolicy and
// MutatingAdmissionPolicy with bindings), keeps those objects as compiled, and audits
// (and optionally labels) the workloads that already run.
package labelpolicy
