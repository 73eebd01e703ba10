// Package group is `antidote group`: the consumer groups of a cluster, any
// client's, and the rescue of one stuck on a poison pill.
package group

import (
	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
)

// NewCommand returns the group command.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "Consumer groups of any client: rescue one stuck on a record",
		Long: `Work on the consumer groups of a cluster, whatever client their members run
(Java, Spring, Python, Go, Antidote).

  rescue   take the record a group is stuck on out of its way: copy it into a
           dead-letter topic, then commit the offset after it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Usagef("group: name a command: rescue")
		},
	}
	cmd.AddCommand(newRescueCmd())
	return cmd
}
