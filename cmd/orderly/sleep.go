package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/controller/power/sleepschedule"
	"orderly.dev/orderly/internal/scheme"
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
			c, err := sleepClient(kubeconfig)
			if err != nil {
				return err
			}
			until, err := sleepschedule.WakeFor(cmd.Context(), c, args[0], time.Now(), forDuration)
			if err != nil {
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
			c, err := sleepClient(kubeconfig)
			if err != nil {
				return err
			}
			if err := sleepschedule.Resume(cmd.Context(), c, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "sleepschedule/%s follows its schedule again\n", args[0])
			return nil
		},
	}
	savings := &cobra.Command{
		Use:   "savings",
		Short: "Show what every SleepSchedule saves now and saved this week",
		Long: "For every SleepSchedule: its state, the workloads it holds asleep, the CPU and memory\n" +
			"requests of the pods not running now, and this week's hours asleep, core-hours and\n" +
			"GiB-hours saved (status.savings; the week starts on Monday 00:00 in the schedule's time zone).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := sleepClient(kubeconfig)
			if err != nil {
				return err
			}
			return sleepschedule.Savings(cmd.Context(), c, cmd.OutOrStdout())
		},
	}
	cmd.AddCommand(wake, resume, savings)
	return cmd
}

func sleepClient(kubeconfig string) (client.Client, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client config: %w", err)
	}
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}
