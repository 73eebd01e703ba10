package dlq

import (
	"context"
	"io"
	"testing"

	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/demo"
)

// tree is the commands these tests run: dlq, and those its tests also use.
func tree() []*cobra.Command { return []*cobra.Command{NewCommand(), demo.NewCommand()} }

// runCmd runs the command line and returns its exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	return clitest.Run(t, tree, args...)
}

// runContext runs the command line under ctx and returns its exit code.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return clitest.Execute(ctx, tree, args, stdout, stderr)
}
