package consumer_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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

// The edges of "never blocks, never loses": each test here failed on the
// runtime before the hardening it names.

// bigProducer writes records up to the broker's default max.message.bytes.
func bigProducer(t testing.TB, c *kafkatest.Cluster) *kgo.Client {
	return c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(1<<20+64<<10))
}

// TestIntegrationOversizedLetter: a poison pill near the source topic's size
// limit (legal for the broker) becomes a dead letter larger than franz-go's
// default batch size once the failure headers are added. The consumer sizes
// its dead-letter produces and creates the dead-letter topic with headroom,
// so the letter is written, byte for byte, and the partition moves on.
// (Before: MESSAGE_TOO_LARGE, retried forever.)
func TestIntegrationOversizedLetter(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "big", 1)
	big := bytes.Repeat([]byte{0xff}, 1_040_000) // not UTF-8: a deserialize failure
	kafkatest.Produce(t, bigProducer(t, c),
		&kgo.Record{Topic: topic, Value: big, Key: []byte("k")},
		&kgo.Record{Topic: topic, Value: []byte("after"), Key: []byte("k")})
	var after atomic.Bool
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		after.Store(r.Value == "after")
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.FetchMaxPartitionBytes(2<<20))
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "the record after the big pill", after.Load)
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := cons.Stats()
	if s.DeadLettered != 1 || s.DeadLetterWriteErrors != 0 {
		t.Fatalf("stats %+v; want 1 dead letter written at the first try", s)
	}
	if len(s.DeadLetterTopics) != 1 || !s.DeadLetterTopics[0].Ready || s.DeadLetterTopics[0].MaxMessageBytes < 1_040_000+consumer.LetterHeadroom {
		t.Fatalf("DeadLetterTopics = %+v; want the created topic with the source limit + headroom", s.DeadLetterTopics)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 || !bytes.Equal(dl[0].Value, big) {
		t.Fatalf("dead-letter topic holds %d records; want the big pill byte for byte", len(dl))
	}
}

// unwritableSetup makes a dead-letter topic that accepts only small records
// and a source topic with a poison pill too big for it, then a good record.
func unwritableSetup(t *testing.T, c *kafkatest.Cluster, name string) (topic string) {
	t.Helper()
	topic = c.Topic(t, name, 1)
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limit := "20000"
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &limit}, topic+".dlq"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic+".dlq") })
	kafkatest.Produce(t, manualProducer(t, c),
		&kgo.Record{Topic: topic, Value: bytes.Repeat([]byte{0xff}, 30_000)},
		&kgo.Record{Topic: topic, Value: []byte("after")})
	return topic
}

