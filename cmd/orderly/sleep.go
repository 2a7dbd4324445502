package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func newSleepCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "sleep",
		Short: "Act on SleepSchedules (power.orderly.dev)",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")

	var forDuration time.Duration
	wake := &cobra.Command{
		Use:   "wake <schedule>",
		Short: "Wake a SleepSchedule's namespaces now, for a while",
		Long: "Set spec.wakeUntil on a SleepSchedule so that its workloads are awake until now + --for,\n" +
			"whatever its windows and holidays say; the schedule resumes by itself afterwards.",
		Example: "  orderly sleep wake dev-nights --for 2h",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if forDuration <= 0 {
				return fmt.Errorf("--for must be a positive duration such as 30m or 2h")
			}
			until := time.Now().Add(forDuration).UTC().Truncate(time.Second)
			if err := setWakeUntil(cmd.Context(), kubeconfig, args[0], &until); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sleepschedule/%s awake until %s (%s)\n", args[0], until.Format(time.RFC3339), forDuration)
			return nil
		},
	}
	wake.Flags().DurationVar(&forDuration, "for", 2*time.Hour, "how long to stay awake")

	resume := &cobra.Command{
		Use:   "resume <schedule>",
		Short: "End an on-demand wake: the SleepSchedule follows its windows again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := setWakeUntil(cmd.Context(), kubeconfig, args[0], nil); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sleepschedule/%s follows its schedule again\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(wake, resume)
	return cmd
}

// setWakeUntil patches spec.wakeUntil (nil removes it) of the named SleepSchedule.
func setWakeUntil(ctx context.Context, kubeconfig, name string, until *time.Time) error {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return fmt.Errorf("loading Kubernetes client config: %w", err)
	}
	c, err := client.New(cfg, client.Options{Scheme: newScheme()})
	if err != nil {
		return err
	}
	var value any
	if until != nil {
		value = metav1.NewTime(*until)
	}
	body, err := json.Marshal(map[string]any{"spec": map[string]any{"wakeUntil": value}})
	if err != nil {
		return err
	}
	s := &powerv1alpha1.SleepSchedule{}
	s.Name = name
	if err := c.Patch(ctx, s, client.RawPatch(types.MergePatchType, body)); err != nil {
		return fmt.Errorf("setting spec.wakeUntil of SleepSchedule %q: %w", name, err)
	}
	return nil
}
