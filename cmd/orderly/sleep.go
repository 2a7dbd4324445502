package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/controller/power/sleepschedule"
)

func newSleepCommand() *cobra.Command {
	var kubeconfig string
	cmd := &cobra.Command{
		Use:   "sleep",
		Short: "Act on SleepSchedules (power.orderly.dev)",
	}
	cmd.PersistentFlags().StringVar(&kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, then in-cluster config)")

	var forDuration time.Duration
	var output string // -o of the subcommand that runs: only one does
	wake := &cobra.Command{
		Use:   "wake <schedule>",
		Short: "Wake a SleepSchedule's namespaces now, for a while",
		Long: "Set spec.wakeUntil on a SleepSchedule so that its workloads are awake until now + --for,\n" +
			"whatever its windows and holidays say; the schedule resumes by itself afterwards.",
		Example: "  orderly sleep wake dev-nights --for 2h\n  orderly sleep wake dev-nights --for 30m -o json",
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
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
			return writeResult(cmd.OutOrStdout(), output, wakeResult{SleepSchedule: args[0], WakeUntil: until, For: forDuration.String()}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "sleepschedule/%s awake until %s (%s)\n", args[0], until.Format(time.RFC3339), forDuration)
				return err
			})
		},
	}
	wake.Flags().DurationVar(&forDuration, "for", 2*time.Hour, "how long to stay awake")
	addOutputFlag(wake, &output)

	resume := &cobra.Command{
		Use:   "resume <schedule>",
		Short: "End an on-demand wake: the SleepSchedule follows its windows again",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := sleepClient(kubeconfig)
			if err != nil {
				return err
			}
			if err := sleepschedule.Resume(cmd.Context(), c, args[0]); err != nil {
				return err
			}
			return writeResult(cmd.OutOrStdout(), output, resumeResult{SleepSchedule: args[0], FollowsSchedule: true}, func(w io.Writer) error {
				_, err := fmt.Fprintf(w, "sleepschedule/%s follows its schedule again\n", args[0])
				return err
			})
		},
	}
	addOutputFlag(resume, &output)
	var byNamespace bool
	savings := &cobra.Command{
		Use:   "savings",
		Short: "Show what every SleepSchedule saves now and saved this week",
		Long: "For every SleepSchedule: its state, the workloads it holds asleep, the CPU and memory\n" +
			"requests of the pods not running now, and this week's hours asleep, core-hours and\n" +
			"GiB-hours saved (status.savings; the week starts on Monday 00:00 in the schedule's time zone).\n" +
			"With --by-namespace: the requests saved now, per schedule and namespace (status.savedByNamespace).",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkOutput(output); err != nil {
				return err
			}
			c, err := sleepClient(kubeconfig)
			if err != nil {
				return err
			}
			if output == "text" {
				if byNamespace {
					return sleepschedule.SavingsByNamespace(cmd.Context(), c, cmd.OutOrStdout())
				}
				return sleepschedule.Savings(cmd.Context(), c, cmd.OutOrStdout())
			}
			var list powerv1alpha1.SleepScheduleList
			if err := c.List(cmd.Context(), &list); err != nil {
				return fmt.Errorf("listing SleepSchedules: %w", err)
			}
			return writeResult(cmd.OutOrStdout(), output, newSavingsResult(list.Items), nil)
		},
	}
	addOutputFlag(savings, &output)
	savings.Flags().BoolVar(&byNamespace, "by-namespace", false, "print the requests saved now in each namespace of each schedule (-o json|yaml always carries savedByNamespace)")
	cmd.AddCommand(wake, resume, savings)
	return cmd
}

func sleepClient(kubeconfig string) (client.Client, error) {
	cfg, err := restConfig(kubeconfig)
	if err != nil {
		return nil, fmt.Errorf("loading Kubernetes client config: %w", err)
	}
	return clientFor(cfg)
}
