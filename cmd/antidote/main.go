// Command antidote is the operations tool of Antidote: a zero-setup demo of a
// poison-pill-proof consumer, dead-letter tooling, a web console for dead
// letters, a poison-pill generator to test any consumer, and antidote run,
// which runs poison-pill-safe consumers from a YAML file and hands their
// records to an HTTP service or a topic.
//
// Exit codes: 0 success, 1 failure, 2 usage error (unknown command or flag,
// bad flag value, missing argument), 130 interrupted.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK          = 0
	exitFailure     = 1
	exitUsage       = 2
	exitInterrupted = 130
)

// EnvBrokers is the fallback of the --brokers flag; EnvKafkaBrokers, the
// variable many Kafka tools read, is the next one.
const (
	EnvBrokers      = "ANTIDOTE_BROKERS"
	EnvKafkaBrokers = "KAFKA_BROKERS"
)

// outputs are the values of --output.
var outputs = []string{"table", "wide", "json", "yaml"}

const defaultBrokers = "127.0.0.1:9092"

func init() {
	// Run every PersistentPreRunE on the path, so that a subcommand's own
	// hook does not silently skip the root's flag validation.
	cobra.EnableTraverseRunHooks = true
}

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// usageError marks an error as the user's invocation being wrong: run exits
// with 2 and a hint to run --help. Any command may return one.
type usageError struct{ error }

func (e usageError) Unwrap() error { return e.error }

// usagef returns a usageError with a formatted message.
func usagef(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
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
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return exitOK
	}
	if cmd == nil {
		cmd = root
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "antidote: interrupted")
		return exitInterrupted
	}
	if isUsage(err) {
		fmt.Fprintf(stderr, "antidote: %s\nRun '%s --help' for usage.\n", oneLine(err), cmd.CommandPath())
		return exitUsage
	}
	fmt.Fprintf(stderr, "antidote: %s\n", oneLine(err))
	return exitFailure
}

// newRootCmd builds the command tree. Output goes to stdout, diagnostics to
// stderr.
func newRootCmd(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "antidote",
		Short: "Poison-pill-proof Kafka consumers: demo, dead-letter tooling, poison-pill generator, run",
		Long: `antidote makes Kafka consumers immune to poison pills.

Start with the demo: it needs no Kafka, no setup, and shows what happens to
every record of a stream full of real-life poison pills:

  antidote demo

Then inspect and repair dead-letter topics on any cluster (antidote dlq),
test your own consumers with poison pills of every kind (antidote poison),
look at dead letters in a browser (antidote ui), and run consumers for
services in any language from a YAML file, pushing each record to an HTTP
service or a topic (antidote run).`,
		SilenceErrors: true,
		SilenceUsage:  true,
		// Errors of flag parsing are usage errors.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyGlobalFlags(cmd); err != nil {
				return err
			}
			c, err := resolveConn(cmd)
			if err != nil {
				return err
			}
			c.printWarnings(cmd.ErrOrStderr())
			cmd.SetContext(context.WithValue(cmd.Context(), connKey{}, c))
			return nil
		},
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })

	pf := root.PersistentFlags()
	pf.StringSlice("brokers", []string{defaultBrokers}, "Kafka seed brokers, comma-separated (env "+EnvBrokers+", then "+EnvKafkaBrokers+")")
	pf.StringP("output", "o", "table", "output format: table, wide, json or yaml (wide and yaml: the dlq commands)")
	pf.Duration("timeout", 30*time.Second, "bound for connecting to the cluster and metadata calls")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
	addConnFlags(root)
	root.Version = version()
	root.SetVersionTemplate("antidote {{.Version}}\n")

	root.AddCommand(newDemoCmd(), newPoisonCmd(), newDLQCmd(), newCtlCmd(), newUICmd(), newRunCmd())
	registerCompletions(root)
	wrapArgs(root)
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
		fn := completeTopics
		if c.values != nil {
			fn = cobra.FixedCompletions(c.values, cobra.ShellCompDirectiveNoFileComp)
		} else if c.flag != "topic" {
			continue
		}
		_ = cmd.RegisterFlagCompletionFunc(c.flag, fn)
	}
}

