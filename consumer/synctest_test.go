package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// Tests driven by time run in a testing/synctest bubble, on a kfake cluster
// on an in-memory network (kafkatest.NewVirtual): a retry wait, a linger or a
// stuck delay passes at once on the bubble's fake clock, and the assertions
// are about what happened, not about how long it took.

// virtualConsumer returns a consumer config on a NewVirtual cluster.
func virtualConfig[V any](t *testing.T, c *kafkatest.Cluster, topic string, value serde.Deserializer[V]) consumer.Config[string, V] {
	return consumer.Config[string, V]{
		Brokers: c.Brokers(), ClientOpts: c.ClientOpts(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"),
		Logger: kafkatest.Logger(t), Value: value,
	}
}

// runInBubble runs cons until stop is called or the test ends; inside a
// bubble every goroutine must be gone when the test function returns.
func runInBubble[K, V any](t *testing.T, cons *consumer.Consumer[K, V]) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			err = <-errc
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// startInBubble makes a consumer of cfg and runs it (runInBubble).
func startInBubble[V any](t *testing.T, cfg consumer.Config[string, V]) (*consumer.Consumer[string, V], func() error) {
	cons, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cons, runInBubble(t, cons)
}

// elapse lets d pass on the bubble's clock, then waits until every goroutine
// of the bubble is blocked: what d brings has happened.
func elapse(d time.Duration) {
	time.Sleep(d)
	synctest.Wait()
}

// Defect: Batching.Linger restarted whenever a record arrived, so under a
// trickle faster than the linger a batch waited until it was full. A batch
// is handled at most Linger after its first record was taken.
func TestBatchLingerFromFirstRecord(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		topic := c.Topic(t, "linger", 1)
		prod := c.Client(t, kgo.ProducerLinger(0))

		var mu sync.Mutex
		var sizes []int
		cfg := virtualConfig(t, c, topic, serde.String())
		cfg.Batching = consumer.Batching{Size: 100, Linger: time.Second}
		cfg.BatchHandler = func(_ context.Context, batch []*consumer.Record[string, string]) error {
			mu.Lock()
			sizes = append(sizes, len(batch))
			mu.Unlock()
			return nil
		}
		_, stop := startInBubble(t, cfg)
		// 100 records, one every 50ms: 5 s of trickle, each record
		// arriving well within the linger of the one before.
		for i := range 100 {
			kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte{byte(i)}})
			time.Sleep(50 * time.Millisecond)
		}
		elapse(2 * time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		total := 0
		for _, n := range sizes {
			total += n
			// A second of linger holds about 20 records of the trickle;
			// fetch timing may add a few.
			if n > 40 {
				t.Errorf("a batch of %d records: the linger waited for more than a second of the trickle (batches %v)", n, sizes)
			}
		}
		if total != 100 {
			t.Errorf("batches hold %d records, want 100 (batches %v)", total, sizes)
		}
	})
}

// Defect: a batch retried as a whole showed in Stats.Stuck, but Skip of that
// offset was refused ("is not stuck"). Skip settles the record at that offset
// as skipped, and the rest of the batch is handled again at once.
func TestBatchStuckSkip(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		topic := c.Topic(t, "batchskip", 1)
		var recs []*kgo.Record
		for i := range 5 {
			recs = append(recs, &kgo.Record{Topic: topic, Value: []byte{'0' + byte(i)}})
		}
		kafkatest.Produce(t, c.Client(t, kgo.ProducerLinger(0)), recs...)

		var mu sync.Mutex
		processed := map[string]int{}
		cfg := virtualConfig(t, c, topic, serde.String())
		cfg.Batching = consumer.Batching{Size: 10, Linger: 10 * time.Millisecond}
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(time.Second) // forever
		cfg.BatchHandler = func(_ context.Context, batch []*consumer.Record[string, string]) error {
			for _, r := range batch {
				if r.Value == "0" {
					return failure.Transient(errors.New("the sink rejects this batch"))
				}
			}
			mu.Lock()
			for _, r := range batch {
				processed[r.Value]++
			}
			mu.Unlock()
			return nil
		}
		cons, stop := startInBubble(t, cfg)
		elapse(5 * time.Second)
		st := cons.Stats()
		if len(st.Stuck) != 1 || st.Stuck[0].Offset != 0 || st.Stuck[0].Reason != consumer.StuckRetrying {
			t.Fatalf("Stats.Stuck = %+v; want the batch stuck retrying at offset 0", st.Stuck)
		}
		if err := cons.Skip(topic, 0, 0); err != nil {
			t.Fatalf("Skip of the stuck batch's offset: %v", err)
		}
		elapse(time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		st = cons.Stats()
		mu.Lock()
		defer mu.Unlock()
		if st.Skipped != 1 || len(st.Stuck) != 0 {
			t.Errorf("skipped %d, stuck %+v; want 1 skipped, none stuck", st.Skipped, st.Stuck)
		}
		for _, v := range []string{"1", "2", "3", "4"} {
			if processed[v] != 1 {
				t.Errorf("record %s processed %d times, want 1 (processed %v)", v, processed[v], processed)
			}
		}
		if processed["0"] != 0 {
			t.Errorf("the skipped record was processed")
		}
	})
}

