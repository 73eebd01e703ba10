package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/poison"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// runCmd runs the command line and returns its exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestBadInput(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"unknown command", []string{"nope"}, cli.ExitUsage, `unknown command "nope"`},
		{"unknown command suggestion", []string{"poisn"}, cli.ExitUsage, "(did you mean poison?)"},
		{"unknown flag", []string{"demo", "--nope"}, cli.ExitUsage, "unknown flag: --nope"},
		{"bad flag value", []string{"demo", "--records", "many"}, cli.ExitUsage, `--records "many": want a whole number`},
		{"bad output", []string{"-o", "xml", "demo"}, cli.ExitUsage, `--output "xml": must be table, wide, json or yaml`},
		{"bad timeout", []string{"poison", "--timeout", "0s", "--topic", "t", "--kind", "empty"}, cli.ExitUsage, "--timeout 0s"},
		{"extra argument", []string{"demo", "extra"}, cli.ExitUsage, `unknown command "extra"`},
		{"too few records", []string{"demo", "--records", "5"}, cli.ExitUsage, "--records 5"},
		{"missing topic flag", []string{"poison", "--kind", "garbage"}, cli.ExitUsage, `required flag(s) "topic" not set`},
		{"unknown kind", []string{"poison", "--topic", "t", "--kind", "bogus"}, cli.ExitUsage, "one of garbage, empty, huge, no-magic, unknown-schema, truncated-avro, bad-json, wrong-shape-json"},
		{"size without huge", []string{"poison", "--topic", "t", "--kind", "garbage", "--size", "10"}, cli.ExitUsage, "--size applies only to --kind huge"},
		{"poison argument", []string{"poison", "x", "--topic", "t", "--kind", "garbage"}, cli.ExitUsage, `unknown command "x"`},
		{"unreachable broker", []string{"poison", "--brokers", "127.0.0.1:1", "--timeout", "2s", "--topic", "t", "--kind", "garbage"}, cli.ExitFailure, "cannot reach Kafka at 127.0.0.1:1: unable to dial"},
		{"unreachable broker demo", []string{"demo", "--brokers", "127.0.0.1:1", "--timeout", "2s"}, cli.ExitFailure, "cannot reach Kafka at 127.0.0.1:1: unable to dial"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tc.args...)
			clitest.CheckOneLineError(t, code, tc.code, stderr, tc.contains)
		})
	}
}

func TestBrokersFromEnvironment(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "127.0.0.1:1")
	code, _, stderr := runCmd(t, "poison", "--timeout", "1s", "--topic", "t", "--kind", "empty")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, stderr, "127.0.0.1:1")

	// The flag wins over the environment.
	code, _, stderr = runCmd(t, "poison", "--brokers", "127.0.0.1:2", "--timeout", "1s", "--topic", "t", "--kind", "empty")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, stderr, "127.0.0.1:2")
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"demo", "--help"}, {"poison", "--help"}, {}} {
		code, stdout, stderr := runCmd(t, args...)
		if code != cli.ExitOK || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
		if !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: no usage in %q", args, stdout)
		}
	}
	_, stdout, _ := runCmd(t, "poison", "--help")
	for _, k := range poison.KindNames() {
		if !strings.Contains(stdout, k) {
			t.Errorf("poison --help does not list kind %s", k)
		}
	}
}

func TestCompletion(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	c := kafkatest.New(t)
	topic := c.Topic(t, "complete-me.dlq", 1)
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"dlq", "ls", "--stage", ""}, []string{"deserialize-value", "process", "VALUE_CONVERTER"}},
		{[]string{"dlq", "stats", "--class", ""}, []string{"permanent", "transient", "unclassified"}},
		{[]string{"demo", "--format", ""}, []string{"json", "avro"}},
		{[]string{"-o", ""}, []string{"wide", "yaml"}},
		{[]string{"dlq", "ls", "--sasl-mechanism", ""}, []string{"SCRAM-SHA-512", "OAUTHBEARER"}},
		{[]string{"dlq", "ls", "--brokers", strings.Join(c.Brokers(), ","), "--topic", "complete-me"}, []string{topic}},
	} {
		code, out, errOut := runCmd(t, append([]string{"__complete"}, tc.args...)...)
		for _, w := range tc.want {
			if code != 0 || !strings.Contains(out, w+"\n") {
				t.Errorf("complete %v: exit %d, %q lacks %q (%s)", tc.args, code, out, w, errOut)
			}
		}
	}
}

func TestVersion(t *testing.T) {
	code, out, _ := runCmd(t, "--version")
	if code != 0 || !strings.HasPrefix(out, "antidote ") || !strings.Contains(out, "go1.") {
		t.Errorf("--version: exit %d, %q", code, out)
	}
}

// TestHelpSecurityFlags: the TLS and SASL flags are listed by the root's
// help; a subcommand's help names them in one line.
func TestHelpSecurityFlags(t *testing.T) {
	_, root, _ := runCmd(t, "--help")
	for _, f := range []string{"--tls-ca", "--sasl-mechanism", "--sasl-token-file"} {
		if !strings.Contains(root, f) {
			t.Errorf("antidote --help lacks %s", f)
		}
	}
	for _, args := range [][]string{{"demo", "--help"}, {"dlq", "ls", "--help"}, {"ctl", "status", "--help"}} {
		_, out, _ := runCmd(t, args...)
		if strings.Contains(out, "--tls-ca") || strings.Contains(out, "--sasl-username") {
			t.Errorf("%v lists the TLS and SASL flags again", args)
		}
		if !strings.Contains(out, "--tls*, --sasl-*") || !strings.Contains(out, "--brokers") {
			t.Errorf("%v: no line for TLS and SASL, or no --brokers:\n%s", args, out)
		}
	}
}
