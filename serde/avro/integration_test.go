package avro_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// seen records what the handler processed, per partition, in order.
type seen struct {
	mu   sync.Mutex
	offs map[int32][]int64
	n    int
}

func (s *seen) add(p int32, off int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.offs == nil {
		s.offs = make(map[int32][]int64)
	}
	s.offs[p] = append(s.offs[p], off)
	s.n++
}

func (s *seen) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.n
}

// runConsumer starts c and returns a function that stops it.
func runConsumer[V any](t *testing.T, c *consumer.Consumer[[]byte, V]) func() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(ctx) }()
	return func() {
		cancel()
		if err := <-done; err != nil && ctx.Err() == nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// TestIntegrationRegistryOutage: records flow, the registry is stopped for
// 3s while records with a new schema id arrive, then restarted. Nothing is
// dead-lettered, every record is processed once in order, the registry
// requests during the outage follow the probe schedule, CPU stays low.
func TestIntegrationRegistryOutage(t *testing.T) {
	cluster := kafkatest.New(t)
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	const parts, perPart = 4, 25
	topic := cluster.Topic(t, "avro-outage", parts)
	sub := topic + "-value"
	idA := sreg.Register(t, sub, orderV1)
	idB := sreg.Register(t, sub, orderV2) // not looked up before the outage

	hc, calls := srtest.CountingClient()
	const probe = 300 * time.Millisecond
	reg := newRegistry(t, sreg, avro.HTTPClient(hc), avro.Timeout(time.Second),
		avro.CircuitBreaker(avro.BreakerConfig{Failures: 2, Probe: backoff.Fixed(probe)}))
	d := must(avro.NewDeserializer[Order](reg, orderV2))

	var got seen
	c, err := consumer.New(consumer.Config[[]byte, Order]{
		Brokers: cluster.Brokers(),
		Topics:  []string{topic},
		Group:   kafkatest.UniqueName("avro-outage"),
		Value:   d,
		Handler: func(_ context.Context, r *consumer.Record[[]byte, Order]) error {
			got.add(r.Raw.Partition, r.Raw.Offset)
			return nil
		},
		Policy: consumer.Policy{Deserialize: consumer.StagePolicy{
			// Short own backoff: the breaker's Retry-After paces the waits.
			Transient: consumer.Rule{Retry: backoff.Exponential{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}},
		}},
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Logger:     quietLogger(),
		Dependencies: map[string]func() string{
			"schema-registry": func() string { return reg.Breaker().State().String() },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	// Partitions sleeping in a retry resume the moment the breaker closes.
	reg.Breaker().OnStateChange(func(_, to avro.State) {
		if to == avro.Closed {
			c.WakeRetries()
		}
	})
	stop := runConsumer(t, c)
	defer stop()

	prod := cluster.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	batch := func(id int, schema string, v any) {
		var recs []*kgo.Record
		for p := range parts {
			for range perPart {
				recs = append(recs, &kgo.Record{Topic: topic, Partition: int32(p), Value: encode(t, id, schema, v)})
			}
		}
		kafkatest.Produce(t, prod, recs...)
	}
	batch(idA, orderV1, orderV1T{ID: "a", Amount: 1})
	kafkatest.WaitFor(t, time.Minute, "first batch", func() bool { return got.count() == parts*perPart })

	sreg.Stop()
	batch(idB, orderV2, Order{ID: "b", Amount: 2, Currency: "USD"})
	before, cpu0 := calls.Load(), cpuTime(t)
	const outage = 3 * time.Second
	time.Sleep(outage)
	during, cpu := calls.Load()-before, cpuTime(t)-cpu0
	if n := got.count(); n != parts*perPart {
		t.Fatalf("%d records processed during the outage, want %d", n, parts*perPart)
	}
	if state := c.Stats().Dependencies["schema-registry"]; state == avro.Closed.String() {
		t.Errorf("consumer stats show the registry breaker %s during the outage", state)
	}
	sreg.Start(t)
	kafkatest.WaitFor(t, time.Minute, "second batch", func() bool { return got.count() == 2*parts*perPart })

	bound := int64(parts) + int64(outage/probe) + 3
	st := c.Stats()
	t.Logf("outage %v: %d registry requests (bound %d), CPU %v, retries %d, breaker %v",
		outage, during, bound, cpu, st.Retried, reg.Breaker().State())
	if during > bound {
		t.Errorf("%d registry requests during the outage, want <= %d", during, bound)
	}
	if cpu > 600*time.Millisecond { // generous: -race, a broker in process
		t.Errorf("CPU %v during a %v outage", cpu, outage)
	}
	if st.DeadLettered != 0 || st.Skipped != 0 {
		t.Errorf("dead-lettered %d, skipped %d, want 0", st.DeadLettered, st.Skipped)
	}
	time.Sleep(100 * time.Millisecond) // any duplicate would show up
	got.mu.Lock()
	defer got.mu.Unlock()
	for p := range int32(parts) {
		offs := got.offs[p]
		if len(offs) != 2*perPart {
			t.Errorf("partition %d: %d records processed, want %d", p, len(offs), 2*perPart)
		}
		for i, o := range offs {
			if o != int64(i) {
				t.Errorf("partition %d: record %d has offset %d: duplicate or out of order", p, i, o)
				break
			}
		}
	}
}

// TestIntegrationBadBytes: each poison pill is dead-lettered with its class,
// stage and error type, and the partition keeps flowing.
func TestIntegrationBadBytes(t *testing.T) {
	cluster := kafkatest.New(t)
	kafkatest.Kcat(t)
	sreg := srtest.New(t)
	topic := cluster.Topic(t, "avro-poison", 1)
	sub := topic + "-value"
	id := sreg.Register(t, sub, orderV1)
	aid := sreg.Register(t, topic+"-audit", auditSchema)
	reg := newRegistry(t, sreg)
	d := must(avro.NewDeserializer[Order](reg, orderV2))

	good := func(n int) []byte {
		return encode(t, id, orderV1, orderV1T{ID: "o-" + strconv.Itoa(n), Amount: int64(n), Note: "fine"})
	}
	truncated := good(99)
	truncated = truncated[:len(truncated)-3]
	prod := cluster.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	send := func(v []byte) { kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: v}) }

	send(good(0))
	// A foreign client's plain string: no magic byte.
	file := filepath.Join(t.TempDir(), "kcat.txt")
	if err := os.WriteFile(file, []byte("hello from kcat"), 0o600); err != nil {
		t.Fatal(err)
	}
	cluster.RunKcat(t, nil, "-P", "-t", topic, "-p", "0", file)
	send(good(1))
	send(encode(t, 987654, orderV1, orderV1T{ID: "x"})) // unknown schema id
	send(good(2))
	send(encode(t, aid, auditSchema, audit{Who: "x"})) // a type this reader has no Go type for
	send(good(3))
	send(truncated)
	send(good(4))
	want := map[int64]string{1: "*avro.WireError", 3: "*avro.UnknownSchemaError", 5: "*avro.UnknownTypeError", 7: "*avro.DecodeError"}

	var got seen
	c, err := consumer.New(consumer.Config[[]byte, Order]{
		Brokers: cluster.Brokers(),
		Topics:  []string{topic},
		Group:   kafkatest.UniqueName("avro-poison"),
		Value:   d,
		Handler: func(_ context.Context, r *consumer.Record[[]byte, Order]) error {
			if r.Value.Currency != "EUR" {
				t.Errorf("offset %d: %+v", r.Raw.Offset, r.Value)
			}
			got.add(r.Raw.Partition, r.Raw.Offset)
			return nil
		},

		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Logger:     quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c)
	kafkatest.WaitFor(t, time.Minute, "records settled", func() bool {
		st := c.Stats()
		return st.Processed == 5 && st.DeadLettered == 4
	})
	stop()

	got.mu.Lock()
	if offs := got.offs[0]; len(offs) != 5 || offs[4] != 8 {
		t.Errorf("processed offsets %v, want 0 2 4 6 8", offs)
	}
	got.mu.Unlock()

	dlq := cluster.Client(t, kgo.ConsumeTopics(topic+".dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var n int
	for n < len(want) {
		fs := dlq.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d dead letters: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			f, err := deadletter.ParseHeaders(deadletter.RecordOf(r).Headers)
			if err != nil {
				t.Errorf("dead letter: %v", err)
				return
			}
			if f.Class != "permanent" || f.ErrorStage != "avro" || f.Stage != deadletter.StageDeserializeValue || f.ErrorType != want[f.Offset] {
				t.Errorf("offset %d: class %q stage %q/%q type %q (want %q): %s", f.Offset, f.Class, f.Stage, f.ErrorStage, f.ErrorType, want[f.Offset], f.Message)
			}
		})
	}
}