// Defect: with Concurrency, a key retried forever stopped every partition:
// its partition reached Ahead without pausing its fetching, filled to its
// buffer bound, and the poll loop waited for all partitions. A partition
// that cannot take more records because its lowest one is stuck has its
// fetching paused, as with one record at a time.
func TestConcurrencyStuckKeyHoldsOnlyItsPartition(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		topic := c.Topic(t, "stuckkey", 2)
		var recs []*kgo.Record
		for i := range 400 {
			for p := range int32(2) {
				key := fmt.Sprintf("k%d", i%50)
				if p == 0 && i == 0 {
					key = "poison"
				}
				recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte(key), Value: []byte(key)})
			}
		}
		kafkatest.Produce(t, c.Client(t, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner())), recs[:200]...)

		var mu sync.Mutex
		processed := map[int32]int{}
		cfg := virtualConfig(t, c, topic, serde.String())
		cfg.Key = serde.String()
		cfg.Concurrency = consumer.Concurrency{Max: 4}
		cfg.Buffer = consumer.BufferLimits{PartitionRecords: 100, TotalRecords: 150}
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(time.Second) // forever
		cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value == "poison" {
				return failure.Transient(errors.New("never recovers"))
			}
			mu.Lock()
			processed[r.Raw.Partition]++
			mu.Unlock()
			return nil
		}
		cons, stop := startInBubble(t, cfg)
		time.Sleep(5 * time.Second)
		kafkatest.Produce(t, c.Client(t, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner())), recs[200:]...)
		elapse(10 * time.Second)
		st := cons.Stats()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if processed[1] != 400 {
			t.Errorf("partition 1 processed %d of 400 records while a key of partition 0 was stuck (partition 0: %d; stats %+v)", processed[1], processed[0], st.Partitions)
		}
		if len(st.Stuck) != 1 || st.Stuck[0].Partition != 0 || st.Stuck[0].Offset != 0 {
			t.Errorf("Stats.Stuck = %+v; want partition 0 stuck at offset 0", st.Stuck)
		}
	})
}

// Defect: with Concurrency on a retry tier's partition, a lane waiting for
// its record to be due reaped the partition's letters itself, and rewrote a
// failed dead letter at the same time as the worker (a data race on the
// letter), or retried another key's letter while its own record waited. Only
// the worker touches the letters now: a dead letter that cannot be written
// holds the partition (as with one record at a time) until an operator
// skips it, and the other key's record is processed then.
func TestConcurrencyTierLaneLeavesLettersToWorker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		topic := c.Topic(t, "tierlane", 1)
		adm := kadm.NewClient(c.Client(t))
		limit := "20000"
		if _, err := adm.CreateTopic(context.Background(), 1, -1, map[string]*string{"max.message.bytes": &limit}, topic+".dlq"); err != nil {
			t.Fatal(err)
		}
		prod := c.Client(t, kgo.ProducerLinger(0))
		big := bytes.Repeat([]byte{'x'}, 30_000) // fits the tier, not the dead-letter topic
		kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte("k1"), Value: big})

		var mu sync.Mutex
		tries := map[string]int{}
		processed := map[string]bool{}
		cfg := virtualConfig(t, c, topic, serde.String())
		cfg.Key = serde.String()
		cfg.Concurrency = consumer.Concurrency{Max: 4}
		cfg.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{time.Second}}
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 1), Then: consumer.ActionRetryTopic}
		cfg.DeadLetter.Retry = backoff.Fixed(100 * time.Millisecond)
		cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
			mu.Lock()
			defer mu.Unlock()
			tries[r.Key]++
			switch {
			case tries[r.Key] == 1:
				return failure.Transient(errors.New("first try fails"))
			case r.Key == "k1":
				return failure.Permanent(errors.New("k1 never succeeds"))
			}
			processed[r.Key] = true
			return nil
		}
		cons, stop := startInBubble(t, cfg)
		time.Sleep(1500 * time.Millisecond) // k1 is in the tier, its dead letter failing
		kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte("k2"), Value: []byte("small")})
		elapse(5 * time.Second)
		tier := cfg.RetryTopics.TierTopic(topic, cfg.Group, time.Second)
		var at int64 = -1
		for _, s := range cons.Stats().Stuck {
			if s.Topic == tier && s.Reason == consumer.StuckDeadLetter {
				at = s.Offset
			}
		}
		if at < 0 {
			t.Fatalf("Stats.Stuck = %+v; want the tier partition stuck on k1's dead letter", cons.Stats().Stuck)
		}
		if err := cons.Skip(tier, 0, at); err != nil {
			t.Fatal(err)
		}
		elapse(time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if s := cons.Stats(); s.Skipped != 1 || len(s.Stuck) != 0 {
			t.Errorf("stats: skipped %d, stuck %+v; want k1 skipped and nothing stuck", s.Skipped, s.Stuck)
		}
		mu.Lock()
		defer mu.Unlock()
		if !processed["k2"] || tries["k2"] != 2 {
			t.Errorf("k2 tried %d times, processed %v; want processed at its second try, in the tier", tries["k2"], processed["k2"])
		}
	})
}