// TestIntegrationUnwritableLetter: a letter that can never be written (too
// large for an existing dead-letter topic, even without its error message)
// shows the partition as stuck at once, with the error, and
// DeadLetterConfig.Unwritable decides: wait (an operator can skip), skip, or
// halt. (Before: retried forever, invisible for the stuck delay.)
func TestIntegrationUnwritableLetter(t *testing.T) {
	c := kafkatest.New(t)
	t.Run("wait", func(t *testing.T) {
		topic := unwritableSetup(t, c, "unw-wait")
		var after atomic.Bool
		cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
			after.Store(true)
			return nil
		}, nil)
		stop := runConsumer(t, cons)
		kafkatest.WaitFor(t, 30*time.Second, "stuck on the unwritable letter", func() bool {
			s := cons.Stats()
			return len(s.Stuck) == 1 && s.Stuck[0].LastError != ""
		})
		st := cons.Stats().Stuck[0]
		if st.Offset != 0 || st.Reason != consumer.StuckDeadLetter || !strings.Contains(st.LastError, "larger than the dead-letter topic accepts") {
			t.Fatalf("Stuck = %+v; want offset 0 stuck on its dead-letter write with the size error", st)
		}
		if after.Load() {
			t.Fatal("the record after the unwritable letter was processed while it waits")
		}
		if err := cons.Skip(topic, 0, 0); err != nil {
			t.Fatal(err)
		}
		kafkatest.WaitFor(t, 30*time.Second, "the record after it", after.Load)
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if s := cons.Stats(); s.Skipped != 1 || s.DeadLettered != 0 {
			t.Fatalf("stats %+v; want 1 skipped", s)
		}
	})
	t.Run("skip", func(t *testing.T) {
		topic := unwritableSetup(t, c, "unw-skip")
		var after atomic.Bool
		cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
			after.Store(true)
			return nil
		}, func(cfg *consumer.Config[string, string]) { cfg.DeadLetter.Unwritable = consumer.UnwritableSkip })
		stop := runConsumer(t, cons)
		kafkatest.WaitFor(t, 30*time.Second, "the record after it", after.Load)
		group := cons.Client().OptValue(kgo.ConsumerGroup).(string)
		kafkatest.WaitFor(t, 30*time.Second, "committed past both", func() bool { return committed(t, c, group, topic)[0] == 2 })
		if err := stop(); err != nil {
			t.Fatal(err)
		}
		if s := cons.Stats(); s.Skipped != 1 || s.DeadLettered != 0 || s.Processed != 1 {
			t.Fatalf("stats %+v; want the pill skipped and the next processed", s)
		}
	})
	t.Run("halt", func(t *testing.T) {
		topic := unwritableSetup(t, c, "unw-halt")
		cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil },
			func(cfg *consumer.Config[string, string]) { cfg.DeadLetter.Unwritable = consumer.UnwritableHalt })
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := cons.Run(ctx)
		var h *consumer.HaltError
		if !errors.As(err, &h) || h.Offset != 0 || !errors.Is(err, consumer.ErrLetterTooLarge) {
			t.Fatalf("Run = %v; want a HaltError at offset 0 wrapping ErrLetterTooLarge", err)
		}
		group := cons.Client().OptValue(kgo.ConsumerGroup).(string)
		if got, ok := committed(t, c, group, topic)[0]; ok && got > 0 {
			t.Fatalf("committed %d past the halted record", got)
		}
	})
}

// TestIntegrationLetterShrinks: a letter that fits its dead-letter topic only
// without its long error message is written without it.
func TestIntegrationLetterShrinks(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "shrink", 1)
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	limit := "20000"
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &limit}, topic+".dlq"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic+".dlq") })
	value := bytes.Repeat([]byte("v"), 18_700)
	kafkatest.Produce(t, manualProducer(t, c), &kgo.Record{Topic: topic, Value: value})
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
		return failure.Permanent(errors.New(strings.Repeat("a long reason ", 100)))
	}, nil)
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "dead-lettered", func() bool { return cons.Stats().DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 || !bytes.Equal(dl[0].Value, value) {
		t.Fatalf("dead-letter topic holds %d records; want the record byte for byte", len(dl))
	}
	if f := parse(t, dl[0]); strings.Contains(f.Message, "a long reason") || f.Offset != 0 || f.Stage != deadletter.StageProcess {
		t.Fatalf("failure headers %+v; want the message dropped and the rest kept", f)
	}
}

