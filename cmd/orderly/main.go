// Command orderly is the only binary of the project: the manager that hosts every
// controller, and the developer tooling that runs a local control plane.
package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"orderly.dev/orderly/internal/version"
)

func main() {
	if err := newRootCommand().Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:   "orderly",
		Short: "Orderly turns platform runbooks into Kubernetes reconcile loops",
		Long: "Orderly is a suite of Kubernetes controllers that automate the chores platform teams\n" +
			"repeat by hand: onboarding tenants, power saving, cost labels, test databases and more.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(newManagerCommand(), newVersionCommand(), newDevCommand(), newSleepCommand(), newDBCommand(), newCanaryCommand(), newRotateCommand())
	root.AddCommand(newAuditCommand(), newStatusCommand())
	// Run as the kubectl plugin kubectl-orderly (make install-plugin), help and
	// examples name it the way it is typed.
	if filepath.Base(os.Args[0]) == "kubectl-orderly" {
		root.Annotations = map[string]string{cobra.CommandDisplayNameAnnotation: "kubectl orderly"}
	}
	return root
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "orderly %s (commit %s)\n", version.Version, version.Commit)
		},
	}
}
