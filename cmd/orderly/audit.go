package main

import (
	"fmt"
	"slices"
	"strings"
	"time"

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
			"CRDs are grouped by API group, the Deployment or StatefulSet that controls each kind is found\n" +
			"through its ServiceAccount's RBAC (and every workload holding cluster-admin is graded too), and\n" +
			"each is graded A to F, with the checklist's questions answered from the evidence and every\n" +
			"finding's reason. Only reads the cluster. Exits 0 whatever the grades; non-zero only when the\n" +
			"audit cannot run or --group names a group that has no CRD. A namespaced list it may not make\n" +
			"leaves the checks that needed it unknown, naming the permission that would answer them.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !slices.Contains(audit.Formats, output) {
				return fmt.Errorf("--output %q: one of %s", output, strings.Join(audit.Formats, ", "))
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("loading Kubernetes client config: %w", err)
			}
			start := time.Now()
			snap, err := audit.Read(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			if err := audit.MissingGroups(snap, groups); err != nil {
				return err
			}
			report := audit.Audit(snap, audit.Options{Groups: groups})
			report.Stats.Seconds = time.Since(start).Seconds()
			return audit.Render(cmd.OutOrStdout(), report, output)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")
	f.StringVarP(&output, "output", "o", "table", "output format: "+strings.Join(audit.Formats, ", "))
	f.StringSliceVar(&groups, "group", nil, "report only these API groups (and the operators that control them; grades stay those of the whole cluster); repeat or separate with commas")
	return cmd
}