// TestIntegrationMissingDeadLetterTopic: with creation off, a missing
// dead-letter topic is reported when partitions are assigned (a log line and
// Stats.DeadLetterTopics), before any poison pill depends on it; by default
// the topic is created then. (Before: creation was off by default, and a
// missing topic showed only at the first poison pill, stopping the partition.)
func TestIntegrationMissingDeadLetterTopic(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "missing", 2)
	kafkatest.Produce(t, manualProducer(t, c), &kgo.Record{Topic: topic, Value: []byte("good")})

	t.Run("reported", func(t *testing.T) {
		logs := &logBuffer{}
		var done atomic.Bool
		cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
			done.Store(true)
			return nil
		}, func(cfg *consumer.Config[string, string]) {
			cfg.DeadLetter.DisableTopicCreation = true
			cfg.DeadLetter.Topic = "{topic}.nowhere"
			cfg.Logger = logs.logger()
		})
		stop := runConsumer(t, cons)
		kafkatest.WaitFor(t, 30*time.Second, "the good record", done.Load)
		s := cons.Stats()
		if len(s.DeadLetterTopics) != 1 || s.DeadLetterTopics[0].Ready || !strings.Contains(s.DeadLetterTopics[0].Error, "does not exist") {
			t.Fatalf("DeadLetterTopics = %+v; want the missing topic reported", s.DeadLetterTopics)
		}
		if !logs.has("dead-letter topic cannot be used") {
			t.Fatalf("no log line reports the missing dead-letter topic:\n%s", logs)
		}
		_ = stop()
	})
	t.Run("created", func(t *testing.T) {
		cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil }, nil)
		stop := runConsumer(t, cons)
		kafkatest.WaitFor(t, 30*time.Second, "dead-letter topic created at assignment", func() bool {
			s := cons.Stats()
			return len(s.DeadLetterTopics) == 1 && s.DeadLetterTopics[0].Ready
		})
		_ = stop()
		adm := kadm.NewClient(c.Client(t))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		details, err := adm.ListTopics(ctx, topic+".dlq")
		if err != nil || details[topic+".dlq"].Err != nil || len(details[topic+".dlq"].Partitions) != 2 {
			t.Fatalf("dead-letter topic %v %v; want it created with the source's 2 partitions", details, err)
		}
		t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic+".dlq") })
	})
}

// TestIntegrationBufferBounds: a partition stuck on its first record holds at most its
// bound plus one fetch, in records and in bytes. (Before: the worker moved
// the queue to a local batch and fetching resumed; a partition stuck on
// offset 0 held every record.)
func TestIntegrationBufferBounds(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "bound", 1)
	// Small uncompressed batches: a fetch returns whole batches, so they
	// size "one fetch".
	prod := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(8<<10),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	var recs []*kgo.Record
	for i := 0; i < 20_000; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Value: []byte("record-" + strconv.Itoa(i) + strings.Repeat("x", 60))})
	}
	kafkatest.Produce(t, prod, recs...)
	for _, tc := range []struct {
		name  string
		limit consumer.BufferLimits
	}{
		{"records", consumer.BufferLimits{PartitionRecords: 10}},
		{"bytes", consumer.BufferLimits{PartitionBytes: 4 << 10}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
				return failure.Transient(errors.New("down")) // stuck on offset 0
			}, func(cfg *consumer.Config[string, string]) {
				cfg.Buffer = tc.limit
				cfg.Policy.Process.Transient.Retry = backoff.Fixed(20 * time.Millisecond)
				// One fetch is at most 16 KiB of this partition: about 230 records.
				cfg.ClientOpts = append(cfg.ClientOpts, kgo.FetchMaxPartitionBytes(16<<10), kgo.FetchMaxBytes(16<<10))
			})
			stop := runConsumer(t, cons)
			kafkatest.WaitFor(t, 30*time.Second, "stuck", func() bool { return len(cons.Stats().Stuck) == 1 })
			first := cons.Stats()
			maxRecs, maxBytes := 0, int64(0)
			for i := 0; i < 20; i++ { // two seconds of a stuck partition
				s := cons.Stats()
				maxRecs, maxBytes = max(maxRecs, s.BufferedRecords), max(maxBytes, s.BufferedBytes)
				time.Sleep(100 * time.Millisecond)
			}
			_ = stop()
			t.Logf("%s: stuck partition held %d records (%d bytes) when it got stuck, at most %d (%d bytes) after",
				c.Kind(), first.BufferedRecords, first.BufferedBytes, maxRecs, maxBytes)
			// The first fetch may bring more than the bound (whole batches);
			// after it the partition is paused and holds no more.
			if maxRecs > first.BufferedRecords || maxBytes > first.BufferedBytes || maxRecs > 5000 {
				t.Fatalf("a partition stuck on offset 0 grew from %d to %d records (%d to %d bytes) of 20000; want its bound plus one fetch",
					first.BufferedRecords, maxRecs, first.BufferedBytes, maxBytes)
			}
		})
	}
}