// TestBatchConcurrency: with a BatchHandler and Concurrency, batches of a
// partition run at once, a key's records are never handled at once, and
// they reach the handler in offset order.
func TestBatchConcurrency(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		topic := c.Topic(t, "batchconc", 1)
		const keys, perKey = 16, 30
		var recs []*kgo.Record
		for seq := range perKey {
			for k := range keys {
				recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprintf("k%02d", k)), Value: []byte(fmt.Sprint(seq))})
			}
		}
		kafkatest.Produce(t, c.Client(t, kgo.ProducerLinger(0)), recs...)

		var mu sync.Mutex
		running, most, calls := 0, 0, 0
		last := map[string]int{}
		inFlight := map[string]bool{}
		var problems []string
		cfg := virtualConfig(t, c, topic, serde.String())
		cfg.Key = serde.String()
		cfg.Concurrency = consumer.Concurrency{Max: 4}
		cfg.Batching = consumer.Batching{Size: 20, Linger: 10 * time.Millisecond}
		cfg.BatchHandler = func(_ context.Context, batch []*consumer.Record[string, string]) error {
			mu.Lock()
			running++
			calls++
			most = max(most, running)
			mine := map[string]bool{}
			for _, r := range batch {
				var seq int
				fmt.Sscan(r.Value, &seq)
				if inFlight[r.Key] && !mine[r.Key] {
					problems = append(problems, fmt.Sprintf("%s handled in two batches at once", r.Key))
				}
				inFlight[r.Key], mine[r.Key] = true, true
				if prev, ok := last[r.Key]; ok && seq != prev+1 {
					problems = append(problems, fmt.Sprintf("%s: seq %d after %d", r.Key, seq, prev))
				}
				last[r.Key] = seq
			}
			mu.Unlock()
			time.Sleep(100 * time.Millisecond) // a bulk request
			mu.Lock()
			for k := range mine {
				delete(inFlight, k)
			}
			running--
			mu.Unlock()
			return nil
		}
		cons, stop := startInBubble(t, cfg)
		elapse(10 * time.Second)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if s := cons.Stats(); s.Processed != keys*perKey {
			t.Errorf("processed %d, want %d", s.Processed, keys*perKey)
		}
		if most < 2 {
			t.Errorf("at most %d batch running at once in %d calls; want batches at once", most, calls)
		}
		if len(problems) > 0 {
			t.Errorf("%d problems, first: %s", len(problems), problems[0])
		}
		t.Logf("%d batch calls, at most %d at once", calls, most)
	})
}

// Defect: an exactly-once consumer halted after a cluster outage ("ending a
// transaction: context deadline exceeded"), and only a supervisor's restart
// brought it back. An abort the cluster did not confirm is tried again until
// it is: the consumer recovers by itself, and every output is committed once.
//
// A consumer stopped while it tries the abort again stops cleanly: Run
// returns nil, not a halt; the transaction is left to the coordinator.
func TestExactlyOnceRecoversFromOutage(t *testing.T) {
	t.Run("recovers", func(t *testing.T) { testEOSOutage(t, false) })
	t.Run("stopped meanwhile", func(t *testing.T) { testEOSOutage(t, true) })
}

func testEOSOutage(t *testing.T, stopMeanwhile bool) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		in, out := c.Topic(t, "eosout-in", 1), c.Topic(t, "eosout-out", 1)
		const n = 200
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}
		}
		prod := c.Client(t, kgo.ProducerLinger(0))
		kafkatest.Produce(t, prod, recs[:n/2]...)

		var outage atomic.Bool
		c.Fake().Control(func(kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake().KeepControl()
			if outage.Load() {
				return nil, errors.New("the cluster is down"), true // the connection is closed
			}
			return nil, nil, false
		})
		var handled atomic.Int64
		cfg := virtualConfig(t, c, in, serde.String())
		cfg.DeadLetter.WriteTimeout = 2 * time.Second
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosout-txn"), MaxRecords: 20}
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		retrying := &logSignal{msg: "aborting a transaction: the cluster did not confirm it; trying again", seen: make(chan struct{}),
			next: cfg.Logger.Handler()}
		cfg.Logger = slog.New(retrying)
		cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
			handled.Add(1)
			time.Sleep(10 * time.Millisecond)
			return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
		}
		cons, stop := startInBubble(t, cfg)
		for handled.Load() < n/4 {
			time.Sleep(10 * time.Millisecond)
		}
		outage.Store(true)
		if stopMeanwhile {
			select {
			case <-retrying.seen:
			case <-time.After(2 * time.Minute):
				t.Fatal("no abort was tried again during the outage")
			}
			if err := stop(); err != nil {
				t.Fatalf("Run, stopped while an abort was not confirmed: %v; want nil", err)
			}
			return
		}
		time.Sleep(15 * time.Second)
		outage.Store(false)
		kafkatest.Produce(t, prod, recs[n/2:]...)
		elapse(30 * time.Second)
		st := cons.Stats()
		if !st.Running || st.Halted != 0 {
			t.Fatalf("the consumer did not ride out the outage: running %v, halted %d", st.Running, st.Halted)
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if st.TransactionsAborted == 0 {
			t.Errorf("no transaction was aborted: the outage did not land inside one")
		}
		checkOutputsOrLetters(t, c, in, out, n, 0)
		t.Logf("%d handler calls for %d records; %d transactions committed, %d aborted", handled.Load(), n, st.TransactionsCommitted, st.TransactionsAborted)
	})
}

// Defect (found by the fault runs, cluster seed 595119552): an exactly-once
// consumer halted ("producer ID has a fatal, unrecoverable error") when a
// broker behind a proxy was down: the proxy accepts each connection and
// closes it at once, which franz-go takes for a misconfigured client and
// does not retry. An output to that broker failed, the transaction aborted,
// and the next could not begin: loading a producer id met the same closed
// connections. The next transaction now begins once the cluster answers.
//
// A consumer stopped while it waits to begin stops cleanly: Run returns nil,
// not a halt.
//
// While the cluster stays that way for longer than a minute, the consumer
// halts, as before.
func TestExactlyOnceBeginsAfterClosedConnections(t *testing.T) {
	t.Run("recovers", func(t *testing.T) { testEOSClosedConnections(t, "recovers") })
	t.Run("stopped meanwhile", func(t *testing.T) { testEOSClosedConnections(t, "stopped") })
	t.Run("never back", func(t *testing.T) { testEOSClosedConnections(t, "never back") })
}

