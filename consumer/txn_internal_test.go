package consumer

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestExactlyOnceRevokeDuringCommit: a partition revoked while a commit's
// EndTxn is in flight, with records of it settled meanwhile. franz-go lets the revoke callback run once the
// EndTxn is answered and then resets its revoked flag, so the revoke no
// longer aborts the next transaction, which holds the marks and outputs of
// that partition's records settled during the commit (its next owner
// handles them again). The next transaction that holds anything is
// aborted, and each record still has one committed output. The revoke's
// effect on the transaction is made here by the call the consumer's revoke
// callback makes (forgetKnown), while the EndTxn is held.
func TestExactlyOnceRevokeDuringCommit(t *testing.T) {
	kc := kafkatest.New(t)
	if kc.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	in, out := kc.Topic(t, "eosrev-in", 2), kc.Topic(t, "eosrev-out", 1)
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	kc.Fake().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
		kc.Fake().KeepControl()
		if !req.(*kmsg.EndTxnRequest).Commit {
			return nil, nil, false
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(held)
			kc.Fake().SleepControl(func() { <-release })
		}
		return nil, nil, false
	})
	prod := kc.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	produce := func(from, to int) {
		var recs []*kgo.Record
		for i := from; i < to; i++ {
			recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
		}
		kafkatest.Produce(t, prod, recs...)
	}
	group := kafkatest.UniqueName("eosrev")
	c, err := New(Config[string, string]{
		Brokers: kc.Brokers(), Topics: []string{in}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		ExactlyOnce: ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosrev-txn")},
		Handler: func(_ context.Context, r *Record[string, string]) error {
			if r.Raw.Partition == 0 {
				time.Sleep(20 * time.Millisecond) // still settling while the first commit runs
			}
			return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer runTxnConsumer(t, c)()
	produce(0, 40)
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("no commit")
	}
	kafkatest.WaitFor(t, time.Minute, "a record of partition 0 settled for the next transaction", func() bool {
		c.txn.mu.Lock()
		defer c.txn.mu.Unlock()
		_, ok := c.txn.next[tp{in, 0}]
		return ok
	})
	c.txn.forgetKnown(map[string][]int32{in: {0}}, true) // what the revoke callback does to the transaction
	close(release)
	kafkatest.WaitFor(t, time.Minute, "every record's output", func() bool { return len(readOutputs(t, kc, out)) >= 40 })
	s := c.Stats()
	if s.TransactionsAborted < 1 {
		t.Errorf("%d transactions aborted after a partition was revoked during a commit, want at least 1", s.TransactionsAborted)
	}
	seen := map[string]int{}
	for _, r := range readOutputs(t, kc, out) {
		seen[string(r.Key)]++
	}
	for i := range 40 {
		if n := seen[strconv.Itoa(i)]; n != 1 {
			t.Errorf("record %d: %d outputs, want 1", i, n)
		}
	}
}

// readOutputs reads every committed record of topic (one partition) up to
// its end offset now.
func readOutputs(t *testing.T, kc *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cl := kc.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer cl.Close()
	listed, err := kadm.NewClient(cl).ListCommittedOffsets(ctx, topic)
	if err == nil {
		err = listed.Error()
	}
	if err != nil {
		t.Fatal(err)
	}
	ends := listed[topic][0].Offset
	var recs []*kgo.Record
	var next int64
	for next < ends {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("reading %s: at %d of %d", topic, next, ends)
		}
		fs.EachRecord(func(r *kgo.Record) {
			next = r.Offset + 1
			recs = append(recs, r)
		})
		fs.EachPartition(func(p kgo.FetchTopicPartition) {
			next = max(next, p.LastStableOffset) // past the control records
		})
	}
	return recs
}

// TestExactlyOnceFloorAtAssignment: in the exactly-once mode a partition
// assigned gets its floor at the group's committed offset before any record
// is taken, so that a stale load of its start offset (franz-go tries a
// failed one again after a newer assignment) cannot hand the committed
// records out again.
func TestExactlyOnceFloorAtAssignment(t *testing.T) {
	kc := kafkatest.New(t)
	in, out := kc.Topic(t, "eosfloor-in", 1), kc.Topic(t, "eosfloor-out", 1)
	prod := kc.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for i := range 30 {
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte(strconv.Itoa(i)), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.Produce(t, prod, recs...)
	group := kafkatest.UniqueName("eosfloor")
	run := func() (*Consumer[string, string], func()) {
		c, err := New(Config[string, string]{
			Brokers: kc.Brokers(), Topics: []string{in}, Group: group, Logger: kafkatest.Logger(t),
			Key: serde.String(), Value: serde.String(),
			ExactlyOnce: ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosfloor-txn")},
			Handler: func(_ context.Context, r *Record[string, string]) error {
				return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		return c, runTxnConsumer(t, c)
	}
	first, stop := run()
	kafkatest.WaitFor(t, time.Minute, "the first member's commit", func() bool { return first.Stats().Processed >= 30 && len(readOutputs(t, kc, out)) >= 30 })
	stop()
	second, stop := run()
	defer stop()
	floor := func() int64 {
		second.floors.mu.Lock()
		defer second.floors.mu.Unlock()
		if fl, ok := second.floors.m[tp{in, 0}]; ok {
			return fl.taken
		}
		return -1
	}
	kafkatest.WaitFor(t, time.Minute, "the floor at the committed offset", func() bool { return floor() == 30 })
}

// runTxnConsumer runs c until the returned stop is called; stop reports
// Run's error.
func runTxnConsumer(t *testing.T, c *Consumer[string, string]) (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}
