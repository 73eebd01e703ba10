package demo

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// shortDemo is a demo small enough for the test suite: 2000 records over
// 1s, with a 1s outage.
var shortDemo = []string{"demo", "--records", "2000", "--produce-for", "1s", "--outage", "1s", "--drain-timeout", "20s", "-o", "json"}

func checkDemoSummary(t *testing.T, code int, stdout, stderr string) demoSummary {
	t.Helper()
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstderr: %s\nstdout: %s", code, stderr, stdout)
	}
	var s demoSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	t.Logf("demo: %d ms, consumer counters %+v", s.DurationMS, s.Consumer)
	if s.SettleTimedOut {
		t.Errorf("the consumer's counters never reached produced: %+v", s.Consumer)
	}
	if s.Produced != 2000 {
		t.Errorf("produced %d, want 2000", s.Produced)
	}
	if s.Lost != 0 {
		t.Errorf("lost %d, want 0", s.Lost)
	}
	if s.Produced != s.Processed+s.DeadLettered+s.Skipped {
		t.Errorf("produced %d != processed %d + dead-lettered %d + skipped %d", s.Produced, s.Processed, s.DeadLettered, s.Skipped)
	}
	if s.DeadLettered == 0 {
		t.Error("nothing dead-lettered")
	}
	if s.Duplicates != 0 {
		t.Errorf("%d duplicates", s.Duplicates)
	}
	sum := 0
	for k, n := range s.DeadLetteredBy {
		sum += n
		if strings.Contains(k, "retries-exhausted") {
			t.Errorf("dead-lettered by %s: %d; the demo's transient failures must all recover", k, n)
		}
	}
	if sum != s.DeadLettered {
		t.Errorf("dead_lettered_by sums to %d, dead_lettered is %d", sum, s.DeadLettered)
	}
	if s.DeadLetteredBy["deserialize-value/permanent"] == 0 || s.DeadLetteredBy["process/permanent"] == 0 {
		t.Errorf("dead_lettered_by %v: want both decode and handler failures", s.DeadLetteredBy)
	}
	if s.Outage == nil || s.Outage.DeadLettered != 0 || s.Outage.FailedCalls == 0 || s.Outage.DurationMS == 0 {
		t.Errorf("outage %+v: want a real outage that dead-lettered nothing", s.Outage)
	}
	// Every poison kind ended where it should.
	for _, k := range s.ByKind {
		for o, n := range k.Outcomes {
			ok := false
			switch k.Kind {
			case "good", "flaky":
				ok = o == "processed" || o == "processed-after-retry"
			case "rejected":
				ok = o == "dead-lettered/process/permanent/*failure.ValidationError"
			case "unknown-type":
				ok = o == "skipped"
			default:
				ok = strings.HasPrefix(o, "dead-lettered/deserialize-value/permanent/")
			}
			if !ok {
				t.Errorf("kind %s: %d record(s) %s", k.Kind, n, o)
			}
		}
	}
	// The cluster of a demo without --keep is gone: the hint is --keep.
	if s.Cluster == "kfake" && !strings.HasSuffix(s.Inspect, " demo --keep") {
		t.Errorf("inspect command %q for a stopped cluster", s.Inspect)
	}
	if s.Cluster != "kfake" && (!strings.Contains(s.Inspect, " dlq ls --brokers ") || !strings.Contains(s.Inspect, "--topic "+s.DLQTopic)) {
		t.Errorf("inspect command %q", s.Inspect)
	}
	return s
}

// TestDemo runs the demo on its own in-process cluster.
func TestDemo(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, shortDemo...)
	s := checkDemoSummary(t, code, stdout, stderr)
	if s.Cluster != "kfake" || s.Topic != "orders" || s.DLQTopic != "orders.dlq" {
		t.Errorf("cluster %s, topic %s, dlq %s", s.Cluster, s.Topic, s.DLQTopic)
	}
}

// TestDemoTable checks the human output names every part of the story.
func TestDemoTable(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, "demo", "--records", "1000", "--produce-for", "500ms", "--outage", "500ms")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"inventory database DOWN", "UP again", "WHAT WAS PRODUCED", "garbage bytes",
		"dead-lettered: deserialize-value, permanent, *json.SyntaxError", "lost", "nothing lost", "dead-lettered by it",
		"go run ./cmd/antidote demo --keep"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
}