// testEOSClosedConnections runs the scenario of
// TestExactlyOnceBeginsAfterClosedConnections: the cluster comes back
// ("recovers"), the consumer is stopped while it waits ("stopped"), or the
// cluster does not come back ("never back").
func testEOSClosedConnections(t *testing.T, mode string) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		in, out := c.Topic(t, "eosclosed-in", 1), c.Topic(t, "eosclosed-out", 1)
		const n = 200
		recs := make([]*kgo.Record, n)
		for i := range recs {
			recs[i] = &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}
		}
		prod := c.Client(t, kgo.ProducerLinger(0))
		kafkatest.Produce(t, prod, recs...)

		// While down, a request for the end of a transaction closes its
		// connection, and so does every new connection's first request
		// (ApiVersions); the rest goes on over the connections it has.
		// The first transactional produce while down is refused: its
		// transaction aborts, and the abort is not confirmed.
		var down atomic.Bool
		failed := failTxnProduceOnce(c, down.Load)
		c.Fake().Control(func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake().KeepControl()
			if !down.Load() {
				return nil, nil, false
			}
			switch req.(type) {
			case *kmsg.ApiVersionsRequest, *kmsg.EndTxnRequest:
				return nil, errors.New("closed at once"), true
			}
			return nil, nil, false
		})
		var handled atomic.Int64
		cfg := virtualConfig(t, c, in, serde.String())
		// The fault landed where it should when a transaction could not
		// begin for a while.
		refused := &logSignal{msg: "a transaction cannot begin: no producer id, the cluster seems unreachable; trying again", seen: make(chan struct{}),
			next: cfg.Logger.Handler()}
		cfg.Logger = slog.New(refused)
		cfg.DeadLetter.WriteTimeout = 2 * time.Second
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosclosed-txn"), MaxRecords: 20}
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
			if handled.Add(1) == n/4 {
				down.Store(true)
			}
			time.Sleep(10 * time.Millisecond)
			return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
		}
		cons, stop := startInBubble(t, cfg)
		for handled.Load() < n/4 {
			time.Sleep(10 * time.Millisecond)
		}
		if mode != "recovers" {
			select {
			case <-refused.seen:
			case <-time.After(2 * time.Minute):
				t.Fatal("no transaction was refused its beginning")
			}
			if mode == "never back" {
				elapse(2 * time.Minute)
				if cons.Stats().Running {
					t.Fatal("still running two minutes after a transaction could not begin; want a halt after a minute")
				}
			}
			err := stop()
			var he *consumer.HaltError
			switch {
			case mode == "stopped" && err != nil:
				t.Fatalf("Run, stopped while a transaction could not begin: %v; want nil", err)
			case mode == "never back" && !errors.As(err, &he):
				t.Fatalf("Run = %v; want a *HaltError once a transaction could not begin for a minute", err)
			}
			return
		}
		time.Sleep(10 * time.Second)
		down.Store(false)
		elapse(30 * time.Second)
		st := cons.Stats()
		if !st.Running {
			t.Fatalf("the consumer did not ride out the closed connections: it stopped")
		}
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		select {
		case <-refused.seen:
		default:
			t.Errorf("no transaction was refused its beginning (refused produce %v, %d aborted): the fault did not land", failed.Load(), st.TransactionsAborted)
		}
		checkOutputsOrLetters(t, c, in, out, n, 0)
		t.Logf("%d handler calls for %d records; %d transactions committed, %d aborted",
			handled.Load(), n, st.TransactionsCommitted, st.TransactionsAborted)
	})
}

// Defect (found by the fault runs, chaos seed 3010): in the exactly-once
// mode, an operator's Skip was undone by an aborted transaction: the record
// came back, was handled again, and its output committed. A skip now outlives
// the abort: the record is skipped again, never handled.
func TestExactlyOnceSkipOutlivesAbort(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		// Once armed, the next transactional produce fails: its
		// transaction (the one that holds the skip) aborts.
		var armed atomic.Bool
		failed := failTxnProduceOnce(c, armed.Load)
		testEOSSkipOutlives(t, c, "eosskip", time.Second, nil, func(consumer.Config[string, string]) { armed.Store(true) }, 10*time.Second)
		if !failed.Load() {
			t.Fatalf("the injected failure did not happen")
		}
	})
}

// Defect (found by the fault runs, kfake seed 6510108): in the exactly-once
// mode, a skip whose transaction a rebalance aborted was forgotten with the
// revoke, so when the eager rebalance gave the partition straight back, the
// record was handled again and its output committed. A skip now outlives a
// revoke in the exactly-once mode.
func TestExactlyOnceSkipOutlivesRevoke(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		other := c.Topic(t, "eosskiprev-other", 1)
		var joiner *kgo.Client
		ctx, cancel := context.WithCancel(context.Background())
		joined := make(chan struct{})
		// A member of the same group that reads another topic: its join
		// rebalances the group, and the range balancer gives the input
		// back to the consumer. The transaction that holds the skip stays
		// open until the rebalance aborts it (when it is due); the next
		// one, which skips the record again, commits 20s later.
		join := func(cfg consumer.Config[string, string]) {
			joiner = c.Client(t, kgo.ConsumerGroup(cfg.Group), kgo.ConsumeTopics(other), kgo.Balancers(kgo.RangeBalancer()))
			go func() {
				defer close(joined)
				for ctx.Err() == nil {
					joiner.PollFetches(ctx)
				}
			}()
		}
		eager := func(cfg *consumer.Config[string, string]) {
			cfg.ClientOpts = append(cfg.ClientOpts, kgo.Balancers(kgo.RangeBalancer())) // a rebalance revokes every partition
		}
		testEOSSkipOutlives(t, c, "eosskiprev", 20*time.Second, eager, join, 55*time.Second)
		cancel()
		<-joined
		joiner.Close()
	})
}

