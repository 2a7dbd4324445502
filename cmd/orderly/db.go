package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
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
	var kubeconfig, namespace string
	var by time.Duration
	cmd := &cobra.Command{
		Use:   "extend NAME --by 24h",
		Short: "Push a DevDatabase's expiry later by raising its spec.ttl",
		Long: "Push a DevDatabase's expiry later by --by, counted from its current expiry (or from now\n" +
			"when it has already expired, which brings a new, empty database). The DatabaseServer's\n" +
			"spec.maxTTL bounds the result.",
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if by <= 0 {
				return fmt.Errorf("--by must be positive, e.g. --by 24h")
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
			c, err := client.New(cfg, client.Options{Scheme: newScheme()})
			if err != nil {
				return err
			}
			expires, err := extendDevDatabase(cmd.Context(), c, client.ObjectKey{Namespace: ns, Name: args[0]}, by, time.Now())
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "devdatabase %s/%s now expires at %s\n", ns, args[0], expires.UTC().Format(time.RFC3339))
			return nil
		},
	}
	f := cmd.Flags()
	f.DurationVar(&by, "by", 24*time.Hour, "how much later the database expires")
	f.StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then ~/.kube/config)")
	f.StringVarP(&namespace, "namespace", "n", "", "namespace of the DevDatabase (default: the kubeconfig context's)")
	return cmd
}

// extendedTTL is the ttl that moves expiry by `by` from the later of the current
// expiry and now.
func extendedTTL(created time.Time, ttl, by time.Duration, now time.Time) time.Duration {
	base := created.Add(ttl)
	if now.After(base) {
		base = now
	}
	return base.Add(by).Sub(created).Round(time.Second)
}

func extendDevDatabase(ctx context.Context, c client.Client, key client.ObjectKey, by time.Duration, now time.Time) (time.Time, error) {
	var d datav1alpha1.DevDatabase
	if err := c.Get(ctx, key, &d); err != nil {
		return time.Time{}, err
	}
	ttl := extendedTTL(d.CreationTimestamp.Time, d.Spec.TTL.Duration, by, now)
	var s datav1alpha1.DatabaseServer
	if err := c.Get(ctx, client.ObjectKey{Name: d.Spec.ServerRef}, &s); err == nil && s.Spec.MaxTTL.Duration > 0 && ttl > s.Spec.MaxTTL.Duration {
		return time.Time{}, fmt.Errorf("a ttl of %s would exceed DatabaseServer %s's maxTTL of %s; the latest possible expiry is %s",
			ttl, s.Name, s.Spec.MaxTTL.Duration, d.CreationTimestamp.Add(s.Spec.MaxTTL.Duration).UTC().Format(time.RFC3339))
	}
	// Optimistic lock: a concurrent extension is not silently overwritten.
	patch := client.MergeFromWithOptions(d.DeepCopy(), client.MergeFromWithOptimisticLock{})
	d.Spec.TTL = metav1.Duration{Duration: ttl}
	if err := c.Patch(ctx, &d, patch); err != nil {
		return time.Time{}, fmt.Errorf("extending DevDatabase %s: %w", key, err)
	}
	return d.CreationTimestamp.Add(ttl), nil
}
