package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// produceOrders writes per records to each of parts partitions, ids counting
// from 1, and returns them.
func produceOrders(t testing.TB, c *kafkatest.Cluster, topic string, parts, per int) []*kgo.Record {
	t.Helper()
	recs := make([]*kgo.Record, 0, parts*per)
	id := 0
	for i := 0; i < per; i++ {
		for p := 0; p < parts; p++ {
			id++
			recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Key: []byte(strconv.Itoa(id)), Value: orderJSON(id)})
		}
	}
	return kafkatest.Produce(t, manualProducer(t, c), recs...)
}

func newConsumer(t testing.TB, c *kafkatest.Cluster, topic, group string, h consumer.Handler[string, order], mod func(*consumer.Config[string, order])) *consumer.Consumer[string, order] {
	t.Helper()
	return testConsumer(t, c, topic, group, serde.JSON[order](), h, mod)
}

// testConsumer builds a consumer of topic with test defaults: string keys,
// the given value deserializer, reading from the start, fast commits and
// fetches, and the cluster's dialer (kafkatest.NewVirtual); mod adjusts
// the config.
func testConsumer[V any](t testing.TB, c *kafkatest.Cluster, topic, group string, value serde.Deserializer[V], h consumer.Handler[string, V], mod func(*consumer.Config[string, V])) *consumer.Consumer[string, V] {
	t.Helper()
	cfg := consumer.Config[string, V]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group,
		Key: serde.String(), Value: value, Handler: h,
		Logger: kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: append(c.ClientOpts(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100*time.Millisecond)),
	}
	if mod != nil {
		mod(&cfg)
	}
	cons, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cons
}

