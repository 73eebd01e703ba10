package main

import (
	"bytes"
	"strings"
	"testing"
)

// runCmd runs the command line and returns its exit code, stdout and stderr.
func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// checkOneLineError checks the error contract: exit code, a first line
// starting with "antidote:", at most a --help hint after it, no stack trace.
func checkOneLineError(t *testing.T, code, want int, stderr, contains string) {
	t.Helper()
	if code != want {
		t.Errorf("exit code %d, want %d (stderr %q)", code, want, stderr)
	}
	lines := strings.Split(strings.TrimRight(stderr, "\n"), "\n")
	if !strings.HasPrefix(lines[0], "antidote: ") {
		t.Errorf("stderr does not start with 'antidote: ': %q", stderr)
	}
	if !strings.Contains(lines[0], contains) {
		t.Errorf("stderr %q does not contain %q", lines[0], contains)
	}
	wantLines := 1
	if want == exitUsage {
		wantLines = 2
		if !strings.Contains(lines[len(lines)-1], "--help") {
			t.Errorf("usage error without a --help hint: %q", stderr)
		}
	}
	if len(lines) != wantLines {
		t.Errorf("stderr has %d lines, want %d: %q", len(lines), wantLines, stderr)
	}
	for _, bad := range []string{"goroutine ", "panic", ".go:"} {
		if strings.Contains(stderr, bad) {
			t.Errorf("stderr looks like a stack trace (%q): %q", bad, stderr)
		}
	}
}

func TestBadInput(t *testing.T) {
	t.Setenv(EnvBrokers, "")
	for _, tc := range []struct {
		name     string
		args     []string
		code     int
		contains string
	}{
		{"unknown command", []string{"nope"}, exitUsage, `unknown command "nope"`},
		{"unknown command suggestion", []string{"poisn"}, exitUsage, "(did you mean poison?)"},
		{"unknown flag", []string{"demo", "--nope"}, exitUsage, "unknown flag: --nope"},
		{"bad flag value", []string{"demo", "--records", "many"}, exitUsage, `invalid argument "many"`},
		{"bad output", []string{"-o", "xml", "demo"}, exitUsage, `--output "xml": must be table, wide, json or yaml`},
		{"bad timeout", []string{"poison", "--timeout", "0s", "--topic", "t", "--kind", "empty"}, exitUsage, "--timeout 0s"},
		{"extra argument", []string{"demo", "extra"}, exitUsage, `unknown command "extra"`},
		{"too few records", []string{"demo", "--records", "5"}, exitUsage, "--records 5"},
		{"missing topic flag", []string{"poison", "--kind", "garbage"}, exitUsage, `required flag(s) "topic" not set`},
		{"unknown kind", []string{"poison", "--topic", "t", "--kind", "bogus"}, exitUsage, "one of garbage, empty, huge, no-magic, unknown-schema, truncated-avro, bad-json, wrong-shape-json"},
		{"size without huge", []string{"poison", "--topic", "t", "--kind", "garbage", "--size", "10"}, exitUsage, "--size applies only to --kind huge"},
		{"poison argument", []string{"poison", "x", "--topic", "t", "--kind", "garbage"}, exitUsage, `unknown command "x"`},
		{"unreachable broker", []string{"poison", "--brokers", "127.0.0.1:1", "--timeout", "2s", "--topic", "t", "--kind", "garbage"}, exitFailure, "cannot reach Kafka at 127.0.0.1:1 within 2s"},
		{"unreachable broker demo", []string{"demo", "--brokers", "127.0.0.1:1", "--timeout", "2s"}, exitFailure, "cannot reach Kafka at 127.0.0.1:1 within 2s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, _, stderr := runCmd(t, tc.args...)
			checkOneLineError(t, code, tc.code, stderr, tc.contains)
		})
	}
}

func TestBrokersFromEnvironment(t *testing.T) {
	t.Setenv(EnvBrokers, "127.0.0.1:1")
	code, _, stderr := runCmd(t, "poison", "--timeout", "1s", "--topic", "t", "--kind", "empty")
	checkOneLineError(t, code, exitFailure, stderr, "127.0.0.1:1")

	// The flag wins over the environment.
	code, _, stderr = runCmd(t, "poison", "--brokers", "127.0.0.1:2", "--timeout", "1s", "--topic", "t", "--kind", "empty")
	checkOneLineError(t, code, exitFailure, stderr, "127.0.0.1:2")
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"demo", "--help"}, {"poison", "--help"}, {}} {
		code, stdout, stderr := runCmd(t, args...)
		if code != exitOK || stderr != "" {
			t.Errorf("%v: exit %d, stderr %q", args, code, stderr)
		}
		if !strings.Contains(stdout, "Usage:") {
			t.Errorf("%v: no usage in %q", args, stdout)
		}
	}
	_, stdout, _ := runCmd(t, "poison", "--help")
	for _, k := range poisonKindNames() {
		if !strings.Contains(stdout, k) {
			t.Errorf("poison --help does not list kind %s", k)
		}
	}
}

func TestOneLine(t *testing.T) {
	for in, want := range map[string]string{
		"a\nb": "a b",
		"unknown command \"dem\" for \"antidote\"\n\nDid you mean this?\n\tdemo\n": `unknown command "dem" for "antidote" (did you mean demo?)`,
		"  spaced   out ": "spaced out",
	} {
		if got := oneLine(errString(in)); got != want {
			t.Errorf("oneLine(%q) = %q, want %q", in, got, want)
		}
	}
}

type errString string

func (e errString) Error() string { return string(e) }
