package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/controller/secrets/secretrotation"
	"orderly.dev/orderly/internal/scheme"
)

func newRotateCommand() *cobra.Command {
	var kubeconfig, namespace string
	cmd := &cobra.Command{
		Use:   "rotate",
		Short: "Act on SecretRotations (secrets.orderly.dev)",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", "default", "the SecretRotation's namespace")
	now := &cobra.Command{
		Use:     "now <secretrotation>",
		Short:   "Rotate a SecretRotation's Secret now (or resume a Held rotation)",
		Long:    "Set spec.rotateNow to a new token: the controller starts one rotation (a Held one resumes its rollout).",
		Example: "  orderly rotate now db-password -n payments",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("loading Kubernetes client config: %w", err)
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
			if err != nil {
				return err
			}
			token, err := secretrotation.RotateNow(cmd.Context(), c, client.ObjectKey{Namespace: namespace, Name: args[0]}, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "secretrotation/%s: rotation requested (rotateNow=%s)\n", args[0], token)
			return nil
		},
	}
	cmd.AddCommand(now)
	return cmd
}
