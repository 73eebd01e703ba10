package ctl

import (
	"testing"

	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
)

// tree is the commands these tests run: ctl alone.
func tree() []*cobra.Command { return []*cobra.Command{NewCommand()} }

// runCmd runs the command line and returns its exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run(t, tree, args...)
}
