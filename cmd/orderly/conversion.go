package main

import "os"

// The conversion webhook (internal/webhook/conversion) writes spec.conversion of the
// CRDs of the kinds served in two versions, and of no other CRD.
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;patch,resourceNames=devdatabases.data.orderly.dev;sleepschedules.power.orderly.dev

// servesConversion says whether the manager serves the conversion webhook: when the
// API server can reach it, in a pod (through --webhook-service) or at --webhook-url.
// A manager run from a workstation without --webhook-url serves none; as leader it
// sets the CRDs' strategy None (webhook.RegisterNoConversion), which converts
// correctly while the two versions have the same fields.
func servesConversion(webhookURL string) bool {
	if webhookURL != "" {
		return true
	}
	_, err := os.Stat("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
	return err == nil
}
