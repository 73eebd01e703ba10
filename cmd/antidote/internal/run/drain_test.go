package run

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// buildAntidote builds the command into a temporary folder.
func buildAntidote(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "antidote")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/antidote-kafka/antidote/cmd/antidote").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestIntegrationRunDrain: SIGTERM to the antidote run binary drains: the
// exit code is 0, the logs are JSON lines, and the committed offsets cover
// only records the service answered with 2xx. A second run then delivers
// the rest: nothing is lost across the stop.
func TestIntegrationRunDrain(t *testing.T) {
	bin := buildAntidote(t)
	c := kafkatest.New(t)
	topic := c.Topic(t, "run-drain", 3)
	group := kafkatest.UniqueName("run-drain")
	cl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()))
	const n = 3000
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: topic, Partition: int32(i % 3), Value: []byte(strconv.Itoa(i))}
	}
	if err := cl.ProduceSync(context.Background(), rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	var mu sync.Mutex
	accepted := map[place]bool{}
	count := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Millisecond) // a service that takes a moment
		p, _ := strconv.Atoi(r.Header.Get("Antidote-Partition"))
		o, _ := strconv.ParseInt(r.Header.Get("Antidote-Offset"), 10, 64)
		mu.Lock()
		accepted[place{int32(p), o}] = true
		count = len(accepted)
		mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	accepts := func() int { mu.Lock(); defer mu.Unlock(); return count }

	config := func(name, interval string) string {
		return clitest.WriteFile(t, name, fmt.Sprintf(`kafka:
  brokers: [%s]
log: {format: json}
pipelines:
  - name: drain
    topics: [%s]
    group: %s
    value: {format: bytes}
    commit-interval: %s
    sink:
      http: {url: %s}
`, strings.Join(c.Brokers(), ", "), topic, group, interval, srv.URL))
	}
	drainOnly := config("drain.yaml", "1m") // only the drain commits in the first run
	steady := config("steady.yaml", "200ms")

	runOnce := func(file, what string, until func() bool) (int, string) {
		var stderr clitest.SyncBuffer
		cmd := exec.Command(bin, "run", "-c", file)
		cmd.Stderr = &stderr
		cmd.Stdout = io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() { _ = cmd.Process.Kill() }) // a failed wait must not leave it running
		clitest.WaitFor(t, 120*time.Second, what, until, stderr.String)
		if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		select {
		case <-exited:
		case <-time.After(60 * time.Second):
			_ = cmd.Process.Kill()
			t.Fatalf("no exit within 60s of SIGTERM\n%s", stderr.String())
		}
		return cmd.ProcessState.ExitCode(), stderr.String()
	}

	code, logs := runOnce(drainOnly, "the service to receive 300 records", func() bool { return accepts() >= 300 })
	if code != 0 {
		t.Fatalf("exit code %d after SIGTERM, want 0\n%s", code, logs)
	}
	for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is no JSON: %q", line)
		}
	}
	for _, want := range []string{`"msg":"draining`, `"msg":"stopped: settled offsets committed"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("the logs lack %s\n%s", want, logs)
		}
	}

	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		t.Fatal(err)
	}
	total := int64(0)
	mu.Lock()
	for p := int32(0); p < 3; p++ {
		o, ok := committed.Lookup(topic, p)
		if !ok {
			continue
		}
		total += o.At
		for off := int64(0); off < o.At; off++ {
			if !accepted[place{p, off}] {
				t.Errorf("partition %d committed to %d, but offset %d was never answered 2xx", p, o.At, off)
				break
			}
		}
	}
	got := len(accepted)
	mu.Unlock()
	t.Logf("SIGTERM after %d records answered: %d committed at the drain", got, total)
	if total == 0 {
		t.Fatal("nothing committed at the drain")
	}

	// A second run delivers the rest: nothing lost.
	// It runs until it has committed everything: the drain abandons a
	// record whose answer is on its way, so the commits are awaited
	// before SIGTERM, not checked after it.
	code, logs = runOnce(steady, "every record answered and committed", func() bool {
		return accepts() >= n && len(uncommitted(t, adm, group, topic)) == 0
	})
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, logs)
	}
	checkCommittedAtEnd(t, c, group, topic)
}

// TestWatchInterrupts: the first signal drains, the second forces, once.
func TestWatchInterrupts(t *testing.T) {
	sig := make(chan os.Signal, 2)
	done := make(chan struct{})
	forced := make(chan struct{}, 2)
	returned := make(chan struct{})
	go func() {
		watchInterrupts(sig, done, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { forced <- struct{}{} })
		close(returned)
	}()
	sig <- syscall.SIGTERM
	select {
	case <-forced:
		t.Fatal("the first signal forced")
	case <-time.After(100 * time.Millisecond):
	}
	sig <- os.Interrupt
	select {
	case <-forced:
	case <-time.After(10 * time.Second):
		t.Fatal("the second signal did not force")
	}
	<-returned

	// Without a second signal, done ends the watch and nothing forces.
	sig2 := make(chan os.Signal, 1)
	done2 := make(chan struct{})
	returned2 := make(chan struct{})
	go func() {
		watchInterrupts(sig2, done2, slog.New(slog.NewTextHandler(io.Discard, nil)), func() { t.Error("forced without a second signal") })
		close(returned2)
	}()
	sig2 <- os.Interrupt
	close(done2)
	<-returned2
	close(done)
}

// TestIntegrationRunExactlyOnceKilled: an exactly-once pipeline killed
// (SIGKILL) mid-way and started again forwards every record once, as a
// read_committed reader sees the output: the transaction cut by the kill
// is aborted by the next instance, and its records are read again from the
// offsets committed with the last transaction that completed. The second
// run waits for the killed member's session to time out (45 s). It runs on
// kfake only: consumer's TestIntegrationExactlyOnceKill runs on the broker.
func TestIntegrationRunExactlyOnceKilled(t *testing.T) {
	c := kafkatest.New(t)
	if c.Real() {
		t.Skip("the daemon's wiring is checked on kfake; consumer's TestIntegrationExactlyOnceKill runs on the broker")
	}
	bin := buildAntidote(t)
	src := c.Topic(t, "run-eos-kill", 2)
	out := c.Topic(t, "run-eos-kill-out", 2)
	group := kafkatest.UniqueName("run-eos-kill")
	const n = 20000
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: src, Key: []byte(strconv.Itoa(i % 13)), Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}
	}
	kafkatest.Produce(t, c.Client(t), rs...)
	file := clitest.WriteFile(t, "eos.yaml", fmt.Sprintf(`kafka:
  brokers: [%s]
pipelines:
  - name: eos
    topics: [%s]
    group: %s
    value: {format: json}
    sink:
      kafka: {topic: %s, value: decoded, exactly-once: {transactional-id: %s, max-records: 50, interval: 20ms}}
`, strings.Join(c.Brokers(), ", "), src, group, out, kafkatest.UniqueName("eos-kill-txn")))
	adm := kadm.NewClient(c.Client(t))
	start := func() (*exec.Cmd, *clitest.SyncBuffer) {
		var stderr clitest.SyncBuffer
		cmd := exec.Command(bin, "run", "-c", file)
		cmd.Stderr, cmd.Stdout = &stderr, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		return cmd, &stderr
	}
	// Killed as soon as the output has records, committed or not: before
	// the source is all read, with a transaction open.
	watch := c.Client(t, kgo.ConsumeTopics(out), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadUncommitted()))
	first, logs := start()
	wctx, wcancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer wcancel()
	for len(watch.PollFetches(wctx).Records()) == 0 {
		if wctx.Err() != nil {
			t.Fatalf("no record forwarded in 2 minutes\n%s", logs.String())
		}
	}
	if err := first.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	_ = first.Wait()
	if behind := uncommitted(t, adm, group, src); len(behind) == 0 {
		t.Fatalf("the first run committed everything before it was killed: the test needs more records\n%s", logs.String())
	}
	second, logs := start()
	clitest.WaitFor(t, 60*time.Second, "the second run ready", func() bool { return strings.Contains(logs.String(), "pipeline ready") }, logs.String)
	waitCommittedAtEnd(t, c, group, logs.String, src)
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		t.Fatalf("the second run: %v\n%s", err, logs.String())
	}
	seen := map[string]int{}
	for _, r := range readCommitted(t, c, out, n, logs.String) {
		seen[string(r.Value)]++
	}
	for _, r := range rs {
		if k := seen[string(r.Value)]; k != 1 {
			t.Errorf("%s forwarded %d times, want once", r.Value, k)
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct records in the output, want %d", len(seen), n)
	}
}
