package ui

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
)

// tree is the commands these tests run: ui alone.
func tree() []*cobra.Command { return []*cobra.Command{NewCommand()} }

// runContext runs the command line under ctx and returns its exit code.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return clitest.Execute(ctx, tree, args, stdout, stderr)
}
