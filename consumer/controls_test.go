package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

func TestNewRejectsBadConfig(t *testing.T) {
	ok := func() consumer.Config[string, string] {
		return consumer.Config[string, string]{
			Brokers: []string{"127.0.0.1:1"}, Topics: []string{"t"}, Group: "g", Value: serde.String(),
			Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
		}
	}
	cases := []struct {
		name string
		mod  func(*consumer.Config[string, string])
		key  string
	}{
		{"no brokers", func(c *consumer.Config[string, string]) { c.Brokers = nil }, "Brokers"},
		{"empty broker", func(c *consumer.Config[string, string]) { c.Brokers = []string{" "} }, "Brokers"},
		{"no topics", func(c *consumer.Config[string, string]) { c.Topics = nil }, "Topics"},
		{"no group", func(c *consumer.Config[string, string]) { c.Group = "" }, "Group"},
		{"no value", func(c *consumer.Config[string, string]) { c.Value = nil }, "Value"},
		{"no handler", func(c *consumer.Config[string, string]) { c.Handler = nil }, "Handler"},
		{"negative commit", func(c *consumer.Config[string, string]) { c.CommitInterval = -1 }, "CommitInterval"},
		{"tiny commit", func(c *consumer.Config[string, string]) { c.CommitInterval = time.Millisecond }, "CommitInterval"},
		{"bad template", func(c *consumer.Config[string, string]) { c.DeadLetter.Topic = "{topik}.dlq" }, "DeadLetter.Topic"},
		{"illegal topic", func(c *consumer.Config[string, string]) { c.DeadLetter.Topic = "{topic} dlq" }, "DeadLetter.Topic"},
		{"bad action", func(c *consumer.Config[string, string]) { c.Policy.Process.Permanent.Then = 9 }, "Policy.Process.Permanent.Then"},
		{"bad backoff", func(c *consumer.Config[string, string]) {
			c.Policy.Deserialize.Transient.Retry = backoff.Exponential{Initial: -time.Second}
		}, "Policy.Deserialize.Transient.Retry"},
		{"broker port not a number", func(c *consumer.Config[string, string]) { c.Brokers = []string{"127.0.0.1:notaport"} }, "Brokers"},
		{"broker port out of range", func(c *consumer.Config[string, string]) { c.Brokers = []string{"localhost:70000"} }, "Brokers"},
		{"broker without host", func(c *consumer.Config[string, string]) { c.Brokers = []string{":9092"} }, "Brokers"},
		{"spinning retry", func(c *consumer.Config[string, string]) { c.Policy.Process.Transient.Retry = backoff.Fixed(0) }, "Policy.Process.Transient.Retry"},
		{"spinning retry with a time limit only", func(c *consumer.Config[string, string]) {
			c.Policy.Deserialize.Transient.Retry = backoff.MaxElapsed(backoff.Fixed(0), time.Hour)
		}, "Policy.Deserialize.Transient.Retry"},
		{"spinning dead-letter retry", func(c *consumer.Config[string, string]) { c.DeadLetter.Retry = backoff.Fixed(0) }, "DeadLetter.Retry"},
		{"negative buffer", func(c *consumer.Config[string, string]) { c.Buffer.TotalBytes = -1 }, "Buffer.TotalBytes"},
		{"bad unwritable", func(c *consumer.Config[string, string]) { c.DeadLetter.Unwritable = 9 }, "DeadLetter.Unwritable"},
		{"bad group protocol", func(c *consumer.Config[string, string]) { c.GroupProtocol = 9 }, "GroupProtocol"},
		{"flood share", func(c *consumer.Config[string, string]) { c.FloodGuard.Share = 1.5 }, "FloodGuard.Share"},
		{"flood min over window", func(c *consumer.Config[string, string]) { c.FloodGuard.Window, c.FloodGuard.Min = 10, 20 }, "FloodGuard.Min"},
	}
	for _, good := range []func(*consumer.Config[string, string]){
		func(c *consumer.Config[string, string]) {
			c.Brokers = []string{"kafka-1", "[::1]:9092", "host.example:19092"}
		},
		func(c *consumer.Config[string, string]) {
			c.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(0), 3)
		},
	} {
		cfg := ok()
		good(&cfg)
		cfg.Logger = kafkatest.Logger(t)
		cons, err := consumer.New(cfg)
		if err != nil {
			t.Fatalf("New rejected a good config: %v", err)
		}
		cons.Close()
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := ok()
			tc.mod(&cfg)
			_, err := consumer.New(cfg)
			if !errors.Is(err, consumer.ErrConfig) || !strings.Contains(err.Error(), tc.key+":") {
				t.Fatalf("New = %v; want ErrConfig naming %s", err, tc.key)
			}
		})
	}
	t.Run("kill switch env", func(t *testing.T) {
		t.Setenv(consumer.EnvRetryDisabled, "maybe")
		_, err := consumer.New(ok())
		if !errors.Is(err, consumer.ErrConfig) || !strings.Contains(err.Error(), consumer.EnvRetryDisabled) {
			t.Fatalf("New = %v; want ErrConfig naming %s", err, consumer.EnvRetryDisabled)
		}
	})
	t.Run("valid", func(t *testing.T) {
		c, err := consumer.New(ok())
		if err != nil {
			t.Fatal(err)
		}
		c.Close() // never run: closes the client
		c.Close()
		if err := c.Run(context.Background()); !errors.Is(err, consumer.ErrClosed) {
			t.Fatalf("Run after Close = %v; want ErrClosed", err)
		}
	})
}

