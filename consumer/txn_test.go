package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// readCommitted reads every committed record of topic, as a read_committed
// consumer sees it, up to the end offsets at the time of the call (every
// transaction must be ended by then).
func readCommitted(t testing.TB, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	return readTxn(t, c, topic, kgo.ReadCommitted())
}

// readTxn reads a topic written in transactions with the isolation level
// given, control records left out.
func readTxn(t testing.TB, c *kafkatest.Cluster, topic string, level kgo.IsolationLevel) []*kgo.Record {
	t.Helper()
	out, err := tryReadTxn(t, c, topic, level)
	if err != nil {
		t.Fatalf("readCommitted %s: %v", topic, err)
	}
	return out
}

// tryReadTxn is readTxn, returning its error (for a check that is tried
// again until it holds).
func tryReadTxn(t testing.TB, c *kafkatest.Cluster, topic string, level kgo.IsolationLevel) ([]*kgo.Record, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Its own clients, closed on return: a check tried again every few
	// milliseconds must not leave one behind each time.
	client := func(opts ...kgo.Opt) (*kgo.Client, error) {
		return kgo.NewClient(append(append([]kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, c.ClientOpts()...), opts...)...)
	}
	adm, err := client()
	if err != nil {
		return nil, err
	}
	defer adm.Close()
	e := kadmEnds(ctx, adm, topic)
	if e.err != nil {
		return nil, fmt.Errorf("end offsets: %w", e.err)
	}
	ends := e.ends
	cl, err := client(kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(level), kgo.KeepControlRecords())
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	next := map[int32]int64{}
	reached := func() bool {
		for p, e := range ends {
			if next[p] < e {
				return false
			}
		}
		return true
	}
	var out []*kgo.Record
	for !reached() {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return nil, fmt.Errorf("at %v of %v: %w", next, ends, ctx.Err())
		}
		fs.EachRecord(func(r *kgo.Record) {
			next[r.Partition] = max(next[r.Partition], r.Offset+1)
			if !r.Attrs.IsControl() {
				out = append(out, r)
			}
		})
	}
	return out, nil
}

// committedHas reports whether a read_committed reader finds value in
// topic; false when it cannot read it now.
func committedHas(t testing.TB, c *kafkatest.Cluster, topic, value string) bool {
	recs, err := tryReadTxn(t, c, topic, kgo.ReadCommitted())
	return err == nil && slices.ContainsFunc(recs, func(r *kgo.Record) bool { return string(r.Value) == value })
}

type eosIn struct {
	ID int `json:"id"`
}

// TestIntegrationExactlyOnce: a handler produces one output per record; 1% are poison
// pills and 1% fail transiently twice, producing before they fail. The
// outputs topic holds each good record's output once (the outputs of failed
// tries are dropped), the dead-letter topic each poison pill once, all in
// committed transactions, and the group's offsets are committed at the end.
// It runs with each way records reach the handler: one at a time, keyed
// concurrency (settled out of order, written in offset order) and a batch
// handler.
func TestIntegrationExactlyOnce(t *testing.T) {
	c := kafkatest.New(t)
	for _, mode := range []string{"serial", "concurrency", "batch", "batch-concurrency"} {
		t.Run(mode, func(t *testing.T) { testExactlyOnce(t, c, mode) })
	}
}

