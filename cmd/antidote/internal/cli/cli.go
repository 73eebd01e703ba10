// Package cli is what every command of antidote shares: the root's
// persistent flags (brokers, output, timeout, the config file's contexts,
// TLS and SASL), dialing the cluster with them, the output helpers, the
// live progress line, and the errors that choose the exit code.
//
// Each command group is a package of its own under cmd/antidote/internal
// with a NewCommand constructor; package main only wires them to the root
// that [NewRoot] builds and exits with the code of [Execute].
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// Exit codes.
const (
	ExitOK          = 0
	ExitFailure     = 1
	ExitUsage       = 2
	ExitInterrupted = 130
)

// EnvBrokers is the fallback of the --brokers flag; EnvKafkaBrokers, the
// variable many Kafka tools read, is the next one.
const (
	EnvBrokers      = "ANTIDOTE_BROKERS"
	EnvKafkaBrokers = "KAFKA_BROKERS"
)

// outputs are the values of --output.
var outputs = []string{"table", "wide", "json", "yaml"}

// DefaultBrokers is the default of --brokers.
const DefaultBrokers = "127.0.0.1:9092"

func init() {
	// Run every PersistentPreRunE on the path, so that a subcommand's own
	// hook does not silently skip the root's flag validation.
	cobra.EnableTraverseRunHooks = true
}

// UsageError marks an error as the user's invocation being wrong: Execute
// exits with 2 and a hint to run --help. Any command may return one.
type UsageError struct{ error }

func (e UsageError) Unwrap() error { return e.error }

// Usage marks err as a usage error.
func Usage(err error) error { return UsageError{err} }

// Usagef returns a UsageError with a formatted message.
func Usagef(format string, args ...any) error {
	return UsageError{fmt.Errorf(format, args...)}
}

// Execute runs the command line args on root under ctx and returns the
// exit code: ctx ending is an interrupt. It never panics on bad input and
// prints errors as one line on root's stderr.
func Execute(ctx context.Context, root *cobra.Command, args []string) int {
	stderr := root.ErrOrStderr()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	if err == nil {
		return ExitOK
	}
	if cmd == nil {
		cmd = root
	}
	if ctx.Err() != nil && errors.Is(err, context.Canceled) {
		fmt.Fprintln(stderr, "antidote: interrupted")
		return ExitInterrupted
	}
	if IsUsage(err) {
		fmt.Fprintf(stderr, "antidote: %s\nRun '%s --help' for usage.\n", OneLine(err), cmd.CommandPath())
		return ExitUsage
	}
	fmt.Fprintf(stderr, "antidote: %s\n", OneLine(err))
	return ExitFailure
}

// NewRoot builds the root command without its subcommands: its persistent
// flags, the hook that validates them and resolves the connection, and
// the usage errors of flag parsing. Output goes to stdout, diagnostics to
// stderr. Add the commands, then call [WrapArgs].
func NewRoot(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:           "antidote",
		SilenceErrors: true,
		SilenceUsage:  true,
		// Errors of flag parsing are usage errors.
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyGlobalFlags(cmd); err != nil {
				return err
			}
			c, err := ResolveConn(cmd)
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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError{flagError(err)} })

	pf := root.PersistentFlags()
	pf.StringSlice("brokers", []string{DefaultBrokers}, "Kafka seed brokers, comma-separated (env "+EnvBrokers+", then "+EnvKafkaBrokers+")")
	pf.StringP("output", "o", "table", "output format: table, wide, json or yaml (wide and yaml: the dlq commands)")
	pf.Duration("timeout", 30*time.Second, "bound for connecting to the cluster and metadata calls")
	_ = root.RegisterFlagCompletionFunc("output", cobra.FixedCompletions(outputs, cobra.ShellCompDirectiveNoFileComp))
	addConnFlags(root)
	cobra.AddTemplateFunc("globalFlagUsages", globalFlagUsages)
	root.SetUsageTemplate(strings.Replace(root.UsageTemplate(),
		"{{.InheritedFlags.FlagUsages | trimTrailingWhitespaces}}", "{{globalFlagUsages . | trimTrailingWhitespaces}}", 1))
	return root
}

// flagError says what a flag wants instead of the parser's own error
// ("strconv.ParseInt: parsing ...").
func flagError(err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	var want string
	switch t := iv.GetFlag().Value.Type(); t {
	case "int", "int8", "int16", "int32", "int64", "uint", "uint8", "uint16", "uint32", "uint64", "count":
		want = "want a whole number, such as 100"
	case "intSlice", "int32Slice", "int64Slice", "uintSlice":
		want = "want whole numbers separated by commas, such as 0,2"
	case "float32", "float64":
		want = "want a number, such as 50 or 0.5"
	case "duration":
		want = "want a duration, such as 500ms, 30s, 5m or 1h"
	case "bool":
		want = "want true or false"
	default:
		return err
	}
	return fmt.Errorf("--%s %q: %s", iv.GetFlag().Name, iv.GetValue(), want)
}

