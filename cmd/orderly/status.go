package main

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"orderly.dev/orderly/internal/overview"
	"orderly.dev/orderly/internal/scheme"
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
			if output != "text" && output != "json" && output != "yaml" {
				return fmt.Errorf("--output must be text, json or yaml, not %q", output)
			}
			cfg, err := restConfig(kubeconfig)
			if err != nil {
				return fmt.Errorf("loading Kubernetes client config: %w", err)
			}
			c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
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
			switch output {
			case "json":
				b, err := json.MarshalIndent(ov, "", "  ")
				if err != nil {
					return err
				}
				_, err = fmt.Fprintln(cmd.OutOrStdout(), string(b))
				return err
			case "yaml":
				b, err := yaml.Marshal(ov)
				if err != nil {
					return err
				}
				_, err = cmd.OutOrStdout().Write(b)
				return err
			}
			_, err = fmt.Fprint(cmd.OutOrStdout(), ov.Text())
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then ~/.kube/config, then in-cluster config)")
	f.StringVarP(&namespace, "namespace", "n", "", "only this namespace's namespaced objects (default: every namespace you may list)")
	f.StringVarP(&output, "output", "o", "text", "output format: text, json or yaml")
	f.DurationVar(&expiring, "expiring-within", 24*time.Hour, "report DevDatabases that expire within this time")
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions([]string{"text", "json", "yaml"}, cobra.ShellCompDirectiveNoFileComp))
	return cmd
}
