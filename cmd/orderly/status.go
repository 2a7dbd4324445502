package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"orderly.dev/orderly/internal/overview"
)

func newStatusCommand() *cobra.Command {
	var kubeconfig, namespace, output string
	var expiring time.Duration
	cmd := &cobra.Command{
		Use:   "status",
		Short: "One overview across Orderly's capabilities: what is not Ready, asleep, in violation, expiring or rolling",
		Long: "Lists each of Orderly's kinds with how many objects there are and how many are not Ready,\n" +
			"then the objects that need a look: namespaces asleep, label violations, databases expiring\n" +
			"soon, unreachable database servers, backups failing verification, rotations in flight\n" +
			"or rolled back, canaries in analysis or rolled back. A kind whose CRD is not installed, or that you may not list, is\n" +
			"said to be so rather than failing the command.",
		Example: "  orderly status\n  kubectl orderly status -n payments -o yaml",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
			ov, err := overview.Collect(cmd.Context(), c, overview.Options{Namespace: namespace, ExpiringWithin: expiring, Now: time.Now()})
			if err != nil {
				return err
			}
			if !ov.Installed() {
				return overview.ErrNothingInstalled
			}
			return writeResult(cmd.OutOrStdout(), output, ov, func(w io.Writer) error {
				_, err := fmt.Fprint(w, ov.Text())
				return err
			})
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config)")
	f.StringVarP(&namespace, "namespace", "n", "", "only this namespace's namespaced objects (default: every namespace you may list)")
	f.DurationVar(&expiring, "expiring-within", 24*time.Hour, "report DevDatabases that expire within this time")
	addOutputFlag(cmd, &output)
	return cmd
}