// oneTopic produces values to a one-partition topic and returns it.
func oneTopic(t *testing.T, c *kafkatest.Cluster, prefix string, values ...string) string {
	topic := c.Topic(t, prefix, 1)
	recs := make([]*kgo.Record, len(values))
	for i, v := range values {
		recs[i] = &kgo.Record{Topic: topic, Value: []byte(v)}
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	return topic
}

func stringConsumer(t *testing.T, c *kafkatest.Cluster, topic string, h consumer.Handler[string, string], mod func(*consumer.Config[string, string])) *consumer.Consumer[string, string] {
	t.Helper()
	return testConsumer(t, c, topic, kafkatest.UniqueName("g"), serde.String(serde.ValidUTF8()), h, func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		if mod != nil {
			mod(cfg)
		}
	})
}

// TestKillSwitch: flipping retry off sends a record that is being retried
// straight to the dead-letter topic, with reason retry-disabled.
func TestKillSwitch(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "kill", "a", "b")
	var tries atomic.Int32
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "a" {
			tries.Add(1)
			return failure.Transient(errors.New("down"))
		}
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(time.Hour) // only the kill switch ends this
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "first failure", func() bool { return tries.Load() == 1 })
	cons.SetRetryEnabled(false)
	if cons.RetryEnabled() {
		t.Fatal("RetryEnabled after SetRetryEnabled(false)")
	}
	kafkatest.WaitFor(t, 30*time.Second, "both settled", func() bool {
		s := cons.Stats()
		return s.Processed == 1 && s.DeadLettered == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, topic+".dlq")
	f := parse(t, dl[0])
	if f.Reason != deadletter.ReasonRetryDisabled || f.Stage != deadletter.StageProcess || f.Class != "transient" || f.Attempts != 1 {
		t.Fatalf("dead letter %+v; want reason retry-disabled, process, transient, 1 attempt", f)
	}
}