// applyGlobalFlags applies environment fallbacks and validates the root's
// persistent flags.
func applyGlobalFlags(cmd *cobra.Command) error {
	fs := cmd.Flags()
	if f := fs.Lookup("brokers"); f != nil && !f.Changed {
		if env := BrokersFromEnv(); env != nil {
			if err := fs.Set("brokers", strings.Join(env, ",")); err != nil {
				return Usagef("%s: %v", EnvBrokers, err)
			}
		}
	}
	brokers, _ := fs.GetStringSlice("brokers")
	if len(brokers) == 0 {
		return Usagef("--brokers: no broker given")
	}
	for _, b := range brokers {
		if strings.TrimSpace(b) == "" {
			return Usagef("--brokers: empty broker address in %q", strings.Join(brokers, ","))
		}
	}
	if out, _ := fs.GetString("output"); !slices.Contains(outputs, out) {
		return Usagef("--output %q: must be table, wide, json or yaml", out)
	}
	if d, _ := fs.GetDuration("timeout"); d <= 0 {
		return Usagef("--timeout %v: must be positive", d)
	}
	return nil
}

// SelfCommand is how to run this program again from the user's shell, for
// the commands it prints: "antidote" when that name on the PATH is this
// program, "go run ./cmd/antidote" for a binary that go run (or go test)
// built in a temporary folder, else the path it was started by.
func SelfCommand() string {
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

// BrokersFromEnv returns the brokers of ANTIDOTE_BROKERS, else of
// KAFKA_BROKERS, else nil.
func BrokersFromEnv() []string {
	for _, k := range []string{EnvBrokers, EnvKafkaBrokers} {
		if env := strings.TrimSpace(os.Getenv(k)); env != "" {
			return strings.Split(env, ",")
		}
	}
	return nil
}

// WrapArgs makes every positional-argument error of the tree a usage
// error, and an unknown subcommand's error suggests the nearest names.
func WrapArgs(c *cobra.Command) {
	if c.Args != nil {
		args := c.Args
		c.Args = func(cmd *cobra.Command, a []string) error {
			if err := args(cmd, a); err != nil {
				if len(a) > 0 && cmd.HasSubCommands() && strings.HasPrefix(err.Error(), "unknown command") {
					return UnknownCommand(cmd, a[0])
				}
				return UsageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		WrapArgs(sub)
	}
}

// UnknownCommand is the usage error of name given as a subcommand of cmd
// that has none of that name, with the names it is near: "unknown command
// "sho" for "antidote dlq" (did you mean show?)".
func UnknownCommand(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if near := cmd.SuggestionsFor(name); len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	} else {
		var names []string
		for _, c := range cmd.Commands() {
			if c.IsAvailableCommand() {
				names = append(names, c.Name())
			}
		}
		msg += " (its commands: " + strings.Join(names, ", ") + ")"
	}
	return UsageError{errors.New(msg)}
}

// IsUsage reports whether err is the invocation's fault: a UsageError, or
// one of cobra's own usage errors, which it returns unwrapped.
func IsUsage(err error) bool {
	var u UsageError
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

// OneLine squeezes an error message onto one line. Cobra's "Did you mean
// this?" suggestions become a parenthesised list.
func OneLine(err error) string {
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

// CheckEnum returns nil when value is one of values (ignoring case) or
// empty, else the usage error of --flag naming the values and the nearest
// ones: "--class "perm": want one of permanent, transient, unclassified
// (did you mean permanent?)".
func CheckEnum(flag, value string, values []string) error {
	if value == "" || slices.ContainsFunc(values, func(v string) bool { return strings.EqualFold(v, value) }) {
		return nil
	}
	msg := fmt.Sprintf("--%s %q: want one of %s", flag, value, strings.Join(values, ", "))
	if near := nearest(value, values); len(near) > 0 {
		msg += " (did you mean " + strings.Join(near, " or ") + "?)"
	}
	return UsageError{errors.New(msg)}
}

// nearest returns the values that start with s, or are at most two edits
// away from it, ignoring case.
func nearest(s string, values []string) []string {
	s = strings.ToLower(s)
	var out []string
	for _, v := range values {
		lv := strings.ToLower(v)
		if strings.HasPrefix(lv, s) || EditDistance(s, lv) <= 2 {
			out = append(out, v)
		}
	}
	return out
}

// EditDistance is the Levenshtein distance of a and b, in bytes: how typos
// are matched to what was meant.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