func testExactlyOnce(t *testing.T, c *kafkatest.Cluster, mode string) {
	in, out := c.Topic(t, "eos-in", 2), c.Topic(t, "eos-out", 2)
	const n = 2000
	recs := make([]*kgo.Record, 0, n)
	poison := map[string]bool{}
	for i := 0; i < n; i++ {
		r := &kgo.Record{Topic: in, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)), Value: []byte(fmt.Sprintf(`{"id":%d}`, i))}
		if i%100 == 7 {
			r.Value = []byte{0xde, 0xad}
			poison[strconv.Itoa(i)] = true
		}
		recs = append(recs, r)
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	group := kafkatest.UniqueName("eos")
	handle := func(r *consumer.Record[string, eosIn]) error {
		if r.Value.ID%100 == 11 {
			if err := r.Produce(&kgo.Record{Value: []byte("no topic")}); err == nil {
				t.Errorf("Produce of a record without a topic: no error")
			}
		}
		if err := r.Produce(&kgo.Record{Topic: out, Key: []byte(r.Key), Value: []byte(strconv.Itoa(r.Value.ID))}); err != nil {
			return err
		}
		if r.Value.ID%100 == 3 && r.Attempt <= 2 {
			return failure.Transient(errors.New("flaky")) // its output is dropped
		}
		return nil
	}
	cfg := consumer.Config[string, eosIn]{
		Brokers: c.Brokers(), Topics: []string{in}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.JSON[eosIn](),
		Policy:      consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(5*time.Millisecond), 5)}}},
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eos-txn"), MaxRecords: 100},
		Handler:     func(_ context.Context, r *consumer.Record[string, eosIn]) error { return handle(r) },
	}
	switch mode {
	case "concurrency":
		cfg.Concurrency = consumer.Concurrency{Max: 8}
	case "batch", "batch-concurrency":
		if mode == "batch-concurrency" {
			cfg.Concurrency = consumer.Concurrency{Max: 4}
		}
		cfg.Handler = nil
		cfg.Batching = consumer.Batching{Size: 50}
		cfg.BatchHandler = asBatch(func(_ context.Context, r *consumer.Record[string, eosIn]) error { return handle(r) })
	}
	cons, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	// Settled and committed: with lanes or shards a record is counted as
	// processed before the worker writes it into a transaction, so the
	// counters alone do not say that every output is in one.
	ends := endOffsets(t, c.Client(t), in)
	kafkatest.WaitFor(t, time.Minute, "every record settled and committed", func() bool {
		s := cons.Stats()
		return s.Processed+s.DeadLettered >= n && fmt.Sprint(committed(t, c, group, in)) == fmt.Sprint(ends)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := cons.Stats()
	t.Logf("%s: %d transactions committed, %d aborted", c.Kind(), s.TransactionsCommitted, s.TransactionsAborted)
	// A transaction commits after MaxRecords (100) settled; what settles
	// while it commits goes to the next (up to MaxRecords more), so each
	// holds at most a few hundred.
	if s.TransactionsCommitted < n/400 {
		t.Errorf("%d transactions committed for %d records, at most 100 settled before each began to commit", s.TransactionsCommitted, n)
	}
	seen := map[string]int{}
	for _, r := range readCommitted(t, c, out) {
		seen[string(r.Key)]++
	}
	for i := 0; i < n; i++ {
		k := strconv.Itoa(i)
		if want := map[bool]int{true: 0, false: 1}[poison[k]]; seen[k] != want {
			t.Errorf("output of %s: %d times, want %d", k, seen[k], want)
		}
	}
	dl := readCommitted(t, c, in+".dlq")
	letters := map[string]int{}
	for _, r := range dl {
		letters[string(r.Key)]++
	}
	if len(dl) != len(poison) {
		t.Errorf("%d dead letters, want %d", len(dl), len(poison))
	}
	for k := range poison {
		if letters[k] != 1 {
			t.Errorf("poison pill %s: %d dead letters, want 1", k, letters[k])
		}
	}
	if got := committed(t, c, group, in); fmt.Sprint(got) != fmt.Sprint(ends) {
		t.Errorf("committed %v, want the end offsets %v", got, ends)
	}
}

func TestExactlyOnceConfig(t *testing.T) {
	base := func() consumer.Config[string, string] {
		return consumer.Config[string, string]{
			Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Value: serde.String(),
			Handler:     func(context.Context, *consumer.Record[string, string]) error { return nil },
			ExactlyOnce: consumer.ExactlyOnce{TransactionalID: "tx"},
		}
	}
	for _, tc := range []struct {
		field string
		edit  func(*consumer.Config[string, string])
	}{
		{"ExactlyOnce.MaxRecords", func(c *consumer.Config[string, string]) { c.ExactlyOnce.MaxRecords = -1 }},
		{"ExactlyOnce.Interval", func(c *consumer.Config[string, string]) { c.ExactlyOnce.Interval = time.Millisecond }},
		{"ExactlyOnce.TransactionalID", func(c *consumer.Config[string, string]) {
			c.ExactlyOnce = consumer.ExactlyOnce{MaxRecords: 10}
		}},
	} {
		cfg := base()
		tc.edit(&cfg)
		_, err := consumer.New(cfg)
		if !errors.Is(err, consumer.ErrConfig) || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("want a config error naming %s, got %v", tc.field, err)
		}
	}
}