// TestKillSwitchEnv: with the environment variable set, transient failures
// are not retried at all.
func TestKillSwitchEnv(t *testing.T) {
	t.Setenv(consumer.EnvRetryDisabled, "true")
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "killenv", "a")
	var tries atomic.Int32
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
		tries.Add(1)
		return failure.Transient(errors.New("down"))
	}, nil)
	if cons.RetryEnabled() {
		t.Fatal("retry enabled despite the environment")
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "dead-lettered", func() bool { return cons.Stats().DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if tries.Load() != 1 {
		t.Fatalf("handler tried %d times; want 1", tries.Load())
	}
}

// TestOperatorSkip: Skip settles the record a partition is stuck on; the
// partition moves on and the offset is committed past it.
func TestOperatorSkip(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "skip", "stuck", "next")
	var next atomic.Bool
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "stuck" {
			return failure.Transient(errors.New("down"))
		}
		next.Store(true)
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(50 * time.Millisecond)
	})
	if err := cons.Skip(topic, 0, 0); !errors.Is(err, consumer.ErrNotAssigned) {
		t.Fatalf("Skip before assignment = %v; want ErrNotAssigned", err)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "stuck", func() bool { return len(cons.Stats().Stuck) == 1 })
	if st := cons.Stats().Stuck[0]; st.Offset != 0 || st.Reason != consumer.StuckRetrying || st.Attempts < 1 || st.Since.IsZero() || !strings.Contains(st.LastError, "down") {
		t.Fatalf("Stuck = %+v; want offset 0, retrying, attempts, since and the last error", st)
	}
	// An offset the operator did not see is refused, and nothing is skipped.
	if err := cons.Skip(topic, 0, 1); !errors.Is(err, consumer.ErrNotStuck) || !strings.Contains(err.Error(), "stuck on offset 0, not 1") {
		t.Fatalf("Skip at the wrong offset = %v; want ErrNotStuck naming offset 0", err)
	}
	if next.Load() || cons.Stats().Skipped != 0 {
		t.Fatal("a refused skip moved the partition")
	}
	if err := cons.Skip(topic, 0, 0); err != nil {
		t.Fatalf("Skip(0) = %v", err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "next record", next.Load)
	if err := cons.Skip(topic, 0, 1); !errors.Is(err, consumer.ErrNotStuck) {
		t.Fatalf("Skip on a flowing partition = %v; want ErrNotStuck", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := cons.Stats()
	if s.Skipped != 1 || s.Processed != 1 || s.DeadLettered != 0 {
		t.Fatalf("stats %+v; want 1 skipped, 1 processed", s)
	}
	if got := committed(t, c, cons.Client().OptValue(kgo.ConsumerGroup).(string), topic)[0]; got != 2 {
		t.Fatalf("committed %d; want 2", got)
	}
}

// TestOperatorDeadLetter: DeadLetter sends the record a partition is stuck
// on, retrying, to the dead-letter topic with reason operator, the failure
// that held it and who asked; the partition moves on past it. It runs one
// record at a time, in lanes and in batches.
func TestOperatorDeadLetter(t *testing.T) {
	c := kafkatest.New(t)
	for _, mode := range []string{"serial", "concurrency", "batch"} {
		t.Run(mode, func(t *testing.T) {
			topic := oneTopic(t, c, "oplet", "stuck", "next")
			var next atomic.Bool
			h := func(_ context.Context, r *consumer.Record[string, string]) error {
				if r.Value == "stuck" {
					return failure.Transient(errors.New("payments down"))
				}
				next.Store(true)
				return nil
			}
			cons := stringConsumer(t, c, topic, h, func(cfg *consumer.Config[string, string]) {
				cfg.Policy.Process.Transient.Retry = backoff.Fixed(50 * time.Millisecond)
				switch mode {
				case "concurrency":
					cfg.Concurrency = consumer.Concurrency{Max: 4}
				case "batch":
					cfg.Handler = nil
					cfg.Batching = consumer.Batching{Size: 1}
					cfg.BatchHandler = func(ctx context.Context, rs []*consumer.Record[string, string]) error { return h(ctx, rs[0]) }
				}
			})
			stop := runConsumer(t, cons)
			kafkatest.WaitFor(t, 30*time.Second, "stuck", func() bool { return len(cons.Stats().Stuck) == 1 })
			if err := cons.DeadLetter(topic, 0, 1, "alice"); !errors.Is(err, consumer.ErrNotStuck) {
				t.Fatalf("DeadLetter at the wrong offset = %v; want ErrNotStuck", err)
			}
			if err := cons.DeadLetter(topic, 0, 0, "alice"); err != nil {
				t.Fatalf("DeadLetter(0) = %v", err)
			}
			kafkatest.WaitFor(t, 30*time.Second, "next record", next.Load)
			if err := cons.DeadLetter(topic, 0, 1, "alice"); !errors.Is(err, consumer.ErrNotStuck) {
				t.Fatalf("DeadLetter on a flowing partition = %v; want ErrNotStuck", err)
			}
			if err := stop(); err != nil {
				t.Fatal(err)
			}
			if s := cons.Stats(); s.DeadLettered != 1 || s.Processed != 1 || s.Skipped != 0 {
				t.Fatalf("stats %+v; want 1 dead-lettered, 1 processed", s)
			}
			letters := readAll(t, c, topic+".dlq")
			if len(letters) != 1 || string(letters[0].Value) != "stuck" {
				t.Fatalf("dead-letter topic holds %d records; want the stuck one", len(letters))
			}
			f, err := deadletter.ParseHeaders(deadletter.RecordOf(letters[0]).Headers)
			if err != nil {
				t.Fatal(err)
			}
			if f.Reason != deadletter.ReasonOperator || f.Offset != 0 || f.Class != "transient" ||
				!strings.Contains(f.Message, "alice") || !strings.Contains(f.Message, "payments down") {
				t.Fatalf("letter %+v; want reason operator, offset 0, the failure that held it and who asked", f)
			}
			if got := committed(t, c, cons.Client().OptValue(kgo.ConsumerGroup).(string), topic)[0]; got != 2 {
				t.Fatalf("committed %d; want 2", got)
			}
		})
	}
}

// TestLetterCountedWhileNextRetries: a dead letter acknowledged while the
// partition retries the next record is counted and its offset committed;
// the retrying record does not hold it back. (Before: both waited until
// the retrying record settled.)
func TestLetterCountedWhileNextRetries(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "letterwait", "bad", "stuck")
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "bad" {
			return failure.Permanent(errors.New("malformed"))
		}
		return failure.Transient(errors.New("down"))
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(20 * time.Millisecond)
	})
	stop := runConsumer(t, cons)
	group := cons.Client().OptValue(kgo.ConsumerGroup).(string)
	kafkatest.WaitFor(t, 30*time.Second, "the letter counted and committed while offset 1 retries", func() bool {
		s := cons.Stats()
		return s.DeadLettered == 1 && len(s.Stuck) == 1 && s.Stuck[0].Offset == 1 && committed(t, c, group, topic)[0] == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestHalt: a Halt policy stops Run with an error naming the record and does
// not commit past it.
func TestHalt(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "halt", "ok", "\xff\xfe", "after")
	var after atomic.Bool
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "after" {
			after.Store(true)
		}
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Policy.Deserialize.Permanent.Then = consumer.ActionHalt
	})
	err := cons.Run(context.Background())
	var h *consumer.HaltError
	if !errors.As(err, &h) || h.Topic != topic || h.Partition != 0 || h.Offset != 1 || h.Stage != "deserialize-value" {
		t.Fatalf("Run = %v; want a HaltError at %s/0@1", err, topic)
	}
	if !errors.Is(err, serde.ErrInvalidUTF8) || !consumer.IsHalt(err) {
		t.Fatalf("HaltError does not wrap its cause: %v", err)
	}
	if after.Load() {
		t.Fatal("a record after the halt was processed")
	}
	if got := committed(t, c, cons.Client().OptValue(kgo.ConsumerGroup).(string), topic)[0]; got != 1 {
		t.Fatalf("committed %d; want 1 (up to the halted record)", got)
	}
	if err := cons.Run(context.Background()); !errors.Is(err, consumer.ErrClosed) {
		t.Fatalf("second Run = %v; want ErrClosed", err)
	}
}