// TestIntegrationTotalBufferNoRefetch: the bounds hold what the consumer
// has in memory by not polling and by pausing full partitions where that
// drops the least, so little fetched is dropped: the records fetched are
// the records produced, plus at most a batch a pause because full.
// The total bound holds all flowing partitions together to the total plus
// one fetch; a partition's own bound holds it to its bound plus three
// fetches. (Before: a full partition was paused, franz-go dropped what it
// had fetched for it and fetched it again.)
func TestIntegrationTotalBufferNoRefetch(t *testing.T) {
	c := kafkatest.New(t)
	// Small fetches and uncompressed batches, so that one fetch is a known
	// number of records: 4 KiB in all, 2 KiB a partition, plus the batch of
	// at most 1 KiB the broker may return beyond a limit. (Compressed, a
	// kibibyte holds as many records as the codec squeezes in.) The total
	// holds the flowing partitions to the total plus one fetch per broker.
	const fetchBytes, partBytes, batchBytes = 4 << 10, 2 << 10, 1 << 10
	prod := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0), kgo.ProducerBatchMaxBytes(batchBytes),
		kgo.ProducerBatchCompression(kgo.NoCompression()))
	for _, tc := range []struct {
		name  string
		limit consumer.BufferLimits
	}{
		{"total", consumer.BufferLimits{TotalRecords: 200}},
		{"partition", consumer.BufferLimits{PartitionRecords: 100}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			topic := c.Topic(t, "norefetch", 4)
			var recs []*kgo.Record
			smallest := 1 << 20
			for i := 1; i <= 4000; i++ {
				r := &kgo.Record{Topic: topic, Partition: int32(i % 4), Key: []byte(strconv.Itoa(i)), Value: orderJSON(i)}
				smallest = min(smallest, len(r.Key)+len(r.Value))
				recs = append(recs, r)
			}
			produced := kafkatest.Produce(t, prod, recs...)
			// A partition's part of a fetch is at most the whole fetch
			// (kfake does not split a fetch by partition), and kfake may
			// return a batch beyond the limit for each partition.
			oneFetch := (fetchBytes + 4*batchBytes) / smallest
			total, perPart := tc.limit.TotalRecords+len(c.Brokers())*oneFetch, 4000
			if tc.limit.PartitionRecords > 0 {
				perPart = tc.limit.PartitionRecords + 3*oneFetch
				total = 4 * perPart
			}
			var fetched, paused, maxHeld, maxPart atomic.Int64
			var cons *consumer.Consumer[string, order]
			cons = newConsumer(t, c, topic, kafkatest.UniqueName("norefetch"), func(_ context.Context, r *consumer.Record[string, order]) error {
				time.Sleep(50 * time.Microsecond)
				if r.Raw.Offset%50 == 0 {
					s := cons.Stats()
					if n := int64(s.BufferedRecords); n > maxHeld.Load() {
						maxHeld.Store(n)
					}
					for _, p := range s.Partitions {
						if n := int64(p.BufferedRecords); n > maxPart.Load() {
							maxPart.Store(n)
						}
					}
				}
				return nil
			}, func(cfg *consumer.Config[string, order]) {
				cfg.Buffer = tc.limit
				cfg.Hooks = fullPauseCounter{n: &paused}
				cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(fetchCounter{&fetched}),
					kgo.FetchMaxBytes(fetchBytes), kgo.FetchMaxPartitionBytes(partBytes))
			})
			stop := runConsumer(t, cons)
			kafkatest.WaitFor(t, time.Minute, "all processed", func() bool { return int(cons.Stats().Processed) == len(produced) })
			_ = stop()
			t.Logf("%s: fetched %d of %d produced, %d pauses because full; at most %d held, %d by one partition (bounds %d, %d)",
				c.Kind(), fetched.Load(), len(produced), paused.Load(), maxHeld.Load(), maxPart.Load(), total, perPart)
			fetchedOnce(t, "the topic", fetched.Load(), int64(len(produced)), paused.Load(), int64(batchBytes/smallest))
			if maxHeld.Load() > int64(total) || maxPart.Load() > int64(perPart) {
				t.Fatalf("held %d records (%d by one partition) with %+v; want at most %d (%d)", maxHeld.Load(), maxPart.Load(), tc.limit, total, perPart)
			}
		})
	}
}

