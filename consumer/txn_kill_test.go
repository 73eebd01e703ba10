package consumer_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// The exactly-once kill test runs the consumer in child processes (this
// test binary, running TestExactlyOnceChild) that it kills with SIGKILL.
// Each child appends "id pid" to a shared file after each successful
// handler call: the calls made, committed or not.
const (
	envEOSChild = "ANTIDOTE_EOS_CHILD"
	envEOSOut   = "ANTIDOTE_EOS_OUT"
	envEOSMode  = "ANTIDOTE_EOS_MODE" // "concurrency": keyed lanes, else one at a time
)

// TestExactlyOnceChild is the consumer of TestIntegrationExactlyOnceKill; it
// skips itself unless started by it.
func TestExactlyOnceChild(t *testing.T) {
	if os.Getenv(envEOSChild) != "1" {
		t.Skip("run by TestIntegrationExactlyOnceKill")
	}
	calls, err := os.OpenFile(os.Getenv(envLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer calls.Close()
	pid := " " + strconv.Itoa(os.Getpid()) + "\n"
	out := os.Getenv(envEOSOut)
	instance := os.Getenv(envInstance)
	var conc consumer.Concurrency
	if os.Getenv(envEOSMode) == "concurrency" {
		// Records settle out of order; the transactions must still
		// commit no output past a record that is not settled.
		conc = consumer.Concurrency{Max: 8}
	}
	c, err := consumer.New(consumer.Config[string, eosIn]{
		Concurrency: conc,
		Brokers:     strings.Split(os.Getenv(envBrokers), ","), Topics: []string{os.Getenv(envTopic)}, Group: os.Getenv(envGroup),
		Logger: kafkatest.Logger(t), Key: serde.String(), Value: serde.JSON[eosIn](),
		// The same transactional id after a restart: the new process
		// fences the killed one and aborts its open transaction.
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: os.Getenv(envGroup) + "-" + instance},
		ClientOpts: []kgo.Opt{
			kgo.InstanceID(instance), kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(500 * time.Millisecond),
		},
		Handler: func(_ context.Context, r *consumer.Record[string, eosIn]) error {
			time.Sleep(200 * time.Microsecond) // a little work, so that kills land mid-transaction
			if err := r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: []byte(strconv.Itoa(r.Value.ID))}); err != nil {
				return err
			}
			if _, err := calls.WriteString(strconv.Itoa(r.Value.ID) + pid); err != nil {
				panic(err)
			}
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

// TestIntegrationExactlyOnceKill: 20,000 records over 4 partitions, 1% of
// them poison pills; the handler produces one output per good record. The
// consumer is killed with SIGKILL 5 times mid-run and restarted. A
// read_committed reader of the outputs sees each good record's output
// exactly once, the dead-letter topic holds each poison pill exactly once,
// and the group's offsets reach the end.
func TestIntegrationExactlyOnceKill(t *testing.T) {
	if testing.Short() {
		t.Skip("-short")
	}
	c := kafkatest.New(t)
	for _, mode := range []string{"serial", "concurrency"} {
		t.Run(mode, func(t *testing.T) { testExactlyOnceKill(t, c, mode) })
	}
}

func testExactlyOnceKill(t *testing.T, c *kafkatest.Cluster, mode string) {
	in, out := c.Topic(t, "eoskill-in", 4), c.Topic(t, "eoskill-out", 4)
	group := kafkatest.UniqueName("eoskill")
	const total = 20000
	recs := make([]*kgo.Record, 0, total)
	poison := map[string]bool{}
	for i := 0; i < total; i++ {
		r := &kgo.Record{Topic: in, Partition: int32(i % 4), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf(`{"id":%d}`, i))}
		if i%100 == 42 {
			r.Value = []byte{0xde, 0xad, 0xbe, 0xef}
			poison[strconv.Itoa(i)] = true
		}
		recs = append(recs, r)
	}
	prod := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(total))
	kafkatest.Produce(t, prod, recs...)

	dir := t.TempDir()
	logPath := filepath.Join(dir, "calls.log")
	var child *exec.Cmd
	start := func() {
		child = exec.Command(os.Args[0], "-test.run=^TestExactlyOnceChild$", "-test.timeout=10m", "-test.v")
		child.Env = append(os.Environ(), envEOSChild+"=1", envBrokers+"="+strings.Join(c.Brokers(), ","), envTopic+"="+in,
			envGroup+"="+group, envLog+"="+logPath, envInstance+"=a", envEOSOut+"="+out, envEOSMode+"="+mode, kafkatest.EnvBrokers+"=")
		f, err := os.OpenFile(filepath.Join(dir, "child.out"), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		child.Stdout, child.Stderr = f, f
		if err := child.Start(); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() {
		if child != nil {
			_ = child.Process.Kill()
			_ = child.Wait()
		}
		if t.Failed() {
			b, _ := os.ReadFile(filepath.Join(dir, "child.out"))
			ls := strings.Split(string(b), "\n")
			t.Logf("last lines of the child:\n%s", strings.Join(ls[max(len(ls)-40, 0):], "\n"))
		}
	})
	calls := func() map[string]int {
		b, _ := os.ReadFile(logPath)
		n := map[string]int{}
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 2 {
				n[f[0]]++
			}
		}
		return n
	}
	start()
	for _, at := range []int{3000, 6000, 9000, 12000, 15000} {
		kafkatest.WaitFor(t, 3*time.Minute, fmt.Sprintf("%d records handled", at), func() bool { return len(calls()) >= at })
		_ = child.Process.Kill() // SIGKILL
		_ = child.Wait()
		t.Logf("killed at %d records handled", len(calls()))
		start()
	}
	ends := endOffsets(t, c.Client(t), in)
	kafkatest.WaitFor(t, 4*time.Minute, "the group's offsets at the end", func() bool {
		return fmt.Sprint(committed(t, c, group, in)) == fmt.Sprint(ends)
	})
	_ = child.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- child.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("child after SIGTERM: %v", err)
		}
	case <-time.After(time.Minute):
		t.Errorf("child did not stop within a minute of SIGTERM")
	}
	child = nil

	handled := calls()
	again := 0
	for _, n := range handled {
		again += n - 1
	}
	outputs := readCommitted(t, c, out)
	seen := map[string]int{}
	for _, r := range outputs {
		seen[string(r.Key)]++
	}
	dups, missing := 0, 0
	for i := 0; i < total; i++ {
		k := strconv.Itoa(i)
		want := 1
		if poison[k] {
			want = 0
		}
		switch n := seen[k]; {
		case n > want:
			if dups++; dups <= 5 {
				t.Errorf("output of %s seen %d times", k, n)
			}
		case n < want:
			if missing++; missing <= 5 {
				t.Errorf("output of %s missing", k)
			}
		}
	}
	letters := map[string]int{}
	dl := readCommitted(t, c, in+".dlq")
	for _, r := range dl {
		letters[string(r.Key)]++
	}
	for k := range poison {
		if letters[k] != 1 {
			t.Errorf("poison pill %s: %d dead letters, want 1", k, letters[k])
		}
	}
	if len(dl) != len(poison) {
		t.Errorf("%d dead letters, want %d", len(dl), len(poison))
	}
	uncommitted := len(readTxn(t, c, out, kgo.ReadUncommitted()))
	t.Logf("%s: 5 kills; %d handler calls made again after a kill; outputs: %d committed (%d duplicates, %d missing), %d written including aborted transactions; %d dead letters",
		c.Kind(), again, len(outputs), dups, missing, uncommitted, len(dl))
	if again == 0 {
		t.Errorf("no record was handled again after a kill: the kills did not land inside a transaction")
	}
}