// TestHandlerPanicAndKeyFailure: a handler panic is a permanent process
// failure and a key that cannot be decoded is a deserialize-key failure; both
// are dead-lettered and the consumer carries on.
func TestHandlerPanicAndKeyFailure(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "panic", 1)
	kafkatest.Produce(t, manualProducer(t, c),
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("boom")},
		&kgo.Record{Topic: topic, Key: []byte{0xff}, Value: []byte("fine")},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("fine")},
	)
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "boom" {
			panic("handler bug")
		}
		return nil
	}, func(cfg *consumer.Config[string, string]) { cfg.Key = serde.String(serde.ValidUTF8()) })
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "settled", func() bool {
		s := cons.Stats()
		return s.Processed == 1 && s.DeadLettered == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 2 {
		t.Fatalf("%d dead letters, want 2", len(dl))
	}
	byOffset := map[int64]*deadletter.Failure{}
	for _, r := range dl {
		f := parse(t, r)
		byOffset[f.Offset] = f
	}
	if f := byOffset[0]; f == nil || f.Stage != deadletter.StageProcess || f.Class != "permanent" || !strings.Contains(f.Message, "handler bug") {
		t.Errorf("panic dead letter %+v", f)
	}
	if f := byOffset[1]; f == nil || f.Stage != deadletter.StageDeserializeKey || f.Class != "permanent" {
		t.Errorf("key dead letter %+v", f)
	}
}

// TestDeadLetterPartitionByKey: when the dead-letter topic has fewer
// partitions than the source, records are partitioned by key.
func TestDeadLetterPartitionByKey(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "bykey", 4)
	dlq := c.Topic(t, "bykey-dlq", 2)
	var recs []*kgo.Record
	for p := int32(0); p < 4; p++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: p, Key: []byte("same-key"), Value: []byte{0xff}})
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil },
		func(cfg *consumer.Config[string, string]) { cfg.DeadLetter.Topic = deadletter.Template(dlq) })
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "dead-lettered", func() bool { return cons.Stats().DeadLettered == 4 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, dlq)
	if len(dl) != 4 {
		t.Fatalf("%d dead letters", len(dl))
	}
	for _, r := range dl[1:] {
		if r.Partition != dl[0].Partition {
			t.Fatalf("same key spread over partitions %d and %d", r.Partition, dl[0].Partition)
		}
	}
}

// parse reads the failure headers of dead letter r.
func parse(t testing.TB, r *kgo.Record) *deadletter.Failure {
	t.Helper()
	f, err := deadletter.ParseHeaders(deadletter.RecordOf(r).Headers)
	if err != nil {
		t.Fatalf("dead letter at %d/%d: %v", r.Partition, r.Offset, err)
	}
	return f
}