type fetchCounter struct{ n *atomic.Int64 }

func (f fetchCounter) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.n.Add(int64(m.NumRecords))
}

// TestStopFromHandler: Stop called from a handler or from Config.SkipIf
// stops the consumer and returns; Run returns too, and Close after it
// returns at once.
func TestStopFromHandler(t *testing.T) {
	c := kafkatest.New(t)
	for _, where := range []string{"handler", "Config.SkipIf"} {
		t.Run(where, func(t *testing.T) {
			topic := oneTopic(t, c, "closeh", "a", "\xff", "b")
			closed := make(chan struct{})
			var cons *consumer.Consumer[string, string]
			closeOnce := func() {
				cons.Stop()
				close(closed)
			}
			cons = stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
				if where == "handler" && r.Value == "a" {
					closeOnce()
				}
				return nil
			}, func(cfg *consumer.Config[string, string]) {
				cfg.SkipIf = func(deadletter.Stage, error) bool {
					if where == "Config.SkipIf" {
						closeOnce()
					}
					return false
				}
			})
			errc := make(chan error, 1)
			go func() { errc <- cons.Run(context.Background()) }()
			select {
			case <-closed:
			case <-time.After(30 * time.Second):
				t.Fatal("Stop called from the " + where + " did not return")
			}
			select {
			case err := <-errc:
				if err != nil {
					t.Fatalf("Run = %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("Run did not return after Stop from the " + where)
			}
			cons.Close() // again, from outside: returns at once
		})
	}
}

// TestStopBeforeRun: Stop before Run makes Run return at once, without
// handling a record.
func TestStopBeforeRun(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "stopfirst", "a", "b")
	var handled atomic.Int32
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
		handled.Add(1)
		return nil
	}, nil)
	cons.Stop()
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(context.Background()) }()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return after Stop")
	}
	if n := handled.Load(); n != 0 {
		t.Fatalf("%d records handled after Stop", n)
	}
	cons.Close()
}

// TestUnreachableBrokers: with no broker answering, the consumer warns
// within seconds and Stats says so. (Before: "consumer starting", then
// silence for 30s.)
func TestUnreachableBrokers(t *testing.T) {
	logs := &logBuffer{}
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Value: serde.String(),
		Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
		Logger:  logs.logger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "a warning that no broker answers", func() bool { return logs.has("no broker answers") })
	s := cons.Stats()
	if s.Brokers.Reachable || !strings.Contains(s.Brokers.LastError, "127.0.0.1:1") || s.Brokers.Since.IsZero() {
		t.Fatalf("Brokers = %+v; want unreachable with the dial error", s.Brokers)
	}
	if !logs.has("franz-go") {
		t.Fatalf("franz-go's own warnings do not reach Config.Logger:\n%s", logs)
	}
	_ = stop()
}