// TestIntegrationIsolation: a record failing transiently holds back only its
// own partition; every other partition is processed meanwhile.
func TestIntegrationIsolation(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "iso", 4)
	const per = 50
	produceOrders(t, c, topic, 4, per)

	l := newLedger()
	release := make(chan struct{})
	var failures atomic.Int32
	h := func(ctx context.Context, r *consumer.Record[string, order]) error {
		if r.Raw.Partition == 0 && r.Raw.Offset == 10 {
			select {
			case <-release:
			default:
				failures.Add(1)
				return failure.Transient(errors.New("database down"))
			}
		}
		l.done(r.Raw)
		return nil
	}
	cons := newConsumer(t, c, topic, kafkatest.UniqueName("iso"), h, func(cfg *consumer.Config[string, order]) {
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(20 * time.Millisecond)
	})
	stop := runConsumer(t, cons)

	kafkatest.WaitFor(t, time.Minute, "partitions 1-3 processed", func() bool { return l.count() == 3*per+10 })
	kafkatest.WaitFor(t, 10*time.Second, "several retries", func() bool { return failures.Load() >= 5 })
	l.mu.Lock()
	p0 := append([]int64(nil), l.calls[topic+"/0"]...)
	l.mu.Unlock()
	if len(p0) != 10 || p0[9] != 9 {
		t.Fatalf("partition 0 processed %v while stuck at offset 10; want offsets 0-9 only", p0)
	}
	if s := cons.Stats(); len(s.Stuck) != 1 || s.Stuck[0].Partition != 0 || s.Stuck[0].Offset != 10 {
		t.Fatalf("Stats().Stuck = %+v, want partition 0 at offset 10", s.Stuck)
	}
	close(release)
	kafkatest.WaitFor(t, time.Minute, "all processed", func() bool { return l.count() == 4*per })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	l.assertOrdered(t)
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestIntegrationNoHotLoop: while a record is retried for seconds, the
// process sleeps. CPU time, not wall time, is measured, with a generous bound.
func TestIntegrationNoHotLoop(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "hot", 2)
	produceOrders(t, c, topic, 2, 3)
	var calls atomic.Int64
	var failing atomic.Bool
	failing.Store(true)
	h := func(ctx context.Context, r *consumer.Record[string, order]) error {
		if r.Raw.Partition == 1 && r.Raw.Offset == 0 && failing.Load() {
			calls.Add(1)
			return failure.Transient(errors.New("dependency down"))
		}
		return nil
	}
	cons := newConsumer(t, c, topic, kafkatest.UniqueName("hot"), h, func(cfg *consumer.Config[string, order]) {
		cfg.Policy.Process.Transient.Retry = backoff.Exponential{Initial: 10 * time.Millisecond, Multiplier: 2, Max: 200 * time.Millisecond}
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "retrying", func() bool { return calls.Load() >= 3 })

	cpu0, calls0 := cpuTime(), calls.Load()
	time.Sleep(3 * time.Second)
	cpu, n := cpuTime()-cpu0, calls.Load()-calls0
	failing.Store(false)
	t.Logf("%s: %v CPU over 3s of retrying, %d tries", c.Kind(), cpu, n)
	// A spinning retry burns about 3s of CPU here; sleeping costs a few ms.
	if cpu > time.Second {
		t.Errorf("retrying used %v of CPU in 3s", cpu)
	}
	if n > 40 {
		t.Errorf("%d tries in 3s with backoff capped at 200ms", n)
	}
	kafkatest.WaitFor(t, time.Minute, "recovery", func() bool { return cons.Stats().Processed == 6 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestIntegrationDeadLetterOutage: while the dead-letter topic cannot be
// written, no offset passes the poison pill; once it can, the pill arrives
// there and consumption continues.
func TestIntegrationDeadLetterOutage(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "dlqout", 1)
	prod := manualProducer(t, c)
	var recs []*kgo.Record
	for i := 0; i < 6; i++ {
		v := orderJSON(i + 1)
		if i == 2 {
			v = []byte("\x00garbage")
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: v, Key: []byte("k")})
	}
	kafkatest.Produce(t, prod, recs...)
	group := kafkatest.UniqueName("dlqout")
	l := newLedger()
	dlqTopic := topic + ".dead"
	cons := newConsumer(t, c, topic, group, func(_ context.Context, r *consumer.Record[string, order]) error {
		l.done(r.Raw)
		return nil
	}, func(cfg *consumer.Config[string, order]) {
		cfg.DeadLetter = consumer.DeadLetterConfig{Topic: deadletter.Template("{topic}.dead"), Retry: backoff.Fixed(100 * time.Millisecond), WriteTimeout: time.Second, DisableTopicCreation: true}
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "dead-letter writes failing", func() bool { return cons.Stats().DeadLetterWriteErrors >= 2 })
	// Records behind the pill may have been processed while its first write
	// was in flight, but no offset passes it, and the partition is stuck.
	// The commits reach the pill: the records before it are committed.
	kafkatest.WaitFor(t, 30*time.Second, "the records before the pill committed", func() bool { return committed(t, c, group, topic)[0] >= 2 })
	if off := committed(t, c, group, topic)[0]; off > 2 {
		t.Fatalf("committed offset %d passed the unsettled record at 2", off)
	}
	if s := cons.Stats(); len(s.Stuck) != 1 || s.Stuck[0].Offset != 2 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v; want stuck at offset 2, nothing dead-lettered", s)
	}
	// Records produced during the outage wait behind the pill: the
	// partition's fetching is paused on it.
	kafkatest.WaitFor(t, 30*time.Second, "the partition's fetching paused on the pill", func() bool {
		ps := cons.Stats().Partitions
		return len(ps) == 1 && ps[0].Paused == consumer.PauseStuck
	})
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: orderJSON(7), Key: []byte("k")})
	// A negative check, not synchronisation: for three commit intervals
	// (three fetch waits) the new record is not processed and no offset
	// passes the pill.
	time.Sleep(300 * time.Millisecond)
	if got := l.count(); got > 5 {
		t.Fatalf("processed %d records while the pill waits; the record produced during the outage went past it", got)
	}
	if off := committed(t, c, group, topic)[0]; off > 2 {
		t.Fatalf("committed offset %d passed the unsettled record at 2", off)
	}

	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := adm.CreateTopic(ctx, 1, 1, nil, dlqTopic); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), dlqTopic) })
	kafkatest.WaitFor(t, time.Minute, "consumption resumed", func() bool { return l.count() == 6 })
	kafkatest.WaitFor(t, 30*time.Second, "commit at end", func() bool { return committed(t, c, group, topic)[0] == 7 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, dlqTopic)
	if len(dl) != 1 || string(dl[0].Value) != "\x00garbage" {
		t.Fatalf("dead-letter topic holds %d records, want the one pill", len(dl))
	}
}

