package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/debug"
	"strings"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/ctl"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/demo"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/dlq"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/group"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/poison"
	runcmd "github.com/antidote-kafka/antidote/cmd/antidote/internal/run"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/ui"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run executes the command line args and returns the exit code. It never
// panics on bad input and prints errors as one line on stderr.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return runContext(ctx, args, stdout, stderr)
}

// runContext is run under ctx: ctx ending is an interrupt.
func runContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, newRootCmd(stdout, stderr), args)
}

// newRootCmd builds the command tree. Output goes to stdout, diagnostics to
// stderr.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := cli.NewRoot(stdout, stderr)
	root.Short = "Poison-pill-proof Kafka consumers: demo, dead-letter tooling, poison-pill generator, run"
	root.Long = `antidote makes Kafka consumers immune to poison pills.

Start with the demo: it needs no Kafka, no setup, and shows what happens to
every record of a stream full of real-life poison pills:

  antidote demo

Then inspect and repair dead-letter topics on any cluster (antidote dlq),
test your own consumers with poison pills of every kind (antidote poison),
look at dead letters in a browser (antidote ui), and run consumers for
services in any language from a YAML file, pushing each record to an HTTP
service or a topic (antidote run).`
	root.Version = version()
	root.SetVersionTemplate("antidote {{.Version}}\n")

	root.AddCommand(demo.NewCommand(), poison.NewCommand(), dlq.NewCommand(), group.NewCommand(), ctl.NewCommand(), ui.NewCommand(), runcmd.NewCommand())
	registerCompletions(root)
	cli.WrapArgs(root)
	return root
}

// registerCompletions completes the enum flags of the commands defined
// elsewhere and their topic flags.
func registerCompletions(root *cobra.Command) {
	for _, c := range []struct {
		path   []string
		flag   string
		values []string
	}{
		{[]string{"demo"}, "format", []string{"json", "avro"}},
		{[]string{"poison"}, "format", nil},
		{[]string{"poison"}, "topic", nil},
	} {
		cmd, _, err := root.Find(c.path)
		if err != nil || cmd.Flags().Lookup(c.flag) == nil {
			continue
		}
		if _, ok := cmd.GetFlagCompletionFunc(c.flag); ok {
			continue // its command completes it
		}
		fn := cli.CompleteTopics
		if c.values != nil {
			fn = cobra.FixedCompletions(c.values, cobra.ShellCompDirectiveNoFileComp)
		} else if c.flag != "topic" {
			continue
		}
		_ = cmd.RegisterFlagCompletionFunc(c.flag, fn)
	}
}

// version is the module version the binary was built from ("(devel)"
// for a build in the repository), with the VCS revision when known, and the
// Go version; then, one per line, the versions of this project's modules
// and of franz-go's that it was built with.
func version() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown)"
	}
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			if s.Value == "true" {
				dirty = "+dirty"
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		v += " " + rev + dirty
	}
	var b strings.Builder
	b.WriteString(v + " " + bi.GoVersion)
	for _, d := range bi.Deps {
		if !strings.HasPrefix(d.Path, "github.com/antidote-kafka/") && !strings.HasPrefix(d.Path, "github.com/twmb/franz-go") {
			continue
		}
		fmt.Fprintf(&b, "\n  %s %s", d.Path, d.Version)
		if r := d.Replace; r != nil {
			fmt.Fprintf(&b, " => %s %s", r.Path, r.Version)
		}
	}
	return b.String()
}