// testEOSSkipOutlives runs an exactly-once consumer (transactions every
// interval) over 20 records whose record 5 fails until an operator skips
// it; right after the skip, disrupt aborts the skip's transaction, and the
// consumer runs for a while more. Record 5 must never be handled after the
// skip, and every other record must have its output once, read_committed.
// It runs inside a synctest bubble.
func testEOSSkipOutlives(t *testing.T, c *kafkatest.Cluster, name string, interval time.Duration,
	mod func(*consumer.Config[string, string]), disrupt func(consumer.Config[string, string]), after time.Duration) {
	in, out := c.Topic(t, name+"-in", 1), c.Topic(t, name+"-out", 1)
	recs := make([]*kgo.Record, 20)
	for i := range recs {
		recs[i] = &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))}
	}
	prod := c.Client(t, kgo.ProducerLinger(0))
	kafkatest.Produce(t, prod, recs[:10]...)

	var skipped atomic.Bool
	var afterSkip atomic.Int64
	cfg := virtualConfig(t, c, in, serde.String())
	cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName(name + "-txn"), Interval: interval}
	cfg.Policy.Process.Transient.Retry = backoff.Fixed(100 * time.Millisecond) // forever
	cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "5" {
			if skipped.Load() {
				afterSkip.Add(1)
				return nil
			}
			return failure.Transient(errors.New("stuck until skipped"))
		}
		return r.Produce(&kgo.Record{Topic: out, Key: r.Raw.Key, Value: r.Raw.Value})
	}
	if mod != nil {
		mod(&cfg)
	}
	cons, stop := startInBubble(t, cfg)
	elapse(3 * time.Second)
	if st := cons.Stats().Stuck; len(st) != 1 || st[0].Offset != 5 {
		t.Fatalf("Stats.Stuck = %+v; want offset 5", st)
	}
	skipped.Store(true)
	if err := cons.Skip(in, 0, 5); err != nil {
		t.Fatal(err)
	}
	disrupt(cfg)
	elapse(5 * time.Second)
	kafkatest.Produce(t, prod, recs[10:]...)
	elapse(after)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if st := cons.Stats(); st.TransactionsAborted == 0 {
		t.Fatalf("no transaction aborted: the disruption did not land on the skip's transaction")
	}
	if n := afterSkip.Load(); n != 0 {
		t.Errorf("the skipped record was handled %d times after the skip", n)
	}
	seen := map[string]int{}
	for _, r := range readCommitted(t, c, out) {
		seen[string(r.Key)]++
	}
	for i := range recs {
		want := 1
		if i == 5 {
			want = 0 // skipped
		}
		if k := fmt.Sprint(i); seen[k] != want {
			t.Errorf("output of %s: %d times, want %d", k, seen[k], want)
		}
	}
}

// Review finding: in the exactly-once mode with Concurrency, a record whose
// dead letter was skipped (DeadLetterConfig.Unwritable: skip) went to the
// lanes' handoff from the worker, which found no slot: its offset was never
// committed.
func TestExactlyOnceConcurrencySkippedLetterCommitted(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		in := c.Topic(t, "eosunw-in", 1)
		limit := "20000"
		if _, err := kadm.NewClient(c.Client(t)).CreateTopic(context.Background(), 1, -1, map[string]*string{"max.message.bytes": &limit}, in+".dlq"); err != nil {
			t.Fatal(err)
		}
		var recs []*kgo.Record
		for i := range 9 {
			recs = append(recs, &kgo.Record{Topic: in, Key: []byte(fmt.Sprint(i)), Value: []byte("ok")})
		}
		recs = append(recs, &kgo.Record{Topic: in, Key: []byte("9"), Value: bytes.Repeat([]byte{0xff}, 30_000)}) // too large for its dead letter
		kafkatest.Produce(t, c.Client(t, kgo.ProducerLinger(0)), recs...)
		cfg := virtualConfig(t, c, in, serde.String(serde.ValidUTF8()))
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosunw-txn")}
		cfg.Concurrency = consumer.Concurrency{Max: 4}
		cfg.DeadLetter.Unwritable = consumer.UnwritableSkip
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		cfg.Handler = func(context.Context, *consumer.Record[string, string]) error { return nil }
		cons, stop := startInBubble(t, cfg)
		elapse(5 * time.Second)
		st := cons.Stats()
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if st.Skipped != 1 || st.Processed != 9 {
			t.Fatalf("skipped %d, processed %d; want 1 and 9", st.Skipped, st.Processed)
		}
		if got := committed(t, c, cfg.Group, in)[0]; got != 10 {
			t.Errorf("committed %d; want 10, past the skipped record", got)
		}
	})
}

