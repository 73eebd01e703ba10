package integration_test

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// The environment of the redrive that TestIntegrationRedriveExactlyOnceKill
// runs in a child process and kills.
const (
	envChildBrokers = "ANTIDOTE_TEST_REDRIVE_BROKERS"
	envChildDLQ     = "ANTIDOTE_TEST_REDRIVE_DLQ"
)

// TestRedriveChild is the child process of the kill test: an exactly-once
// redrive, slowed down so that the kill lands in the middle.
func TestRedriveChild(t *testing.T) {
	brokers, dlq := os.Getenv(envChildBrokers), os.Getenv(envChildDLQ)
	if brokers == "" || dlq == "" {
		t.Skip("the child of TestIntegrationRedriveExactlyOnceKill")
	}
	cfg := deadletter.RedriveConfig{Topic: dlq, ExactlyOnce: true, Rate: 250, BatchTime: 200 * time.Millisecond}
	cl, err := kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(strings.Split(brokers, ",")...)}, deadletter.ScanOpts()...),
		deadletter.RedriveTxnOpts(cfg.DefaultGroup())...)...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err = deadletter.Redrive(ctx, cl, cfg)
	t.Fatalf("the redrive was to be killed, it ended: %v", err)
}

// An exactly-once redrive killed with SIGKILL in the middle, then run
// again: a read_committed reader of the target sees every letter once.
func TestIntegrationRedriveExactlyOnceKill(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t, append(deadletter.ScanOpts(), kgo.ProducerLinger(5*time.Millisecond))...)
	src, dlq := c.Topic(t, "src", 3), c.Topic(t, "dlq", 2)
	const n = 1000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{Topic: dlq, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)),
			Headers: kafkatest.Headers(antidoteLetter(hs{h("n", strconv.Itoa(i))}, src, int32(i%3), int64(i)))}
	}
	kafkatest.Produce(t, cl, rs...)

	child := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestRedriveChild$", "-test.v")
	child.Env = append(os.Environ(), envChildBrokers+"="+strings.Join(c.Brokers(), ","), envChildDLQ+"="+dlq,
		kafkatest.EnvBrokers+"=")
	var out strings.Builder
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	// Kill it once a good part of the letters went out, committed or not.
	adm := kadm.NewClient(cl)
	var produced int64
	waited := false
	defer func() {
		if !waited { // the wait failed: end the child and show its output
			_ = child.Process.Kill()
			_ = child.Wait()
			t.Logf("the child produced %d records: %s", produced, out.String())
		}
	}()
	kafkatest.WaitFor(t, time.Minute, "the child redrive to write a third of the letters", func() bool {
		ends, err := adm.ListEndOffsets(ctx, src)
		produced = 0
		if err == nil {
			ends.Each(func(o kadm.ListedOffset) { produced += o.Offset })
		}
		return produced >= n/3
	})
	waited = true
	t.Logf("%s: killing the redrive with %d records in the target (committed or not)", c.Kind(), produced)
	if err := child.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = child.Wait()
	if strings.Contains(out.String(), "was to be killed") {
		t.Fatalf("the child ended before the kill:\n%s", out.String())
	}

	cfg := deadletter.RedriveConfig{Topic: dlq, ExactlyOnce: true}
	txn := c.Client(t, append(deadletter.ScanOpts(), deadletter.RedriveTxnOpts(cfg.DefaultGroup())...)...)
	res, err := deadletter.Redrive(ctx, txn, cfg)
	if err != nil {
		t.Fatalf("resumed redrive: %v", err)
	}
	t.Logf("the resumed redrive redrove %d of %d letters", res.Redriven, n)
	if res.Redriven == 0 || res.Redriven == n {
		t.Errorf("the resumed redrive redrove %d of %d: the kill did not land in the middle", res.Redriven, n)
	}

	// The coordinator writes the markers of the fenced transaction and of
	// the last commit after EndTxn has returned: wait until the target's
	// last stable offsets reach its end before reading it read_committed.
	waitStable(t, adm, src)

	// read_committed (ScanOpts): every letter exactly once.
	seen := map[string]int{}
	for _, r := range readAll(t, cl, src) {
		seen[string(r.Value)]++
	}
	for i := range n {
		if k := strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("letter %s arrived %d times", k, seen[k])
		}
	}
	if len(seen) != n {
		t.Errorf("%d distinct records in the target, want %d", len(seen), n)
	}
	// The log holds more offsets than records read when the kill cut a
	// transaction (its records are aborted) or markers were written
	// (logged, not asserted: the kill may land between two
	// transactions).
	ends, err := adm.ListEndOffsets(ctx, src)
	if err == nil {
		var logged int64
		ends.Each(func(o kadm.ListedOffset) { logged += o.Offset })
		t.Logf("the target's log has %d offsets for %d records", logged, n)
	}
}

// waitStable waits (30s at most) until every partition of topic has its last
// stable offset at its high watermark: no transaction is open or unmarked.
func waitStable(t *testing.T, adm *kadm.Client, topic string) {
	t.Helper()
	var ends kadm.ListedOffsets
	var stable kadm.ListedOffsets
	var err1, err2 error
	defer func() {
		if t.Failed() {
			t.Logf("%s: last stable offsets %v, ends %v (%v, %v)", topic, stable, ends, err1, err2)
		}
	}()
	kafkatest.WaitFor(t, 30*time.Second, topic+": last stable offsets at the end", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		ends, err1 = adm.ListEndOffsets(ctx, topic)
		stable, err2 = adm.ListCommittedOffsets(ctx, topic)
		if err1 != nil || err2 != nil {
			return false
		}
		same := true
		ends.Each(func(o kadm.ListedOffset) {
			if s, ok := stable.Lookup(topic, o.Partition); !ok || s.Offset != o.Offset {
				same = false
			}
		})
		return same
	})
}
