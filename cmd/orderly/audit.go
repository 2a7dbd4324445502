package main

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"orderly.dev/orderly/internal/audit"
)

func newAuditCommand() *cobra.Command {
	var (
		kubeconfig, output string
		groups             []string
	)
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "Grade the operators installed in a cluster: API maturity, RBAC breadth, availability, observability",
		Long: "Grade every operator installed in the cluster against an adoption checklist (docs/audit.md):\n" +
			"CRDs are grouped by API group, the Deployment or StatefulSet that controls each group is\n" +
			"found through its ServiceAccount's RBAC, and each is graded A to F with every finding's reason.\n" +
			"Only reads the cluster. Exits 0 whatever the grades; non-zero only when the audit cannot run.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(audit.Formats, output) {
				return fmt.Errorf("--output %q: one of %s", output, strings.Join(audit.Formats, ", "))
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("loading Kubernetes client config: %w", err)
			}
			snap, err := audit.Read(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			return audit.Render(cmd.OutOrStdout(), audit.Audit(snap, audit.Options{Groups: groups}), output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")
	f.StringVarP(&output, "output", "o", "table", "output format: "+strings.Join(audit.Formats, ", "))
	f.StringSliceVar(&groups, "group", nil, "audit only these API groups (and the operators that control them); repeat or separate with commas")
	return cmd
}