// Defect (chaos seed 9930052): a record parked behind its key while the copy
// of an earlier record of the key, its first, was still being written to
// another tier. That write never ended (its tier's broker hung), the later
// copy was acknowledged, and the partitions moved: the next owner handled
// the earlier record at its source while it handled the later one from its
// tier, at the same time. A park now waits for such a copy first; a long
// wait shows the partition stuck on the earlier record, which an operator
// can skip: the later record still waits for the copy's write to end (the
// partition shows stuck on the skipped record meanwhile), and the copy, once
// landed, is settled without being handled. Skipped again, the skipped
// record no longer holds its key.
func TestRetryTopicsParkWaitsForEarlierCopy(t *testing.T) {
	for _, mode := range []string{"one", "lanes", "batches"} {
		t.Run(mode, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testParkWaitsForEarlierCopy(t, mode, 0) })
		})
		t.Run(mode+"/skipped", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testParkWaitsForEarlierCopy(t, mode, 1) })
		})
		t.Run(mode+"/skipped-twice", func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testParkWaitsForEarlierCopy(t, mode, 2) })
		})
	}
}

// testParkWaitsForEarlierCopy skips r1 that many times (0-2).
func testParkWaitsForEarlierCopy(t *testing.T, mode string, skips int) {
	c := kafkatest.NewVirtual(t, kfake.NumBrokers(2), kfake.Ports(9092, 9093))
	topic := c.Topic(t, "parkwait", 1)
	cfg := virtualConfig(t, c, topic, serde.String())
	cfg.Key = serde.String()
	cfg.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{100 * time.Millisecond, 200 * time.Millisecond}}
	cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 1), Then: consumer.ActionRetryTopic}
	cfg.DeadLetter.WriteTimeout = time.Second
	cfg.DurableAttempts.Disable = true // its topic would be created on either broker
	first := cfg.RetryTopics.TierTopic(topic, cfg.Group, 100*time.Millisecond)
	second := cfg.RetryTopics.TierTopic(topic, cfg.Group, 200*time.Millisecond)
	adm := kadm.NewClient(c.Client(t))
	for _, tier := range []string{first, second} {
		if _, err := adm.CreateTopic(context.Background(), 1, -1, nil, tier); err != nil {
			t.Fatal(err)
		}
	}
	hangNode := 1 - c.Fake().LeaderFor(topic, 0)
	if err := c.Fake().MoveTopicPartition(first, 0, hangNode); err != nil {
		t.Fatal(err)
	}
	var hang atomic.Bool
	c.Fake().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		return nil, nil, hang.Load() && c.Fake().CurrentNode() == hangNode // swallowed: never answered
	})

	type call struct {
		value      string
		start, end time.Time
		ok         bool
	}
	var mu sync.Mutex
	var calls []call
	handle := func(r *consumer.Record[string, string]) error {
		start := time.Now()
		mu.Lock()
		tries := 0
		for _, c := range calls {
			if c.value == r.Value {
				tries++
			}
		}
		mu.Unlock()
		var err error
		switch {
		case r.Value == "r0" && tries < 2: // fails at its source and in the first tier
			err = failure.Transient(errors.New("r0 fails"))
		case r.Value == "r0" && skips > 0: // in the second tier for a while: r2 waits for r1 meanwhile
			time.Sleep(time.Minute) // the family stays quiet: nothing else wakes the wait
		case r.Value == "r1":
			time.Sleep(50 * time.Millisecond)
		}
		mu.Lock()
		calls = append(calls, call{r.Value, start, time.Now(), err == nil})
		mu.Unlock()
		return err
	}
	switch mode {
	case "one", "lanes":
		cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error { return handle(r) }
		if mode == "lanes" {
			cfg.Concurrency = consumer.Concurrency{Max: 4}
		}
	case "batches":
		cfg.Batching = consumer.Batching{Size: 10, Linger: 5 * time.Millisecond}
		cfg.BatchHandler = func(_ context.Context, batch []*consumer.Record[string, string]) error {
			errs := map[int]error{}
			for i, r := range batch {
				if err := handle(r); err != nil {
					errs[i] = err
				}
			}
			if len(errs) > 0 {
				return &consumer.BatchError{Errs: errs}
			}
			return nil
		}
	}
	prod := c.Client(t, kgo.ProducerLinger(0))
	produce := func(v string) {
		kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(v)})
	}
	forwarded := func(cons *consumer.Consumer[string, string], n uint64) {
		t.Helper()
		for i := 0; cons.Stats().Forwarded < n; i++ {
			if i == 1000 {
				t.Fatalf("%d records forwarded; want %d", cons.Stats().Forwarded, n)
			}
			elapse(10 * time.Millisecond)
		}
	}

	produce("r0")
	cons, stop := startInBubble(t, cfg)
	forwarded(cons, 1) // r0 is in the first tier
	// Only the first tier is led by the broker that hangs.
	for _, other := range []string{topic, second, topic + ".dlq"} {
		if err := c.Fake().MoveTopicPartition(other, 0, 1-hangNode); err != nil {
			t.Fatal(other, err)
		}
	}
	hang.Store(true)
	produce("r1")      // parked behind r0 in the first tier: never acknowledged
	forwarded(cons, 2) // r0 failed in the first tier: it is in the second
	produce("r2")      // to be parked behind r0 in the second tier
	elapse(time.Second)
	if skips > 0 {
		elapse(2 * time.Second)
		st := cons.Stats()
		if len(st.Stuck) != 1 || st.Stuck[0].Topic != topic || st.Stuck[0].Offset != 1 {
			t.Fatalf("Stats.Stuck = %+v; want the source partition stuck on r1's copy (offset 1)", st.Stuck)
		}
		if err := cons.Skip(topic, 0, 1); err != nil {
			t.Fatal(err)
		}
		// r1's copy may still land: r2 waits for its write to end.
		elapse(6 * time.Second)
		mu.Lock()
		for _, c := range calls {
			if c.value != "r0" {
				t.Errorf("%s handled while r1's copy was being written", c.value)
			}
		}
		mu.Unlock()
		st = cons.Stats()
		if len(st.Stuck) != 1 || st.Stuck[0].Offset != 1 || !strings.Contains(st.Stuck[0].LastError, "skip it again") {
			t.Fatalf("Stats.Stuck = %+v; want the partition stuck on r1, skipped, whose copy is being written", st.Stuck)
		}
		if skips == 2 {
			// Skipped again: r2 no longer waits (r1's copy never lands).
			if err := cons.Skip(topic, 0, 1); err != nil {
				t.Fatal(err)
			}
		} else {
			hang.Store(false) // the write is tried again and lands
		}
		elapse(2 * time.Minute) // r2 is parked behind r0, then handled
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		defer mu.Unlock()
		if st := cons.Stats(); st.Skipped != 1 || len(st.Stuck) != 0 {
			t.Errorf("stats: skipped %d, stuck %+v; want r1 skipped once, nothing stuck", st.Skipped, st.Stuck)
		}
		if c := calls[len(calls)-1]; c.value != "r2" || !c.ok || slices.ContainsFunc(calls, func(c call) bool { return c.value == "r1" }) {
			t.Errorf("calls %+v; want r2 processed last, and r1, skipped, never handled", calls)
		}
		return
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	hang.Store(false)
	_, stop = startInBubble(t, cfg) // the next owner
	elapse(3 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	var r1Done, r2Start time.Time
	for _, c := range calls {
		if c.value == "r1" && c.ok && r1Done.IsZero() {
			r1Done = c.end
		}
		if c.value == "r2" && r2Start.IsZero() {
			r2Start = c.start
		}
	}
	if r1Done.IsZero() || r2Start.IsZero() || r2Start.Before(r1Done) {
		t.Errorf("r1 first succeeded at %v, r2 first began at %v; want r2 after r1 (calls %+v)", r1Done, r2Start, calls)
	}
}

// TestRetryTopicsSkipWhileCopyWritten: an operator skips a record whose
// first copy is still being written to its tier, while a later record of its
// key waits for that copy. If the copy lands, the later record is parked
// behind it, and the copy is settled as skipped without being handled; if its
// write fails, the later record goes on at its source. Either way the
// skipped record is never handled after the later one.
func TestRetryTopicsSkipWhileCopyWritten(t *testing.T) {
	for _, lands := range []bool{true, false} {
		t.Run(fmt.Sprint("lands=", lands), func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) { testSkipWhileCopyWritten(t, lands) })
		})
	}
}