// TestIntegrationRestart: a consumer stopped mid-stream and a new one in the
// same group together process everything; the only duplicates are records
// that were unsettled at the stop (offsets at or past the committed offset).
func TestIntegrationRestart(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "restart", 4)
	const per = 500
	produced := produceOrders(t, c, topic, 4, per)
	group := kafkatest.UniqueName("restart")

	first, second := newLedger(), newLedger()
	slow := func(l *ledger) consumer.Handler[string, order] {
		return func(ctx context.Context, r *consumer.Record[string, order]) error {
			time.Sleep(time.Millisecond)
			l.done(r.Raw)
			return nil
		}
	}
	a := newConsumer(t, c, topic, group, slow(first), nil)
	stopA := runConsumer(t, a)
	kafkatest.WaitFor(t, time.Minute, "first consumer mid-stream", func() bool { return first.count() >= per })
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	at := committed(t, c, group, topic)
	if first.count() == len(produced) {
		t.Fatal("the first consumer finished before it was stopped; the test proves nothing")
	}

	b := newConsumer(t, c, topic, group, slow(second), nil)
	stopB := runConsumer(t, b)
	kafkatest.WaitFor(t, 2*time.Minute, "second consumer finished", func() bool {
		n := 0
		for _, r := range produced {
			if first.times(r)+second.times(r) > 0 {
				n++
			}
		}
		return n == len(produced)
	})
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	dups := 0
	for _, r := range produced {
		f, s := first.times(r), second.times(r)
		if f > 1 || s > 1 {
			t.Errorf("%s processed %d+%d times by one member", srcKey(r), f, s)
		}
		if s > 0 && r.Offset < at[r.Partition] {
			t.Errorf("%s below the committed offset %d was processed again", srcKey(r), at[r.Partition])
		}
		if f > 0 && s > 0 {
			dups++
		}
	}
	t.Logf("%s: first consumer processed %d, committed %v at stop, duplicates %d", c.Kind(), first.count(), at, dups)
	first.assertOrdered(t)
	second.assertOrdered(t)
}

// TestIntegrationRebalance: a second member joins mid-stream and leaves
// again; every record is still processed, in order per member and partition.
func TestIntegrationRebalance(t *testing.T) {
	c := kafkatest.New(t)
	for _, proto := range []consumer.GroupProtocol{consumer.GroupClassic, consumer.GroupConsumer} {
		t.Run(proto.String(), func(t *testing.T) { testRebalance(t, c, proto, 0) })
	}
	t.Run("concurrency-4", func(t *testing.T) { testRebalance(t, c, consumer.GroupClassic, 4) })
}

func testRebalance(t *testing.T, c *kafkatest.Cluster, proto consumer.GroupProtocol, conc int) {
	topic := c.Topic(t, "rebal", 4)
	const per = 1500
	produced := produceOrders(t, c, topic, 4, per)
	group := kafkatest.UniqueName("rebal")
	la, lb := newLedger(), newLedger()
	h := func(l *ledger) consumer.Handler[string, order] {
		return func(ctx context.Context, r *consumer.Record[string, order]) error {
			if r.Value.ID%101 == 0 {
				return failure.Permanent(fmt.Errorf("rejected %d", r.Value.ID))
			}
			if lb.count() < 200 {
				time.Sleep(20 * time.Millisecond) // slow until the second member took over some partitions
			}
			l.done(r.Raw)
			return nil
		}
	}
	withProto := func(cfg *consumer.Config[string, order]) {
		cfg.GroupProtocol = proto
		cfg.Concurrency.Max = conc
	}
	a := newConsumer(t, c, topic, group, h(la), withProto)
	stopA := runConsumer(t, a)
	kafkatest.WaitFor(t, time.Minute, "first member started", func() bool { return la.count() >= 500 })
	b := newConsumer(t, c, topic, group, h(lb), withProto)
	stopB := runConsumer(t, b)
	kafkatest.WaitFor(t, time.Minute, "second member got partitions", func() bool { return lb.count() >= 200 })
	if err := stopB(); err != nil {
		t.Fatal(err)
	}
	settled := func() int {
		n := 0
		for _, r := range produced {
			if la.times(r)+lb.times(r) > 0 || orderID(r)%101 == 0 {
				n++
			}
		}
		return n
	}
	kafkatest.WaitFor(t, 2*time.Minute, "all settled", func() bool { return settled() == len(produced) })
	kafkatest.WaitFor(t, time.Minute, "dead letters written", func() bool {
		return a.Stats().DeadLettered+b.Stats().DeadLettered >= uint64(len(produced)/101)
	})
	if err := stopA(); err != nil {
		t.Fatal(err)
	}
	dl := dlqIndex(t, readAll(t, c, topic+".dlq"))
	dups := 0
	for _, r := range produced {
		if orderID(r)%101 == 0 {
			if len(dl[srcKey(r)]) == 0 {
				t.Errorf("%s missing from the dead-letter topic", srcKey(r))
			}
			dups += len(dl[srcKey(r)]) - 1
			continue
		}
		dups += la.times(r) + lb.times(r) - 1
	}
	t.Logf("%s, %s protocol: member A processed %d, member B %d, redelivered after rebalance %d", c.Kind(), proto, la.count(), lb.count(), dups)
	if conc > 1 {
		la.assertKeyOrdered(t, false)
		lb.assertKeyOrdered(t, false)
		return
	}
	la.assertOrdered(t)
	lb.assertOrdered(t)
}

func orderID(r *kgo.Record) int {
	id, _ := strconv.Atoi(string(r.Key))
	return id
}