// TestIntegrationDemo runs the demo on the test cluster through --brokers,
// the path a user takes with their own cluster.
func TestIntegrationDemo(t *testing.T) {
	c := kafkatest.New(t)
	args := append([]string{"--brokers", strings.Join(c.Brokers(), ",")}, shortDemo...)
	code, stdout, stderr := runCmd(t, args...)
	s := checkDemoSummary(t, code, stdout, stderr)
	if s.Cluster != "kafka" || !strings.HasPrefix(s.Topic, "orders-") || s.DLQTopic != s.Topic+".dlq" {
		t.Errorf("cluster %s, topic %s, dlq %s", s.Cluster, s.Topic, s.DLQTopic)
	}
	// The demo leaves its topics for the user to inspect; the test does not.
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, s.Topic, s.DLQTopic); err != nil {
		t.Logf("deleting the demo's topics: %v", err)
	}
}

func shortOptions() demoOptions {
	return demoOptions{records: 500, produceFor: 200 * time.Millisecond, outage: 200 * time.Millisecond, seed: 42, drain: time.Minute}
}

// TestDemoKeep checks that --keep leaves a usable cluster up until the
// context ends (Ctrl-C in the command).
func TestDemoKeep(t *testing.T) {
	o := shortOptions()
	o.keep = true
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out clitest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, &out, io.Discard, cli.Globals{Brokers: []string{cli.DefaultBrokers}, Output: "table", Timeout: 10 * time.Second}, o)
	}()

	re := regexp.MustCompile(`antidote dlq ls --brokers (\S+) --topic orders\.dlq`)
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(out.String(), "stays up") {
		select {
		case err := <-done:
			t.Fatalf("demo ended before keeping the cluster up: %v\n%s", err, out.String())
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no 'stays up' line after 30s:\n%s", out.String())
		}
	}
	m := re.FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("no dlq ls command in:\n%s", out.String())
	}
	// The cluster answers, and holds the dead letters.
	dead, err := readDeadLetters(ctx, strings.Split(m[1], ","), 10*time.Second, "orders.dlq")
	if err != nil || len(dead) == 0 {
		t.Fatalf("reading orders.dlq on the kept cluster: %d dead letters, %v", len(dead), err)
	}
	// Every printed command works when pasted: each one once, and the
	// four dlq commands are there.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), " poison --brokers "); {
		if time.Now().After(deadline) {
			t.Fatalf("no hints:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	seen := map[string]int{}
	for _, line := range strings.Split(out.String(), "\n") {
		cmdline, ok := strings.CutPrefix(line, "  "+cli.SelfCommand()+" ")
		if !ok {
			continue
		}
		args := strings.Fields(cmdline)
		seen[strings.Join(args[:2], " ")]++
		if code, _, errOut := runCmd(t, args...); code != cli.ExitOK {
			t.Errorf("pasted %q: exit %d: %s", line, code, errOut)
		}
	}
	for _, c := range []string{"dlq ls", "dlq stats", "dlq show", "dlq redrive", "poison --brokers"} {
		if seen[c] != 1 {
			t.Errorf("hint %q printed %d times:\n%s", c, seen[c], out.String())
		}
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("demo --keep ended with %v after Ctrl-C, want nil", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo --keep did not stop after Ctrl-C")
	}
}

// TestDemoInterrupted checks that Ctrl-C during the run stops the demo
// cleanly with context.Canceled, which run maps to exit code 130.
func TestDemoInterrupted(t *testing.T) {
	o := shortOptions()
	o.records, o.produceFor, o.outage = 100000, time.Minute, time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	var out clitest.SyncBuffer
	done := make(chan error, 1)
	go func() {
		done <- runDemo(ctx, &out, io.Discard, cli.Globals{Brokers: []string{cli.DefaultBrokers}, Output: "table", Timeout: 10 * time.Second}, o)
	}()
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "rec/s"); {
		if time.Now().After(deadline) {
			t.Fatalf("the demo did not start within 30s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("interrupted demo returned %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("demo did not stop after Ctrl-C")
	}
}