func testSkipWhileCopyWritten(t *testing.T, lands bool) {
	c := kafkatest.NewVirtual(t)
	topic := c.Topic(t, "skipcopy", 1)
	cfg := virtualConfig(t, c, topic, serde.String())
	cfg.Key = serde.String()
	cfg.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{100 * time.Millisecond}}
	cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 1), Then: consumer.ActionRetryTopic}
	cfg.DeadLetter.WriteTimeout = 10 * time.Second
	tier := cfg.RetryTopics.TierTopic(topic, cfg.Group, 100*time.Millisecond)
	created, err := kadm.NewClient(c.Client(t)).CreateTopic(context.Background(), 1, -1, nil, tier)
	if err != nil {
		t.Fatal(err)
	}
	// The first write to the tier is answered after 5s: acknowledged, or
	// refused for good.
	var delayed atomic.Bool
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		toTier := false
		for _, rt := range pr.Topics {
			toTier = toTier || rt.Topic == tier || rt.TopicID == created.ID
		}
		if !toTier || !delayed.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		c.Fake().SleepControl(func() { time.Sleep(5 * time.Second) })
		if lands {
			return nil, nil, false
		}
		return refusal(pr, invalidRecord), nil, true
	})

	var mu sync.Mutex
	var calls []string
	cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		defer mu.Unlock()
		calls = append(calls, r.Value)
		if r.Value == "r0" {
			return failure.Transient(errors.New("r0 fails"))
		}
		return nil
	}
	prod := c.Client(t, kgo.ProducerLinger(0))
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("r0")},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("r1")})
	cons, stop := startInBubble(t, cfg)
	elapse(2 * time.Second) // r0's copy is being written; r1 waits for it
	st := cons.Stats()
	if len(st.Stuck) != 1 || st.Stuck[0].Offset != 0 {
		t.Fatalf("Stats.Stuck = %+v; want the partition stuck on r0's copy (offset 0)", st.Stuck)
	}
	if err := cons.Skip(topic, 0, 0); err != nil {
		t.Fatal(err)
	}
	elapse(time.Second)
	mu.Lock()
	if !slices.Equal(calls, []string{"r0"}) {
		t.Errorf("calls %v before r0's copy landed or failed; want r1 still waiting", calls)
	}
	mu.Unlock()
	elapse(5 * time.Second)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(calls, []string{"r0", "r1"}) {
		t.Errorf("calls %v; want r0's first try, then r1 (r0 skipped: never handled again)", calls)
	}
	if st := cons.Stats(); st.Skipped != 1 || st.Processed != 1 || len(st.Stuck) != 0 {
		t.Errorf("stats: skipped %d, processed %d, stuck %+v; want r0 skipped once, r1 processed", st.Skipped, st.Processed, st.Stuck)
	}
}

