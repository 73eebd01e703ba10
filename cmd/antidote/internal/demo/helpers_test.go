package demo

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/ctl"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/dlq"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/poison"
)

// tree is the commands these tests run: demo, and those its tests also use.
func tree() []*cobra.Command {
	return []*cobra.Command{NewCommand(), ctl.NewCommand(), dlq.NewCommand(), poison.NewCommand()}
}

// runCmd runs the command line and returns its exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run(t, tree, args...)
}
