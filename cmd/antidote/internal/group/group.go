// Package group is `antidote group`: the groups of a cluster, any client's
// (consumer and share groups): describe one, and rescue a consumer group
// stuck on a poison pill.
package group

import (
	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
)

// NewCommand returns the group command.
func NewCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "group",
		Short: "Groups of any client: describe one, rescue one stuck on a record",
		Long: `Work on the consumer groups of a cluster, whatever client their members run
(Java, Spring, Python, Go, Antidote).

  describe show a group (consumer or share): members, assignment, offsets, lag;
           for a share group its delivery limit and the broker's
           dead-letter setup, checked
  rescue   take the record a group is stuck on out of its way: copy it into a
           dead-letter topic, then commit the offset after it`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return cli.Usagef("group: name a command: describe or rescue")
		},
	}
	cmd.AddCommand(newDescribeCmd(), newRescueCmd())
	return cmd
}