// Defect 9 of the engine issue: in the exactly-once mode, a commit whose end
// the cluster did not confirm halted the consumer, and only a restart by a
// supervisor brought it back. It now goes on by itself: the transaction is
// aborted with a new producer epoch, which ends it if it is still open, and
// the partitions go back to the group's committed offsets on the broker.
// Whether the commit happened or not, each record has one committed output.
//
// "committed": the broker commits the transaction after the client gave up
// waiting for the answer. Going back to franz-go's view of the committed
// offsets (from before the transaction) would handle its records again and
// commit their outputs twice, then and at every later abort.
// "aborted": the request never reaches the broker; the new epoch aborts the
// transaction, and its records are handled again.
// "server-error": the broker commits, and the client is answered
// UNKNOWN_SERVER_ERROR; franz-go ends the transaction as an abort and
// reports a plain abort, which the broker's offsets decide too.
func TestExactlyOnceUnconfirmedCommit(t *testing.T) {
	for _, mode := range []string{"committed", "aborted", "server-error"} {
		t.Run(mode, func(t *testing.T) { testEOSUnconfirmedCommit(t, mode) })
	}
}

func testEOSUnconfirmedCommit(t *testing.T, mode string) {
	synctest.Test(t, func(t *testing.T) {
		c := kafkatest.NewVirtual(t)
		in, out := c.Topic(t, "eosunconf-in", 2), c.Topic(t, "eosunconf-out", 2)
		const timeout = 2 * time.Second // DeadLetter.WriteTimeout: End waits twice that
		// The first commit's EndTxn is answered too late ("committed":
		// held past the client's wait, then handled) or not at all
		// ("aborted": its connection closed, for as long as the client
		// waits).
		var first atomic.Bool
		var until time.Time
		var unconfirmed atomic.Bool
		side := c.Client(t) // "server-error": commits in the consumer's stead
		var sideSent atomic.Bool
		c.Fake().ControlKey(int16(kmsg.EndTxn), func(req kmsg.Request) (kmsg.Response, error, bool) {
			c.Fake().KeepControl()
			if !req.(*kmsg.EndTxnRequest).Commit {
				return nil, nil, false
			}
			if mode == "server-error" && first.Load() && !sideSent.Load() {
				sideSent.Store(true)
				return nil, nil, false // the side client's copy: carried out
			}
			if first.CompareAndSwap(false, true) {
				unconfirmed.Store(true)
				if mode == "server-error" {
					end := req.(*kmsg.EndTxnRequest)
					cp := *end
					done := make(chan struct{})
					go func() {
						defer close(done)
						if _, err := cp.RequestWith(context.Background(), side); err != nil {
							t.Errorf("the side client's commit: %v", err)
						}
					}()
					c.Fake().SleepControl(func() { <-done })
					resp := end.ResponseKind().(*kmsg.EndTxnResponse)
					resp.ErrorCode = kerr.UnknownServerError.Code
					return resp, nil, true
				}
				until = time.Now().Add(2*timeout + timeout/4)
				if mode == "committed" {
					c.Fake().SleepControl(func() { time.Sleep(time.Until(until)) })
					return nil, nil, false
				}
			}
			if mode == "aborted" && time.Now().Before(until) {
				return nil, errors.New("closed at once"), true
			}
			return nil, nil, false
		})
		var armed atomic.Bool
		failed := failTxnProduceOnce(c, armed.Load)

		var mu sync.Mutex
		calls := map[string]int{}
		cfg := virtualConfig(t, c, in, serde.String())
		cfg.DeadLetter.WriteTimeout = timeout
		// One transaction holds every record of the first batch.
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("eosunconf-txn"), MaxRecords: 1000, Interval: 10 * time.Second}
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
		cfg.Handler = func(_ context.Context, r *consumer.Record[string, string]) error {
			mu.Lock()
			calls[string(r.Raw.Key)]++
			mu.Unlock()
			return r.Produce(&kgo.Record{Topic: out, Partition: r.Raw.Partition, Key: r.Raw.Key, Value: r.Raw.Value})
		}
		cons, stop := startInBubble(t, cfg)
		prod := c.Client(t, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
		const n, m = 40, 10
		recs := make([]*kgo.Record, 0, n+m)
		for i := range n {
			recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % 2), Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
		}
		kafkatest.Produce(t, prod, recs...)
		elapse(40 * time.Second)
		if !unconfirmed.Load() {
			t.Fatal("no commit was sent: the fault did not land")
		}
		if !cons.Stats().Running {
			t.Fatal("the consumer stopped after a commit whose end was not confirmed; want it to go on")
		}
		mu.Lock()
		again := 0
		for _, n := range calls {
			if n > 1 {
				again++
			}
		}
		mu.Unlock()
		switch {
		case mode != "aborted" && again > 0:
			t.Errorf("%d records handled again after their transaction committed", again)
		case mode == "aborted" && again != n:
			t.Errorf("%d of %d records handled again after their transaction aborted", again, n)
		}
		// An abort later, of a transaction that holds records of
		// partition 0 only: partition 1 goes back to the offsets read
		// from the broker too, not to franz-go's view of them.
		armed.Store(true)
		more := make([]*kgo.Record, 0, m)
		for i := n; i < n+m; i++ {
			more = append(more, &kgo.Record{Topic: in, Partition: 0, Key: []byte(fmt.Sprint(i)), Value: []byte(fmt.Sprint(i))})
		}
		kafkatest.Produce(t, prod, more...)
		elapse(40 * time.Second)
		if !failed.Load() {
			t.Fatal("the later transaction did not abort: the fault did not land")
		}
		st := cons.Stats()
		if err := stop(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		checkOutputsOrLetters(t, c, in, out, n+m, 0)
		t.Logf("%d transactions committed, %d aborted", st.TransactionsCommitted, st.TransactionsAborted)
	})
}
