package main

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/dlq"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// unsecuredJWT is a token Kafka's default OAUTHBEARER validator accepts
// (alg none, sub and exp claims): for tests only.
func unsecuredJWT(sub string) string {
	enc := base64.RawURLEncoding.EncodeToString
	now := time.Now().Unix()
	return enc([]byte(`{"alg":"none"}`)) + "." + enc(fmt.Appendf(nil, `{"sub":%q,"iat":%d,"exp":%d}`, sub, now, now+3600)) + "."
}

// stats runs dlq stats and returns the total, failing t on an error.
func statsTotal(t *testing.T, args ...string) int {
	t.Helper()
	code, out, errOut := runCmd(t, append([]string{"dlq", "stats", "-o", "json", "--timeout", "15s"}, args...)...)
	var st struct {
		Total int `json:"total"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &st) != nil {
		t.Fatalf("stats %v: exit %d\n%s%s", args, code, out, errOut)
	}
	return st.Total
}

// TLS and every SASL mechanism against the real broker's SASL_SSL listener.
func TestIntegrationDLQSecured(t *testing.T) {
	for _, k := range []string{cli.EnvBrokers, cli.EnvKafkaBrokers, cli.EnvConfig, cli.EnvContext, cli.EnvSASLUsername, cli.EnvSASLPassword, cli.EnvSASLToken} {
		t.Setenv(k, "")
	}
	sec := kafkatest.SecuredListener(t)
	c := kafkatest.New(t)
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src := c.Topic(t, "orders.dlq", 1), c.Topic(t, "orders", 1)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 25)
	sasl := strings.Join(sec.Brokers, ",")
	t.Setenv(cli.EnvSASLPassword, sec.Password)
	base := []string{"--topic", dlq, "--brokers", sasl, "--tls-ca", sec.CAFile, "--sasl-username", sec.Username}
	for _, m := range []string{"PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"} {
		if n := statsTotal(t, append(base, "--sasl-mechanism", m)...); n != 25 {
			t.Errorf("%s: %d letters, want 25", m, n)
		}
	}
	// OAUTHBEARER, the token from a file.
	tok := clitest.WriteFile(t, "token", unsecuredJWT(sec.Username))
	if n := statsTotal(t, "--topic", dlq, "--brokers", sasl, "--tls-ca", sec.CAFile, "--sasl-mechanism", "OAUTHBEARER", "--sasl-token-file", tok); n != 25 {
		t.Errorf("OAUTHBEARER: %d letters", n)
	}
	// Mutual TLS: the client certificate is offered (the listener requests one).
	if sec.CertFile != "" {
		if n := statsTotal(t, append(base, "--sasl-mechanism", "SCRAM-SHA-512", "--tls-cert", sec.CertFile, "--tls-key", sec.KeyFile)...); n != 25 {
			t.Errorf("mutual TLS: %d letters", n)
		}
	}
	// A config file context, with the password in a file, and a redrive
	// through it.
	pw := clitest.WriteFile(t, "password", sec.Password+"\n")
	cfg := clitest.WriteFile(t, "config.yaml", fmt.Sprintf(`current-context: secured
contexts:
  secured:
    brokers: [%s]
    topic: %s
    tls:
      ca-file: %s
    sasl:
      mechanism: SCRAM-SHA-256
      username: %s
      password-file: %s
  other:
    brokers: [127.0.0.1:1]
`, sasl, dlq, sec.CAFile, sec.Username, pw))
	t.Setenv(cli.EnvSASLPassword, "")
	if n := statsTotal(t, "--config", cfg); n != 25 {
		t.Errorf("context: %d letters", n)
	}
	code, out, errOut := runCmd(t, "dlq", "redrive", "--config", cfg, "--context", "secured", "--exactly-once", "-o", "json")
	if code != 0 || !strings.Contains(out, `"redriven": 25`) {
		t.Errorf("redrive through the context: exit %d\n%s%s", code, out, errOut)
	}
	// Failures: one line each, naming the cause.
	t.Setenv(cli.EnvSASLPassword, "wrong")
	code, _, errOut = runCmd(t, append(base, "dlq", "stats", "--sasl-mechanism", "SCRAM-SHA-256", "--timeout", "10s")...)
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "login to Kafka at "+sasl+" was refused")
	t.Setenv(cli.EnvSASLPassword, sec.Password)
	code, _, errOut = runCmd(t, "dlq", "stats", "--topic", dlq, "--brokers", sasl, "--tls", "--sasl-mechanism", "PLAIN", "--sasl-username", sec.Username, "--timeout", "10s")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "TLS with Kafka at "+sasl+" failed")
	code, _, errOut = runCmd(t, "dlq", "stats", "--topic", dlq, "--brokers", sasl, "--tls-insecure-skip-verify", "--sasl-mechanism", "PLAIN", "--sasl-username", sec.Username, "--timeout", "10s")
	if code != 0 || !strings.Contains(errOut, "WARNING: TLS certificate verification is OFF") {
		t.Errorf("skip-verify: exit %d, stderr %q", code, errOut)
	}
}

func TestConnConfig(t *testing.T) {
	for _, k := range []string{cli.EnvBrokers, cli.EnvKafkaBrokers, cli.EnvConfig, cli.EnvContext, cli.EnvSASLUsername, cli.EnvSASLPassword, cli.EnvSASLToken, dlq.EnvTopic} {
		t.Setenv(k, "")
	}
	c := kafkatest.New(t)
	if c.Real() {
		t.Skip("kfake: the contexts are checked once")
	}
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	dlq, src := c.Topic(t, "orders.dlq", 1), c.Topic(t, "orders", 1)
	clitest.ProduceLetters(t, cl, dlq, src, 0, 3)
	cfg := clitest.WriteFile(t, "config.yaml", fmt.Sprintf(`current-context: dev
contexts:
  dev:
    brokers: [%s]
    topic: %s
  dead:
    brokers: [127.0.0.1:1]
`, c.Brokers()[0], dlq))
	t.Setenv(cli.EnvConfig, cfg)
	// The current context's brokers and topic.
	if n := statsTotal(t); n != 3 {
		t.Errorf("current context: %d letters", n)
	}
	// The demo does not go to the current context by itself.
	if c, err := cli.ResolveConn(demoCmdForTest(t)); err != nil || c.Context != "" {
		t.Errorf("demo: context %q, %v", c.Context, err)
	}
	// --context, and the environment over the context.
	code, _, errOut := runCmd(t, "dlq", "stats", "--context", "dead", "--topic", dlq, "--timeout", "2s")
	clitest.CheckOneLineError(t, code, cli.ExitFailure, errOut, "127.0.0.1:1")
	t.Setenv(cli.EnvKafkaBrokers, c.Brokers()[0])
	if n := statsTotal(t, "--context", "dead", "--topic", dlq); n != 3 {
		t.Errorf("%s over the context: %d letters", cli.EnvKafkaBrokers, n)
	}
	t.Setenv(cli.EnvKafkaBrokers, "")
	t.Setenv(cli.EnvContext, "dead")
	if n := statsTotal(t, "--brokers", c.Brokers()[0], "--topic", dlq); n != 3 {
		t.Errorf("--brokers over the context: %d letters", n)
	}
	t.Setenv(cli.EnvContext, "")
	bad := clitest.WriteFile(t, "bad.yaml", "contexts:\n  dev:\n    brokers: [a:1]\n    bootstrap: [b:2]\n")
	for _, tc := range []struct {
		args     []string
		contains string
	}{
		{[]string{"--context", "nope"}, `context "nope" is not in the config file`},
		{[]string{"--config", bad}, "bootstrap"},
		{[]string{"--config", filepath.Join(t.TempDir(), "missing.yaml")}, "config file"},
		{[]string{"--sasl-mechanism", "GSSAPI"}, "--sasl-mechanism"},
		{[]string{"--sasl-mechanism", "SCRAM-SHA-256"}, "needs a user name"},
		{[]string{"--sasl-mechanism", "PLAIN", "--sasl-username", "u"}, "no SASL password"},
		{[]string{"--sasl-mechanism", "OAUTHBEARER"}, "no SASL token"},
		{[]string{"--sasl-mechanism", "AWS_MSK_IAM"}, "AWS_ACCESS_KEY_ID"},
		{[]string{"--tls-cert", cfg}, "--tls-key go together"},
		{[]string{"--tls-ca", cfg}, "no PEM certificate"},
	} {
		code, _, errOut := runCmd(t, append([]string{"dlq", "stats"}, tc.args...)...)
		clitest.CheckOneLineError(t, code, cli.ExitUsage, errOut, tc.contains)
	}
	// AWS MSK IAM takes the credentials of the environment.
	t.Setenv("AWS_ACCESS_KEY_ID", "AKIDEXAMPLE")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "secret")
	s := cli.SASLConfig{Mechanism: "AWS_MSK_IAM"}
	if m, err := s.Auth(); err != nil || m.Name() != "AWS_MSK_IAM" {
		t.Errorf("AWS_MSK_IAM: %v, %v", m, err)
	}
}

// A broker address that accepts connections and never answers: the
// command says it is waiting, then fails within --timeout, naming it.
func TestBlackHoleBroker(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	t.Setenv(cli.EnvConfig, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			defer conn.Close() // held open, never answered
		}
	}()
	addr := ln.Addr().String()
	start := time.Now()
	code, _, errOut := runCmd(t, "dlq", "ls", "--topic", "t", "--brokers", addr, "--timeout", "6s")
	t.Logf("black hole: exit %d after %v", code, time.Since(start))
	lines := strings.Split(strings.TrimSpace(errOut), "\n")
	if code != cli.ExitFailure || len(lines) != 2 || !strings.Contains(lines[0], "no answer yet from "+addr) ||
		!strings.Contains(lines[1], "cannot reach Kafka at "+addr+" within 6s") {
		t.Errorf("exit %d, stderr %q", code, errOut)
	}
}

// demoCmdForTest is the demo command of a fresh tree, flags parsed.
func demoCmdForTest(t *testing.T) *cobra.Command {
	t.Helper()
	root := newRootCmd(io.Discard, io.Discard)
	cmd, _, err := root.Find([]string{"demo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.ParseFlags(nil); err != nil {
		t.Fatal(err)
	}
	return cmd
}
