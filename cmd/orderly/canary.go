package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/controller/delivery/canary"
)

func newCanaryCommand() *cobra.Command {
	var kubeconfig, namespace, output string
	cmd := &cobra.Command{
		Use:   "canary",
		Short: "Act on Canaries (delivery.orderly.dev)",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")
	cmd.PersistentFlags().StringVarP(&namespace, "namespace", "n", "", "the Canary's namespace (default: the kubeconfig context's, else default)")

	connect := func() (client.Client, string, error) {
		cfg, err := restConfig(kubeconfig)
		if err != nil {
			return nil, "", fmt.Errorf("loading Kubernetes client config: %w", err)
		}
		c, err := clientFor(cfg)
		if err != nil {
			return nil, "", err
		}
		ns := namespace
		if ns == "" {
			rules := clientcmd.NewDefaultClientConfigLoadingRules()
			rules.ExplicitPath = kubeconfig
			if n, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).Namespace(); err == nil && n != "" {
				ns = n
			} else {
				ns = "default"
			}
		}
		return c, ns, nil
	}

	promote := &cobra.Command{
		Use:   "promote <canary>",
		Short: "Pass the step a Canary is at: a pause, a step paused as inconclusive, or a weight step before its analysis",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, ns, err := connect()
			if err != nil {
				return err
			}
			cn, err := canary.Promote(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]})
			if err != nil {
				return err
			}
			res := canaryResult{Namespace: ns, Name: args[0], Action: "promote", Revision: cn.Status.Revision, Step: &cn.Status.CurrentStep}
			return writeResult(cmd.OutOrStdout(), output, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "canary/%s: step %d of revision %s promoted\n", args[0], cn.Status.CurrentStep, cn.Status.Revision)
				return err
			})
		},
	}
	addOutputFlag(promote, &output)
	abort := &cobra.Command{
		Use:   "abort <canary>",
		Short: "Roll back the revision a Canary is analysing, now",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, ns, err := connect()
			if err != nil {
				return err
			}
			cn, err := canary.Abort(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]})
			if err != nil {
				return err
			}
			res := canaryResult{Namespace: ns, Name: args[0], Action: "abort", Revision: cn.Status.Revision}
			return writeResult(cmd.OutOrStdout(), output, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "canary/%s: revision %s is being rolled back\n", args[0], cn.Status.Revision)
				return err
			})
		},
	}
	addOutputFlag(abort, &output)
	status := &cobra.Command{
		Use:   "status <canary>",
		Short: "Show where a Canary stands and its last decisions, with each metric's statistics",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, ns, err := connect()
			if err != nil {
				return err
			}
			text, err := canary.Describe(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]})
			if err != nil {
				return err
			}
			fmt.Fprint(cmd.OutOrStdout(), text)
			return nil
		},
	}
	cmd.AddCommand(promote, abort, status)
	return cmd
}