func TestRecordProduce(t *testing.T) {
	var r consumer.Record[string, string]
	if err := r.Produce(&kgo.Record{Topic: "out"}); !errors.Is(err, consumer.ErrNotTransactional) {
		t.Errorf("Produce without ExactlyOnce: %v, want ErrNotTransactional", err)
	}
}

// eosConsumer is an exactly-once consumer of in that writes each record's
// value to out; opts are added to its client's options.
func eosConsumer(t *testing.T, c *kafkatest.Cluster, in, out, group, txid string, opts ...kgo.Opt) *consumer.Consumer[string, string] {
	t.Helper()
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{in}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: txid, MaxRecords: 50},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
		},
		ClientOpts: opts,
	})
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// describedTxns counts the DescribeTransactions requests a client's broker
// answered: an idle exactly-once member's fence checks.
type describedTxns struct{ n atomic.Int32 }

func (h *describedTxns) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e2e kgo.BrokerE2E) {
	if key == int16(kmsg.DescribeTransactions) && e2e.Err() == nil {
		h.n.Add(1)
	}
}

// TestIntegrationExactlyOnceIdle: a member whose transactions committed and
// that then has nothing to write checks now and then that it is not fenced
// (see TestIntegrationExactlyOnceFenced); a healthy one is never taken for
// fenced, and goes on when records come.
func TestIntegrationExactlyOnceIdle(t *testing.T) {
	c := kafkatest.New(t)
	in, out := c.Topic(t, "eosidle-in", 1), c.Topic(t, "eosidle-out", 1)
	const n = 100
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}
	}
	prod := manualProducer(t, c)
	kafkatest.Produce(t, prod, recs[:n/2]...)
	group := kafkatest.UniqueName("eosidle")
	checks := &describedTxns{}
	cons := eosConsumer(t, c, in, out, group, kafkatest.UniqueName("eosidle-txn"), kgo.WithHooks(checks))
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "the first half processed", func() bool { return cons.Stats().Processed >= n/2 })
	// Idle, the workload's pause: two fence checks answered.
	before := checks.n.Load()
	kafkatest.WaitFor(t, 30*time.Second, "two fence checks while idle", func() bool { return checks.n.Load() >= before+2 })
	if !cons.Stats().Running {
		t.Fatal("the idle member stopped")
	}
	kafkatest.Produce(t, prod, recs[n/2:]...)
	kafkatest.WaitFor(t, time.Minute, "the second half processed", func() bool { return cons.Stats().Processed >= n })
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutputsOrLetters(t, c, in, out, n, 0)
}

