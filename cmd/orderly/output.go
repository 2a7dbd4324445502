package main

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// The commands that print a result (status and the day-2 verbs) print it for people
// by default and, with -o json or -o yaml, as an object for scripts, so that no script
// parses a sentence. `orderly audit` has formats of its own (table, markdown) and
// renders them in internal/audit.

// outputFormats are what -o takes.
var outputFormats = []string{"text", "json", "yaml"}

// addOutputFlag adds -o/--output, with its completion, to a command that prints a result.
func addOutputFlag(cmd *cobra.Command, output *string) {
	cmd.Flags().StringVarP(output, "output", "o", "text", "output format: "+strings.Join(outputFormats, ", "))
	_ = cmd.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputFormats, cobra.ShellCompDirectiveNoFileComp))
}

// checkOutput refuses an unknown format. Commands call it first, so that a typo in -o
// fails before anything in the cluster is changed.
func checkOutput(output string) error {
	if !slices.Contains(outputFormats, output) {
		return fmt.Errorf("--output must be text, json or yaml, not %q", output)
	}
	return nil
}

// writeResult writes v as indented JSON or as YAML (its JSON field names), or calls
// text for the text format.
func writeResult(w io.Writer, output string, v any, text func(io.Writer) error) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return text(w)
}

// clientFor makes the client of a command; unit tests replace it with a fake one.
var clientFor = func(cfg *rest.Config) (client.Client, error) {
	return client.New(cfg, client.Options{Scheme: scheme.New()})
}

// The machine output of each day-2 verb: what it did, as the text says it.

// wakeResult is `sleep wake`'s: the schedule is awake until WakeUntil.
type wakeResult struct {
	SleepSchedule string    `json:"sleepSchedule"`
	WakeUntil     time.Time `json:"wakeUntil"`
	For           string    `json:"for"`
}

// resumeResult is `sleep resume`'s: the schedule follows its windows again.
type resumeResult struct {
	SleepSchedule   string `json:"sleepSchedule"`
	FollowsSchedule bool   `json:"followsSchedule"`
}

// savingsResult is `sleep savings`'s: every SleepSchedule's figures, from its status.
type savingsResult struct {
	Schedules []scheduleSavings `json:"schedules"`
}

type scheduleSavings struct {
	Name              string              `json:"name"`
	State             string              `json:"state,omitempty"`
	SleepingWorkloads int32               `json:"sleepingWorkloads"`
	SavedRequests     corev1.ResourceList `json:"savedRequests,omitempty"`
	// ThisWeek is status.savings: hours asleep, core-hours and GiB-hours saved since
	// Monday 00:00 in the schedule's time zone.
	ThisWeek *powerv1alpha1.SleepSavings `json:"thisWeek,omitempty"`
	// SavedByNamespace is status.savedByNamespace: the requests saved now per namespace.
	SavedByNamespace []powerv1alpha1.NamespaceSavings `json:"savedByNamespace,omitempty"`
}

func newSavingsResult(schedules []powerv1alpha1.SleepSchedule) savingsResult {
	out := savingsResult{Schedules: []scheduleSavings{}}
	for _, s := range schedules {
		out.Schedules = append(out.Schedules, scheduleSavings{
			Name: s.Name, State: string(s.Status.State), SleepingWorkloads: s.Status.SleepingWorkloads,
			SavedRequests: s.Status.SavedRequests, ThisWeek: s.Status.Savings,
			SavedByNamespace: s.Status.SavedByNamespace,
		})
	}
	slices.SortFunc(out.Schedules, func(a, b scheduleSavings) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// extendResult is `db extend`'s: the DevDatabase's new spec.ttl and the expiry it gives.
type extendResult struct {
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	TTL       string    `json:"ttl"`
	ExpiresAt time.Time `json:"expiresAt"`
	// ServerMissing: its DatabaseServer does not exist, so its maxTTL was not checked.
	ServerMissing bool `json:"serverMissing,omitempty"`
}

// rotateResult is `rotate now`'s: the spec.rotateNow token that requested the rotation.
type rotateResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	RotateNow string `json:"rotateNow"`
}

// canaryResult is `canary promote`'s and `canary abort`'s: the revision acted on,
// and for a promotion the step passed.
type canaryResult struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Action    string `json:"action"` // promote or abort
	Revision  string `json:"revision"`
	Step      *int32 `json:"step,omitempty"`
}