var errNotMine = errors.New("record type not handled here")

// TestSkipFuncWakeAndDependencies: Config.SkipIf skips chosen failures;
// WakeRetries ends a long backoff at once; Stats reports dependencies.
func TestSkipFuncWakeAndDependencies(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "skipfn", "other-type", "flaky", "fine")
	var down atomic.Bool
	down.Store(true)
	var tries atomic.Int32
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		switch r.Value {
		case "other-type":
			return failure.Permanent(fmt.Errorf("decode: %w", errNotMine))
		case "flaky":
			tries.Add(1)
			if down.Load() {
				return failure.Transient(errors.New("registry down"))
			}
		}
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.SkipIf = func(_ deadletter.Stage, err error) bool {
			if errors.Is(err, errNotMine) {
				return true
			}
			panic("a bug in the skip function") // must not crash the consumer
		}
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(time.Hour)
		cfg.Dependencies = map[string]func() string{"registry": func() string {
			if down.Load() {
				return "open"
			}
			return "closed"
		}}
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "stuck on the flaky record", func() bool { return len(cons.Stats().Stuck) == 1 })
	if s := cons.Stats(); s.Skipped != 1 || s.Dependencies["registry"] != "open" {
		t.Fatalf("stats %+v; want 1 skipped and registry open", s)
	}
	down.Store(false)
	cons.WakeRetries() // without it the record would sleep for an hour
	kafkatest.WaitFor(t, 30*time.Second, "all settled", func() bool { return cons.Stats().Processed == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := cons.Stats(); s.DeadLettered != 0 || s.Dependencies["registry"] != "closed" || tries.Load() != 2 {
		t.Fatalf("stats %+v, tries %d; want nothing dead-lettered, registry closed, 2 tries", s, tries.Load())
	}
}

// TestCloseStopsRun: Close stops a running consumer and waits for Run.
func TestCloseStopsRun(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "close", "a")
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil }, nil)
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(context.Background()) }()
	kafkatest.WaitFor(t, 30*time.Second, "processed", func() bool { return cons.Stats().Processed == 1 })
	cons.Close()
	select {
	case err := <-errc:
		if err != nil {
			t.Fatalf("Run = %v after Close; want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return after Close")
	}
}

// TestDefaultPolicy backs the defaults table of the README and the package
// doc: an unclassified processing failure is tried 4 times, then
// dead-lettered; a transient decode failure (a registry outage) is retried
// until it succeeds and never dead-lettered; unreadable bytes are
// dead-lettered at once.
func TestDefaultPolicy(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "defaults", "always-fails", "decode-flaky", "\xff", "fine")
	var decodeFailures, handlerTries atomic.Int32
	value := serde.DeserializerFunc[string](func(_ context.Context, _ serde.Meta, data []byte) (string, error) {
		if string(data) == "decode-flaky" && decodeFailures.Add(1) <= 3 {
			return "", failure.Transient(errors.New("schema registry unreachable"))
		}
		return serde.String(serde.ValidUTF8()).Deserialize(context.Background(), serde.Meta{}, data)
	})
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "always-fails" {
			handlerTries.Add(1)
			return errors.New("boom") // unclassified
		}
		return nil
	}, func(cfg *consumer.Config[string, string]) { cfg.Value = value })
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "all settled", func() bool {
		s := cons.Stats()
		return s.Processed == 2 && s.DeadLettered == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if n := handlerTries.Load(); n != 4 {
		t.Errorf("unclassified processing failure tried %d times, want 4", n)
	}
	if n := decodeFailures.Load(); n != 4 {
		t.Errorf("transient decode failed %d times before success, want 3 failures and a success", n)
	}
	byOffset := map[int64]*deadletter.Failure{}
	for _, r := range readAll(t, c, topic+".dlq") {
		f := parse(t, r)
		byOffset[f.Offset] = f
	}
	if f := byOffset[0]; f == nil || f.Reason != deadletter.ReasonExhausted || f.Class != "unclassified" || f.Attempts != 4 {
		t.Errorf("offset 0 dead letter %+v; want retries-exhausted, unclassified, 4 attempts", f)
	}
	if f := byOffset[2]; f == nil || f.Reason != deadletter.ReasonPermanent || f.Stage != deadletter.StageDeserializeValue || f.Attempts != 1 {
		t.Errorf("offset 2 dead letter %+v; want permanent deserialize-value, 1 attempt", f)
	}
	if byOffset[1] != nil {
		t.Error("the transient decode failure was dead-lettered")
	}
}