// TestExactlyOnceFailedOutput: the first produce of an output fails (a
// non-retryable error from the broker, once). The transaction is aborted,
// its records are handled again from the committed offsets and written
// again; in the end each record has exactly one output and none is
// dead-lettered.
func TestExactlyOnceFailedOutput(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	in, out := c.Topic(t, "eosfail-in", 1), c.Topic(t, "eosfail-out", 1)
	const n = 300
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	failed := failFirstTxnProduce(c) // outputs only: no record here is a poison pill
	group := kafkatest.UniqueName("eosfail")
	cons := eosConsumer(t, c, in, out, group, kafkatest.UniqueName("eosfail-txn"))
	stop := runConsumer(t, cons)
	ends := endOffsets(t, c.Client(t), in)
	kafkatest.WaitFor(t, time.Minute, "the group's offsets at the end", func() bool {
		return fmt.Sprint(committed(t, c, group, in)) == fmt.Sprint(ends)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := cons.Stats()
	if !failed.Load() || s.TransactionsAborted == 0 {
		t.Fatalf("injected failure %v, %d transactions aborted: the failed write did not abort one", failed.Load(), s.TransactionsAborted)
	}
	checkOutputsOrLetters(t, c, in, out, n, 0)
	t.Logf("%d transactions committed, %d aborted; %d records handled for %d", s.TransactionsCommitted, s.TransactionsAborted, s.Processed, n)
}

// checkOutputsOrLetters checks that each of the n records of in (keys 0 to
// n-1) has exactly one output in out or one dead letter, and that letters
// records have a dead letter.
func checkOutputsOrLetters(t *testing.T, c *kafkatest.Cluster, in, out string, n, letters int) {
	t.Helper()
	seen := map[string]int{}
	for _, r := range readCommitted(t, c, out) {
		seen[string(r.Key)]++
	}
	dl := readCommitted(t, c, in+".dlq")
	for _, r := range dl {
		seen[string(r.Key)]++
	}
	for i := 0; i < n; i++ {
		if k := strconv.Itoa(i); seen[k] != 1 {
			t.Errorf("record %s: %d outputs and dead letters, want 1", k, seen[k])
		}
	}
	if len(dl) != letters {
		t.Errorf("%d dead letters, want %d", len(dl), letters)
	}
}

// TestIntegrationExactlyOnceFenced: a second consumer that starts with the same
// transactional id fences the first, which stops with a *HaltError; the
// second goes on, and every output is committed once.
func TestIntegrationExactlyOnceFenced(t *testing.T) {
	c := kafkatest.New(t)
	in, out := c.Topic(t, "eosfence-in", 1), c.Topic(t, "eosfence-out", 1)
	const n = 200
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs[:n/2]...)
	group, txid := kafkatest.UniqueName("eosfence"), kafkatest.UniqueName("eosfence-txn")
	first := eosConsumer(t, c, in, out, group, txid)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- first.Run(ctx) }()
	kafkatest.WaitFor(t, time.Minute, "the first half processed", func() bool { return first.Stats().TransactionsCommitted > 0 && first.Stats().Processed >= n/2 })

	second := eosConsumer(t, c, in, out, group, txid) // the same id: fences the first
	stop := runConsumer(t, second)
	kafkatest.Produce(t, manualProducer(t, c), recs[n/2:]...)
	select {
	case err := <-errc:
		var h *consumer.HaltError
		if !errors.As(err, &h) || h.Stage != "transaction" {
			t.Fatalf("the fenced consumer's Run returned %v, want a *HaltError of stage transaction", err)
		}
		t.Logf("fenced: %v", err)
	case <-ctx.Done():
		t.Fatal("the fenced consumer did not stop")
	}
	ends := endOffsets(t, c.Client(t), in)
	kafkatest.WaitFor(t, time.Minute, "the group's offsets at the end", func() bool {
		return fmt.Sprint(committed(t, c, group, in)) == fmt.Sprint(ends)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOutputsOrLetters(t, c, in, out, n, 0)
}

// TestIntegrationExactlyOnceUnwritableOutput: one record's output goes to a
// topic that does not exist, so its transaction can never commit. After
// three aborted transactions in a row, its failed write fails the record,
// and the policy dead-letters it (permanent). Every other output is
// committed once, and the group's offsets reach the end: no abort loop.
func TestIntegrationExactlyOnceUnwritableOutput(t *testing.T) {
	c := kafkatest.New(t)
	in, out := c.Topic(t, "eosbad-in", 1), c.Topic(t, "eosbad-out", 1)
	missing := kafkatest.UniqueName("eosbad-missing")
	const n, bad = 200, 57
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	group := kafkatest.UniqueName("eosbad")
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{in}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosbad-txn"), MaxRecords: 50},
		ClientOpts:  []kgo.Opt{kgo.UnknownTopicRetries(2)},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			to := out
			if r.Value == strconv.Itoa(bad) {
				to = missing
			}
			return r.Produce(&kgo.Record{Topic: to, Key: r.Raw.Key, Value: r.Raw.Value})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	ends := endOffsets(t, c.Client(t), in)
	kafkatest.WaitFor(t, 2*time.Minute, "the group's offsets at the end", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := kadmCommitted(ctx, c.Client(t), group, in)
		return err == nil && fmt.Sprint(got) == fmt.Sprint(ends) // no group before the first commit
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := cons.Stats()
	t.Logf("%s: %d transactions committed, %d aborted; %d processed, %d dead-lettered", c.Kind(), s.TransactionsCommitted, s.TransactionsAborted, s.Processed, s.DeadLettered)
	if s.TransactionsAborted < 3 || s.TransactionsAborted > 4 {
		t.Errorf("%d transactions aborted, want 3 (the failed write three times; then the policy settles the record), or 4 with a rebalance", s.TransactionsAborted)
	}
	seen := map[string]int{}
	for _, r := range readCommitted(t, c, out) {
		seen[string(r.Key)]++
	}
	for i := 0; i < n; i++ {
		want := 1
		if i == bad {
			want = 0
		}
		if k := strconv.Itoa(i); seen[k] != want {
			t.Errorf("output of %s: %d times, want %d", k, seen[k], want)
		}
	}
	dl := readCommitted(t, c, in+".dlq")
	if len(dl) != 1 || string(dl[0].Key) != strconv.Itoa(bad) {
		t.Fatalf("dead letters %d (want 1, of record %d)", len(dl), bad)
	}
	f, err := deadletter.ParseRecord(dl[0])
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(f.Message, "could not be written") || f.Class != "permanent" {
		t.Errorf("dead letter: class %s, message %q", f.Class, f.Message)
	}
}

// TestExactlyOnceAbortKeepsPause: an operator pause outlives an aborted
// transaction, which restarts every partition worker: the paused partition
// handles nothing until Resume.
func TestExactlyOnceAbortKeepsPause(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	in, out := c.Topic(t, "eospause-in", 2), c.Topic(t, "eospause-out", 2)
	group := kafkatest.UniqueName("eospause")
	cons := eosConsumer(t, c, in, out, group, kafkatest.UniqueName("eospause-txn"))
	stop := runConsumer(t, cons)
	const n = 100
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs[:2]...) // one record each: the workers start
	kafkatest.WaitFor(t, time.Minute, "the first records processed", func() bool { return cons.Stats().Processed == 2 })
	if err := cons.Pause(in, 1); err != nil {
		t.Fatal(err)
	}
	failed := failFirstTxnProduce(c) // an output of partition 0
	kafkatest.Produce(t, manualProducer(t, c), recs[2:]...)
	kafkatest.WaitFor(t, time.Minute, "partition 0 committed to its end", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		got, err := kadmCommitted(ctx, c.Client(t), group, in)
		return err == nil && got[0] == n/2
	})
	s := cons.Stats()
	if !failed.Load() || s.TransactionsAborted == 0 {
		t.Fatalf("injected %v, %d transactions aborted: no abort to test", failed.Load(), s.TransactionsAborted)
	}
	for _, p := range s.Partitions {
		if p.Partition == 1 && p.Paused != consumer.PauseOperator {
			t.Errorf("partition 1 after the abort: paused %q, want %q", p.Paused, consumer.PauseOperator)
		}
	}
	if err := cons.Resume(in, 1); err != nil {
		t.Fatal(err)
	}
	ends := endOffsets(t, c.Client(t), in)
	kafkatest.WaitFor(t, time.Minute, "every partition committed to its end", func() bool {
		return fmt.Sprint(committed(t, c, group, in)) == fmt.Sprint(ends)
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	checkOutputsOrLetters(t, c, in, out, n, 0)
}

// TestExactlyOnceUnreachableAtStart: with no cluster to talk to, Run keeps
// trying to begin its transactions instead of halting, and returns nil when
// its context ends.
func TestExactlyOnceUnreachableAtStart(t *testing.T) {
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Logger: kafkatest.Logger(t),
		Value:       serde.String(),
		Handler:     func(context.Context, *consumer.Record[string, string]) error { return nil },
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: "tx"},
		DeadLetter:  consumer.DeadLetterConfig{WriteTimeout: time.Second}, // bounds one try (2 s)
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Second) // a few tries
	defer cancel()
	if err := cons.Run(ctx); err != nil {
		t.Fatalf("Run with the cluster unreachable: %v, want nil after its context ends", err)
	}
	if h := cons.Stats().Halted; h != 0 {
		t.Errorf("halted %d times", h)
	}
}

// failFirstTxnProduce makes kfake reject the first transactional produce
// request (every record in it, INVALID_RECORD) and pass every other. It
// reports whether it did.
func failFirstTxnProduce(c *kafkatest.Cluster) *atomic.Bool {
	return failTxnProduceOnce(c, func() bool { return true })
}

// failTxnProduceOnce rejects, like failFirstTxnProduce, the first
// transactional produce request that comes while armed reports true.
func failTxnProduceOnce(c *kafkatest.Cluster, armed func() bool) *atomic.Bool {
	failed := new(atomic.Bool)
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		pr := req.(*kmsg.ProduceRequest)
		if pr.TransactionID == nil || !armed() || !failed.CompareAndSwap(false, true) {
			c.Fake().KeepControl()
			return nil, nil, false
		}
		c.Fake().KeepControl() // the function stays, passing every later request
		return refusal(pr, invalidRecord), nil, true
	})
	return failed
}