// applyGlobalFlags applies environment fallbacks and validates the root's
// persistent flags.
func applyGlobalFlags(cmd *cobra.Command) error {
	fs := cmd.Flags()
	if f := fs.Lookup("brokers"); f != nil && !f.Changed {
		if env := brokersFromEnv(); env != nil {
			if err := fs.Set("brokers", strings.Join(env, ",")); err != nil {
				return usagef("%s: %v", EnvBrokers, err)
			}
		}
	}
	brokers, _ := fs.GetStringSlice("brokers")
	if len(brokers) == 0 {
		return usagef("--brokers: no broker given")
	}
	for _, b := range brokers {
		if strings.TrimSpace(b) == "" {
			return usagef("--brokers: empty broker address in %q", strings.Join(brokers, ","))
		}
	}
	if out, _ := fs.GetString("output"); !slices.Contains(outputs, out) {
		return usagef("--output %q: must be table, wide, json or yaml", out)
	}
	if d, _ := fs.GetDuration("timeout"); d <= 0 {
		return usagef("--timeout %v: must be positive", d)
	}
	return nil
}

// selfCommand is how to run this program again from the user's shell, for
// the commands it prints: "antidote" when that name on the PATH is this
// program, "go run ./cmd/antidote" for a binary that go run (or go test)
// built in a temporary folder, else the path it was started by.
func selfCommand() string {
	exe, _ := os.Executable()
	if p, err := exec.LookPath("antidote"); err == nil && exe != "" {
		a, aerr := os.Stat(p)
		b, berr := os.Stat(exe)
		if aerr == nil && berr == nil && os.SameFile(a, b) {
			return "antidote"
		}
	}
	arg0 := os.Args[0]
	switch {
	case strings.Contains(exe, string(filepath.Separator)+"go-build") || strings.Contains(arg0, string(filepath.Separator)+"go-build"):
		return "go run ./cmd/antidote"
	case strings.ContainsRune(arg0, filepath.Separator):
		if strings.ContainsAny(arg0, " \t'\"$") {
			return strconv.Quote(arg0)
		}
		return arg0
	}
	return "antidote"
}

// brokersFromEnv returns the brokers of ANTIDOTE_BROKERS, else of
// KAFKA_BROKERS, else nil.
func brokersFromEnv() []string {
	for _, k := range []string{EnvBrokers, EnvKafkaBrokers} {
		if env := strings.TrimSpace(os.Getenv(k)); env != "" {
			return strings.Split(env, ",")
		}
	}
	return nil
}

// version is the module version the binary was built from ("(devel)"
// for a build in the repository), with the VCS revision when known.
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
	return v + " " + bi.GoVersion
}

// wrapArgs makes every positional-argument error of the tree a usage error.
func wrapArgs(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		wrapArgs(sub)
	}
}

// isUsage reports whether err is the invocation's fault: a usageError, or
// one of cobra's own usage errors, which it returns unwrapped.
func isUsage(err error) bool {
	var u usageError
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "unknown shorthand flag", "invalid argument", "flag needs an argument", "required flag(s)", "accepts ", "requires at least", "requires at most", "if any flags in the group"} {
		if strings.HasPrefix(msg, p) {
			return true
		}
	}
	return false
}

// oneLine squeezes an error message onto one line. Cobra's "Did you mean
// this?" suggestions become a parenthesised list.
func oneLine(err error) string {
	msg := strings.TrimSpace(err.Error())
	head, suggest, found := strings.Cut(msg, "Did you mean this?")
	if found {
		names := strings.Fields(suggest)
		msg = strings.TrimSpace(head)
		if len(names) > 0 {
			msg += " (did you mean " + strings.Join(names, " or ") + "?)"
		}
	}
	return strings.Join(strings.Fields(strings.ReplaceAll(msg, "\n", " ")), " ")
}
