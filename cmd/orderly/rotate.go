package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/controller/secrets/secretrotation"
)

func newRotateCommand() *cobra.Command {
	var kubeconfig, namespace, output string
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
		Example: "  orderly rotate now db-password -n payments\n  orderly rotate now db-password -n payments -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("loading Kubernetes client config: %w", err)
			}
			c, err := clientFor(cfg)
			if err != nil {
				return err
			}
			token, err := secretrotation.RotateNow(cmd.Context(), c, client.ObjectKey{Namespace: namespace, Name: args[0]}, time.Now())
			if err != nil {
				return err
			}
			return writeResult(cmd.OutOrStdout(), output, rotateResult{Namespace: namespace, Name: args[0], RotateNow: token}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "secretrotation/%s: rotation requested (rotateNow=%s)\n", args[0], token)
				return err
			})
		},
	}
	addOutputFlag(now, &output)
	cmd.AddCommand(now)
	return cmd
}