// TestExactlyOnceOldTimestamp: a handler forwards records with their own
// timestamps, two hours old. franz-go counts its delivery timeout from a
// record's timestamp, so with the client's timeout these outputs failed at
// once, in every transaction, until they were dead-lettered; each has
// exactly one output and there is no dead letter.
func TestExactlyOnceOldTimestamp(t *testing.T) {
	c := kafkatest.New(t)
	in, out := c.Topic(t, "eosold-in", 2), c.Topic(t, "eosold-out", 2)
	const n = 40
	old := time.Now().Add(-2 * time.Hour).Truncate(time.Millisecond)
	recs := make([]*kgo.Record, n)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i)), Timestamp: old}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{in}, Group: kafkatest.UniqueName("eosold"), Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosold-txn")},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value, Timestamp: r.Raw.Timestamp})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "every record settled", func() bool {
		s := cons.Stats()
		return s.Processed+s.DeadLettered >= n
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	checkOutputsOrLetters(t, c, in, out, n, 0)
	for _, r := range readCommitted(t, c, out) {
		if !r.Timestamp.Equal(old) {
			t.Fatalf("output %s has timestamp %v, want the handler's %v", r.Key, r.Timestamp, old)
		}
	}
}

// TestIntegrationClientGoesBack: the client's position in a partition goes
// back to records the consumer was handed already, outside any abort or
// assignment (franz-go does so when a failed load of a start offset is
// tried again after a newer assignment loaded the partition; here the test
// moves it with SetOffsets). The records are not handled again: with
// exactly-once, each still has one committed output; with the commit
// ledger, the handler sees each once.
func TestIntegrationClientGoesBack(t *testing.T) {
	c := kafkatest.New(t)
	for _, mode := range []string{"exactly-once", "ledger"} {
		t.Run(mode, func(t *testing.T) {
			in, out := c.Topic(t, "back-in", 1), c.Topic(t, "back-out", 1)
			group := kafkatest.UniqueName("back")
			produce := func(from, to int) {
				recs := make([]*kgo.Record, 0, to-from)
				for i := from; i < to; i++ {
					recs = append(recs, &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
				}
				kafkatest.Produce(t, manualProducer(t, c), recs...)
			}
			var calls sync.Map // offset -> *atomic.Int32
			cfg := consumer.Config[string, string]{
				Brokers: c.Brokers(), Topics: []string{in}, Group: group, Logger: kafkatest.Logger(t),
				Key: serde.String(), Value: serde.String(),
				Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
					n, _ := calls.LoadOrStore(r.Raw.Offset, new(atomic.Int32))
					n.(*atomic.Int32).Add(1)
					if mode != "exactly-once" {
						return nil
					}
					return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
				},
			}
			if mode == "exactly-once" {
				cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("back-txn"), MaxRecords: 50}
			}
			cons, err := consumer.New(cfg)
			if err != nil {
				t.Fatal(err)
			}
			const n = 100
			produce(0, n)
			stop := runConsumer(t, cons)
			atEnd := func() {
				ends := endOffsets(t, c.Client(t), in)
				kafkatest.WaitFor(t, time.Minute, "the group's offsets at the end", func() bool {
					return fmt.Sprint(committed(t, c, group, in)) == fmt.Sprint(ends)
				})
			}
			atEnd()
			cons.Client().SetOffsets(map[string]map[int32]kgo.EpochOffset{in: {0: {Epoch: -1, Offset: 0}}})
			produce(n, 2*n)
			atEnd()
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if mode == "exactly-once" {
				checkOutputsOrLetters(t, c, in, out, 2*n, 0)
			}
			for off := int64(0); off < 2*n; off++ {
				v, ok := calls.Load(off)
				if got := int32(0); !ok || v.(*atomic.Int32).Load() != 1 {
					if ok {
						got = v.(*atomic.Int32).Load()
					}
					t.Errorf("offset %d handled %d times, want 1", off, got)
				}
			}
		})
	}
}