// TestMachineReadableLogsAndStats: classes and waits are logged as text,
// record-level lines are rate-limited per partition with a summary of what
// was suppressed, and Stats marshals to JSON. (Before: "class":2 and
// nanoseconds, one WARN line per record, and json.Marshal(Stats) failed.)
func TestMachineReadableLogsAndStats(t *testing.T) {
	c := kafkatest.New(t)
	values := []string{"flaky"}
	for i := 0; i < 300; i++ {
		values = append(values, "\xff") // 300 poison pills
	}
	topic := oneTopic(t, c, "logs", values...)
	logs := &logBuffer{}
	var flaky atomic.Int32
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "flaky" && flaky.Add(1) == 1 {
			return failure.Transient(errors.New("flaky"))
		}
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Logger = logs.logger()
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(100 * time.Millisecond)
		cfg.FloodGuard.Disable = true // a storm on purpose
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "every pill dead-lettered", func() bool { return cons.Stats().DeadLettered == 300 })
	_ = stop()

	var retry, dead, summary int
	suppressed := 0
	for _, line := range logs.lines() {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("log line is not JSON: %q", line)
		}
		switch m["msg"] {
		case "record failed, retrying":
			retry++
			if m["class"] != "transient" || m["wait"] != "100ms" {
				t.Errorf("retry line: class %v, wait %v; want \"transient\" and \"100ms\"", m["class"], m["wait"])
			}
		case "record dead-lettered":
			dead++
			if m["class"] != "permanent" {
				t.Errorf("dead-letter line: class %v; want \"permanent\"", m["class"])
			}
		case "record-level log lines suppressed (every record is still counted in Stats)":
			summary++
			suppressed += int(m["suppressed"].(float64))
		}
	}
	if retry != 1 || dead == 0 || dead > 40 || dead+suppressed != 300 || summary == 0 {
		t.Fatalf("log lines: %d retry, %d dead-lettered, %d summaries counting %d suppressed; want 1 retry, at most 40 dead-letter lines, and the rest of the 300 counted as suppressed", retry, dead, summary, suppressed)
	}
	b, err := json.Marshal(cons.Stats())
	if err != nil {
		t.Fatalf("json.Marshal(Stats) = %v", err)
	}
	var back struct {
		DeadLettered uint64
		Outcomes     map[string]uint64
	}
	if err := json.Unmarshal(b, &back); err != nil || back.DeadLettered != 300 || back.Outcomes["deserialize-value/permanent/dead-lettered"] != 300 || back.Outcomes["process/transient/retried"] != 1 {
		t.Fatalf("Stats JSON %s; want 300 dead letters keyed by stage/class/outcome", b)
	}
}

// TestIntegrationFetchMaxWaitDefault: a partition resumed after a retry is fetched
// again within half a second by default (the Java client's
// fetch.max.wait.ms), not franz-go's 5s; ClientOpts may override it. The time
// it took is logged, not asserted.
func TestIntegrationFetchMaxWaitDefault(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "resume", 2)
	prod := manualProducer(t, c)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("flaky")})
	var recovered, next atomic.Int64
	var tries atomic.Int32
	cfg := consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("resume"), Value: serde.String(),
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			switch r.Value {
			case "flaky":
				if tries.Add(1) == 1 {
					return failure.Transient(errors.New("once"))
				}
				recovered.Store(time.Now().UnixNano())
			case "next":
				next.Store(time.Now().UnixNano())
			}
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.Fixed(2 * time.Second)}}},
		Logger: kafkatest.Logger(t), ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	}
	cons, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if got := cons.Client().OptValue(kgo.FetchMaxWait); got != 500*time.Millisecond {
		t.Fatalf("default FetchMaxWait = %v; want 500ms", got)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "retrying", func() bool { return tries.Load() == 1 })
	// Produced while the partition is paused: it comes with the fetch after
	// the resume.
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("next")})
	kafkatest.WaitFor(t, 30*time.Second, "the record after the recovered one", func() bool { return next.Load() != 0 })
	_ = stop()
	t.Logf("%s: the resumed partition's next record came %v after the recovery", c.Kind(), time.Duration(next.Load()-recovered.Load()))

	cfg.ClientOpts = append(cfg.ClientOpts, kgo.FetchMaxWait(time.Second))
	cfg.Group = kafkatest.UniqueName("resume")
	over, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer over.Close()
	if got := over.Client().OptValue(kgo.FetchMaxWait); got != time.Second {
		t.Fatalf("FetchMaxWait from ClientOpts = %v; want 1s", got)
	}
}

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) logger() *slog.Logger {
	return slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func (b *logBuffer) has(s string) bool { return strings.Contains(b.String(), s) }

func (b *logBuffer) lines() []string {
	return strings.Split(strings.TrimSpace(b.String()), "\n")
}
