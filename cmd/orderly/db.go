package main

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/controller/data/devdatabase"
)

func newDBCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "db",
		Short: "Work with DevDatabases",
	}
	cmd.AddCommand(newDBExtendCommand())
	return cmd
}

func newDBExtendCommand() *cobra.Command {
	var kubeconfig, namespace, output string
	var by time.Duration
	cmd := &cobra.Command{
		Use:   "extend NAME --by 24h",
		Short: "Push a DevDatabase's expiry later by raising its spec.ttl",
		Long: "Push a DevDatabase's expiry later by --by, counted from its current expiry (or from now\n" +
			"when it has already expired, which brings a new, empty database). The DatabaseServer's\n" +
			"spec.maxTTL bounds the result, so reading the DatabaseServer must be allowed.",
		Example: "  orderly db extend app --by 24h -n payments\n  orderly db extend app --by 2h -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			if by <= 0 {
				return errors.New("--by must be positive, e.g. --by 24h")
			}
			loading := clientcmd.NewDefaultClientConfigLoadingRules()
			loading.ExplicitPath = kubeconfig
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, &clientcmd.ConfigOverrides{Context: clientcmdapi.Context{Namespace: namespace}})
			cfg, err := cc.ClientConfig()
			if err != nil {
				return fmt.Errorf("loading Kubernetes client config: %w", err)
			}
			ns, _, err := cc.Namespace()
			if err != nil {
				return err
			}
			c, err := clientFor(cfg)
			if err != nil {
				return err
			}
			ext, err := devdatabase.Extend(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]}, by, time.Now())
			if err != nil {
				return err
			}
			if ext.ServerMissing {
				fmt.Fprintln(cmd.ErrOrStderr(), "warning: its DatabaseServer does not exist, so its maxTTL was not checked")
			}
			res := extendResult{Namespace: ns, Name: args[0], TTL: ext.TTL.String(), ExpiresAt: ext.ExpiresAt.UTC(), ServerMissing: ext.ServerMissing}
			return writeResult(cmd.OutOrStdout(), output, res, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "devdatabase %s/%s now expires at %s\n", ns, args[0], ext.ExpiresAt.UTC().Format(time.RFC3339))
				return err
			})
		},
	}
	addOutputFlag(cmd, &output)
	f := cmd.Flags()
	f.DurationVar(&by, "by", 24*time.Hour, "how much later the database expires")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the DevDatabase (default: the kubeconfig context's)")
	return cmd
}
