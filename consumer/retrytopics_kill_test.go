package consumer_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// The per-key order test runs the consumer in child processes (this test
// binary, running TestRetryTopicsChild) that it kills with SIGKILL. Each
// child appends one line per handler call to a shared file (O_APPEND, one
// write per line: a killed process loses no completed write):
//
//	S key seq attempt tier pid   the handler succeeded
//	F key seq attempt tier pid   the handler failed
const (
	envChild    = "ANTIDOTE_RT_CHILD"
	envBrokers  = "ANTIDOTE_RT_BROKERS"
	envTopic    = "ANTIDOTE_RT_TOPIC"
	envGroup    = "ANTIDOTE_RT_GROUP"
	envLog      = "ANTIDOTE_RT_LOG"
	envInstance = "ANTIDOTE_RT_INSTANCE"
	envConc     = "ANTIDOTE_RT_CONCURRENCY"
	envEOS      = "ANTIDOTE_RT_EXACTLY_ONCE"
)

// rtTiers are the delay tiers of the per-key order test.
var rtTiers = []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second}

// TestRetryTopicsChild is the consumer of TestIntegrationRetryTopicsKeyOrder;
// it skips itself unless started by it.
func TestRetryTopicsChild(t *testing.T) {
	if os.Getenv(envChild) != "1" {
		t.Skip("run by TestIntegrationRetryTopicsKeyOrder")
	}
	out, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	pid := strconv.Itoa(os.Getpid())
	line := func(kind string, r *consumer.Record[string, keyed]) {
		if _, err := out.WriteString(kind + " " + r.Value.Key + " " + strconv.Itoa(r.Value.Seq) + " " + strconv.Itoa(r.Attempt) + " " + strconv.Itoa(r.Tier) + " " + pid + "\n"); err != nil {
			panic(err)
		}
	}
	conc, _ := strconv.Atoi(os.Getenv(envConc))
	var eos consumer.ExactlyOnce
	if os.Getenv(envEOS) == "1" {
		eos.TransactionalID = os.Getenv(envGroup) + "-" + os.Getenv(envInstance)
	}
	c, err := consumer.New(consumer.Config[string, keyed]{
		ExactlyOnce: eos,
		Brokers:     strings.Split(os.Getenv(envBrokers), ","), Topics: []string{os.Getenv(envTopic)}, Group: os.Getenv(envGroup),
		Logger: kafkatest.Logger(t), Key: serde.String(), Value: serde.JSON[keyed](),
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics:    consumer.RetryTopics{Tiers: rtTiers},
		Concurrency:    consumer.Concurrency{Max: conc},
		CommitInterval: 500 * time.Millisecond,
		ClientOpts: []kgo.Opt{
			kgo.InstanceID(os.Getenv(envInstance)), kgo.SessionTimeout(6 * time.Second),
			kgo.HeartbeatInterval(500 * time.Millisecond),
		},
		Handler: func(ctx context.Context, r *consumer.Record[string, keyed]) error {
			time.Sleep(300 * time.Microsecond) // a little work, so that kills land mid-run
			if r.Attempt <= r.Value.Fails {
				line("F", r)
				return failure.Transient(errors.New("flaky"))
			}
			line("S", r)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if err := c.Run(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationRetryTopicsKeyOrder: 4 partitions, 2,000 keys, 50,000
// records with per-key sequence numbers; 5% fail transiently 1-3 times and
// go through the retry tiers. The consumer is killed with SIGKILL 5 times
// mid-run and restarted, and a second member joins once (a rebalance). For
// every key, the first successful processing of each record comes after that
// of every earlier record of its key; nothing is lost; the attempt the
// handler sees is exact (it never goes back, never skips a failure).
func TestIntegrationRetryTopicsKeyOrder(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	c := kafkatest.New(t)
	t.Run("one-at-a-time", func(t *testing.T) { testRetryTopicsKeyOrder(t, c, 0, false) })
	t.Run("concurrency-8", func(t *testing.T) { testRetryTopicsKeyOrder(t, c, 8, false) })
	t.Run("exactly-once", func(t *testing.T) { testRetryTopicsKeyOrder(t, c, 0, true) })
}

func testRetryTopicsKeyOrder(t *testing.T, c *kafkatest.Cluster, conc int, eos bool) {

	topic := c.Topic(t, "rtkill", 4)
	group := kafkatest.UniqueName("rtkill-group")
	const keys, total = 2000, 50000

	rng := rand.New(rand.NewPCG(7, 13))
	seqs := make([]int, keys)
	fails := map[string]int{}
	recs := make([]*kgo.Record, 0, total)
	failing := 0
	for i := 0; i < total; i++ {
		k := rng.IntN(keys)
		v := keyed{Key: fmt.Sprintf("key-%04d", k), Seq: seqs[k]}
		seqs[k]++
		if rng.IntN(100) < 5 {
			v.Fails = 1 + rng.IntN(3)
			failing++
		}
		fails[v.Key+" "+strconv.Itoa(v.Seq)] = v.Fails
		b, _ := json.Marshal(v)
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(v.Key), Value: b})
	}
	prod := c.Client(t, kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(total))
	for i := 0; i < total; i += 5000 {
		kafkatest.Produce(t, prod, recs[i:min(i+5000, total)]...)
	}
	t.Logf("%s: produced %d records of %d keys, %d fail 1-3 times", c.Kind(), total, keys, failing)

	dir := t.TempDir()
	logPath := filepath.Join(dir, "calls.log")
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, name := range []string{"a", "b"} {
			b, _ := os.ReadFile(filepath.Join(dir, name+".out"))
			ls := strings.Split(string(b), "\n")
			t.Logf("last lines of child %s:\n%s", name, strings.Join(ls[max(len(ls)-40, 0):], "\n"))
		}
	})
	children := map[string]*exec.Cmd{}
	var childMu sync.Mutex
	start := func(name string) {
		childMu.Lock()
		defer childMu.Unlock()
		cmd := exec.Command(os.Args[0], "-test.run=^TestRetryTopicsChild$", "-test.timeout=10m", "-test.v")
		cmd.Env = append(os.Environ(), envChild+"=1", envBrokers+"="+strings.Join(c.Brokers(), ","), envTopic+"="+topic,
			envGroup+"="+group, envLog+"="+logPath, envInstance+"="+name, envConc+"="+strconv.Itoa(conc), kafkatest.EnvBrokers+"=")
		if eos {
			cmd.Env = append(cmd.Env, envEOS+"=1")
		}
		f, err := os.OpenFile(filepath.Join(dir, name+".out"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		children[name] = cmd
	}
	kill := func(name string) {
		childMu.Lock()
		defer childMu.Unlock()
		cmd := children[name]
		_ = cmd.Process.Kill() // SIGKILL
		_ = cmd.Wait()
		delete(children, name)
	}
	t.Cleanup(func() {
		childMu.Lock()
		defer childMu.Unlock()
		for _, cmd := range children {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})

	progress := func() int {
		b, err := os.ReadFile(logPath)
		if err != nil {
			return 0
		}
		seen := map[string]bool{}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 6 && f[0] == "S" {
				seen[f[1]+" "+f[2]] = true
			}
		}
		return len(seen)
	}
	waitProgress := func(n int) {
		t.Helper()
		kafkatest.WaitFor(t, 4*time.Minute, fmt.Sprintf("%d records processed", n), func() bool { return progress() >= n })
	}

	start("a")
	kills := 0
	for _, step := range []struct {
		at     int
		action string
	}{
		{4000, "kill a"}, {10000, "start b"}, {16000, "kill a"}, {24000, "kill b"}, {32000, "kill a"}, {42000, "kill a"},
	} {
		waitProgress(step.at)
		switch step.action {
		case "start b":
			start("b") // the rebalance: a second member joins
		case "kill a":
			kill("a")
			kills++
			start("a")
		case "kill b":
			kill("b") // its partitions go to a after the session timeout
			kills++
		}
		t.Logf("at %d processed: %s", progress(), step.action)
	}
	waitProgress(total)
	childMu.Lock()
	for _, cmd := range children {
		_ = cmd.Process.Signal(syscall.SIGTERM)
	}
	childMu.Unlock()
	for name := range children {
		childMu.Lock()
		cmd := children[name]
		childMu.Unlock()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("child %s after SIGTERM: %v", name, err)
			}
		case <-time.After(time.Minute):
			t.Errorf("child %s did not stop within a minute of SIGTERM", name)
		}
		childMu.Lock()
		delete(children, name)
		childMu.Unlock()
	}

	// Check the calls, in the order they were made.
	f, err := os.Open(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	done := map[string]bool{}       // "key seq" succeeded
	lastAttempt := map[string]int{} // "key seq" -> highest attempt seen
	failedAt := map[string]map[int]bool{}
	violations, attemptErrs, lines, dups, replays := 0, 0, 0, 0, 0
	report := func(counter *int, format string, args ...any) {
		if *counter++; *counter <= 5 {
			t.Errorf(format, args...)
		}
	}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 6 {
			t.Fatalf("malformed line %q", sc.Text())
		}
		lines++
		key, seq := fs[1], fs[2]
		id := key + " " + seq
		n, _ := strconv.Atoi(seq)
		attempt, _ := strconv.Atoi(fs[3])
		// A record carries its count from tier to tier. After a kill
		// (or the rebalance) the next owner may read a copy again whose
		// successor was already tried, when the commit had not passed it:
		// an attempt made again, at-least-once. A count is never ahead of
		// the failures made.
		if attempt <= lastAttempt[id] && (fs[0] == "F" || !done[id]) {
			replays++
		}
		if attempt > 1 && !failedAt[id][attempt-1] {
			report(&attemptErrs, "%s: attempt %d without a failed attempt %d", id, attempt, attempt-1)
		}
		lastAttempt[id] = max(lastAttempt[id], attempt)
		if fs[0] == "F" {
			if failedAt[id] == nil {
				failedAt[id] = map[int]bool{}
			}
			failedAt[id][attempt] = true
			continue
		}
		if done[id] {
			dups++
			continue
		}
		if n > 0 && !done[key+" "+strconv.Itoa(n-1)] {
			report(&violations, "%s: processed before %s %d", id, key, n-1)
		}
		if want := fails[id] + 1; attempt != want {
			report(&attemptErrs, "%s: succeeded at attempt %d, want %d", id, attempt, want)
		}
		done[id] = true
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	lost := 0
	for id := range fails {
		if !done[id] {
			lost++
		}
	}
	t.Logf("%s: %d handler calls, %d records processed once more after a kill, %d attempts replayed by the next owner, %d kills, 1 rebalance by a join",
		c.Kind(), lines, dups, replays, kills)
	if lost > 0 || violations > 0 || attemptErrs > 0 {
		t.Errorf("lost %d, per-key order violations %d, attempt errors %d", lost, violations, attemptErrs)
	}
	if kills != 5 {
		t.Errorf("%d kills, want 5", kills)
	}
	if dl := readAllIfAny(t, c, topic+".dlq"); len(dl) > 0 && !eos { // (with eos, transaction markers would be counted)
		t.Errorf("the dead-letter topic holds %d records; every failing record succeeds in a tier", len(dl))
	}
}

// readAllIfAny is readAll for a topic that may not exist.
func readAllIfAny(t *testing.T, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res := kadmEnds(ctx, c.Client(t), topic)
	if res.err != nil {
		return nil
	}
	return readAll(t, c, topic)
}
