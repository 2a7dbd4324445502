package servicedomain

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// A hostname is claimed by creating the cluster-scoped HostnameClaim named after it:
// the API server lets one create succeed, so the first ServiceDomain wins even when
// two are reconciled at once (by this manager or, after a failover, another), and the
// claim outlives restarts. A claim whose ServiceDomain is gone (deleted while the
// manager was down, without its finalizer running) is stale and is taken over.

// claim makes sure sd holds its hostname; false with obs blocked when another
// ServiceDomain does.
func (r *Reconciler) claim(ctx context.Context, sd *networkv1alpha1.ServiceDomain, obs *observation) (bool, error) {
	// The cache answers first (every claim is Orderly's, so it holds them all): a
	// claim it shows as sd's own is taken as held, and a missing one is created (the
	// API server refuses a second). Anything else is read again from the API server.
	for attempt := range 4 {
		reader := r.APIReader
		if attempt == 0 {
			reader = r.Client
		}
		var c networkv1alpha1.HostnameClaim
		err := reader.Get(ctx, client.ObjectKey{Name: sd.Spec.Hostname}, &c)
		switch {
		case apierrors.IsNotFound(err):
			c = networkv1alpha1.HostnameClaim{
				ObjectMeta: metav1.ObjectMeta{Name: sd.Spec.Hostname, Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}},
				Spec: networkv1alpha1.HostnameClaimSpec{Hostname: sd.Spec.Hostname, Holder: networkv1alpha1.ClaimHolder{
					Namespace: sd.Namespace, Name: sd.Name, UID: string(sd.UID),
				}},
			}
			err := r.Create(ctx, &c)
			if apierrors.IsAlreadyExists(err) {
				continue // someone else was first: look at theirs
			}
			if err != nil {
				obs.block("ClaimFailed", fmt.Sprintf("Claiming %s failed: %v", sd.Spec.Hostname, err))
				return false, err
			}
			return true, nil
		case err != nil:
			obs.block("ClaimFailed", fmt.Sprintf("Reading the claim on %s failed: %v", sd.Spec.Hostname, err))
			return false, err
		}
		h := c.Spec.Holder
		if h.UID == string(sd.UID) {
			return true, nil
		}
		if attempt == 0 {
			continue // another holder, seen in the cache: read it again from the API server
		}
		stale, err := r.holderGone(ctx, h)
		if err != nil {
			obs.block("ClaimFailed", fmt.Sprintf("Reading the holder of %s failed: %v", sd.Spec.Hostname, err))
			return false, err
		}
		if !stale {
			obs.block("Conflict", fmt.Sprintf("%s is already claimed by ServiceDomain %s/%s; nothing was written for this one. Pick another hostname, or delete that ServiceDomain", sd.Spec.Hostname, h.Namespace, h.Name))
			return false, nil
		}
		// Only this very claim is deleted: a claim made meanwhile by another holder is not.
		uid := c.UID
		if err := r.Delete(ctx, &c, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			obs.block("ClaimFailed", fmt.Sprintf("Removing the stale claim on %s failed: %v", sd.Spec.Hostname, err))
			return false, err
		}
	}
	obs.block("ClaimFailed", fmt.Sprintf("The claim on %s kept changing; trying again", sd.Spec.Hostname))
	return false, fmt.Errorf("the claim on %s kept changing", sd.Spec.Hostname)
}

// holderGone is true when the ServiceDomain a claim names no longer exists (or
// another of that name replaced it).
func (r *Reconciler) holderGone(ctx context.Context, h networkv1alpha1.ClaimHolder) (bool, error) {
	var other networkv1alpha1.ServiceDomain
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: h.Namespace, Name: h.Name}, &other)
	switch {
	case apierrors.IsNotFound(err):
		return true, nil
	case err != nil:
		return false, err
	}
	return string(other.UID) != h.UID, nil
}

// holds is true when sd holds the claim on its hostname.
func (r *Reconciler) holds(ctx context.Context, sd *networkv1alpha1.ServiceDomain) (*networkv1alpha1.HostnameClaim, error) {
	var c networkv1alpha1.HostnameClaim
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: sd.Spec.Hostname}, &c); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	if c.Spec.Holder.UID != string(sd.UID) {
		return nil, nil
	}
	return &c, nil
}

// release deletes sd's claim, only that very object.
func (r *Reconciler) release(ctx context.Context, c *networkv1alpha1.HostnameClaim) error {
	uid := c.UID
	if err := r.Delete(ctx, c, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("releasing the claim on %s: %w", c.Name, err)
	}
	return nil
}
