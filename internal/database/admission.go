package database

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// This file is the one rule that decides which namespaces' objects may use a
// DatabaseServer: DevDatabases, BackupVerifications and SecretRotations' postgresRole
// generators all call AdmitNamespace before they touch the server.

// ErrNamespaceNotAllowed: objects in the namespace may not use the DatabaseServer.
// The namespace is protected, or the server's allowedNamespaces does not select it
// (or is not a valid selector). Not retried: a change of the server or of the
// namespace's labels brings the next attempt.
var ErrNamespaceNotAllowed = errors.New("namespace not allowed")

// CheckNamespace refuses the protected namespaces (kube-* and the manager's own,
// kit.ProtectedNamespace) for every kind that uses a DatabaseServer, whatever the
// server allows. No DatabaseServer makes an exception: its allowedNamespaces is a
// label selector, which cannot tell "kube-system, on purpose" from "every namespace"
// (an empty selector, or a label every namespace has), and nothing in those
// namespaces needs a database made by Orderly (the manager's namespace holds the
// servers' admin credentials; connection Secrets there would sit beside them).
func CheckNamespace(namespace, managerNamespace string) error {
	if kit.ProtectedNamespace(namespace, managerNamespace) {
		return SafeError(fmt.Sprintf("namespace %s is protected (kube-* and Orderly's own namespace): no DatabaseServer serves objects there", namespace), ErrNamespaceNotAllowed)
	}
	return nil
}

// AdmitNamespace says whether objects in namespace may use DatabaseServer s: the
// namespace is not protected (CheckNamespace), and s's allowedNamespaces, when set,
// selects it. A refusal wraps ErrNamespaceNotAllowed, with a message the namespace's
// users can act on; any other error is a failure to read the namespace, to retry.
//
// The namespace is read with reader, which should be the manager's API reader, not
// the cache: this is an access decision, and a label the platform team removes to
// take a namespace's access away must count from the next reconcile, not from when
// the cache catches up; and the three controllers that call it need one namespace
// at a time, rarely (only for a server that sets allowedNamespaces, and only when
// about to act on it), which does not warrant a watch on every namespace of the
// cluster.
func AdmitNamespace(ctx context.Context, reader client.Reader, s *datav1alpha1.DatabaseServer, namespace, managerNamespace string) error {
	if err := CheckNamespace(namespace, managerNamespace); err != nil {
		return err
	}
	sel := s.Spec.AllowedNamespaces
	if sel == nil {
		return nil
	}
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return SafeError(fmt.Sprintf("DatabaseServer %s has an invalid allowedNamespaces: %v", s.Name, err), ErrNamespaceNotAllowed)
	}
	var ns corev1.Namespace
	if err := reader.Get(ctx, client.ObjectKey{Name: namespace}, &ns); err != nil {
		return fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if !selector.Matches(k8slabels.Set(ns.Labels)) {
		return SafeError(fmt.Sprintf("DatabaseServer %s does not allow namespace %s (allowedNamespaces: %s)", s.Name, namespace, selector), ErrNamespaceNotAllowed)
	}
	return nil
}
