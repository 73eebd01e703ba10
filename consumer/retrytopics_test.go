package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
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

// keyed is the value of the per-key order tests: a key's sequence number,
// and how many times its handler fails before it succeeds (-1: always).
type keyed struct {
	Key   string `json:"key"`
	Seq   int    `json:"seq"`
	Fails int    `json:"fails"`
}

// keyOrder records, per key, the sequence numbers the handler completed,
// in the order it completed them.
type keyOrder struct {
	mu   sync.Mutex
	done map[string][]int
	seen map[string]bool // "key/seq"
}

func newKeyOrder() *keyOrder { return &keyOrder{done: map[string][]int{}, seen: map[string]bool{}} }

// add records a success and returns an order violation, if any: a
// sequence number completed for the first time before an earlier one of its
// key.
func (k *keyOrder) add(key string, seq int) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	id := key + "/" + strconv.Itoa(seq)
	if k.seen[id] {
		return nil // a redelivery
	}
	k.seen[id] = true
	k.done[key] = append(k.done[key], seq)
	if seq > 0 && !k.seen[key+"/"+strconv.Itoa(seq-1)] {
		return fmt.Errorf("key %s: seq %d completed before seq %d", key, seq, seq-1)
	}
	return nil
}

func (k *keyOrder) count() int {
	k.mu.Lock()
	defer k.mu.Unlock()
	return len(k.seen)
}

// TestIntegrationRetryTopics: failing records go through the delay tiers
// while their partition moves on; later records of their key wait behind
// them and are processed in source order; a record that fails in every tier
// is dead-lettered with its original coordinates and every attempt counted;
// two quick tries in place come before the tiers.
func TestIntegrationRetryTopics(t *testing.T) {
	for _, proto := range []consumer.GroupProtocol{consumer.GroupClassic, consumer.GroupConsumer} {
		t.Run(proto.String(), func(t *testing.T) { testRetryTopics(t, proto, 0, false) })
	}
	t.Run("concurrency-4", func(t *testing.T) { testRetryTopics(t, consumer.GroupClassic, 4, false) })
	t.Run("exactly-once", func(t *testing.T) { testRetryTopics(t, consumer.GroupClassic, 0, true) })
	t.Run("batch", func(t *testing.T) { testRetryTopics(t, consumer.GroupClassic, -1, false) })
	t.Run("batch-exactly-once", func(t *testing.T) { testRetryTopics(t, consumer.GroupClassic, -1, true) })
	t.Run("batch-concurrency-4", func(t *testing.T) { testRetryTopics(t, consumer.GroupClassic, -4, false) })
	t.Run("batch-concurrency-4-exactly-once", func(t *testing.T) { testRetryTopics(t, consumer.GroupClassic, -4, true) })
}

// testRetryTopics runs TestIntegrationRetryTopics. With eos, the consumer is
// in the exactly-once mode and its handler writes one output per record it
// processes: the outputs topic then holds each once. conc -n runs the
// handler as a BatchHandler with Concurrency.Max n (batches of 32, more than the keys: each key twice in a batch but for the rule; each record failing alone).
func testRetryTopics(t *testing.T, proto consumer.GroupProtocol, conc int, eos bool) {
	c := kafkatest.New(t)
	if proto == consumer.GroupConsumer && !c.Real() {
		t.Skip("the consumer group protocol is tested on the real broker")
	}
	topic := c.Topic(t, "rt", 2)
	group := kafkatest.UniqueName("rt-group")
	prod := c.Client(t, kgo.ProducerLinger(0))

	const keys, perKey = 20, 15
	var recs []*kgo.Record
	failing, forever := 0, 0
	for seq := 0; seq < perKey; seq++ {
		for k := 0; k < keys; k++ {
			v := keyed{Key: "key-" + strconv.Itoa(k), Seq: seq}
			switch {
			case k == 7 && seq == 3:
				v.Fails = -1 // dead-lettered after the last tier
				forever++
			case (k+seq)%9 == 0:
				v.Fails = 1 + (k+seq)%4 // 1-4 failures: 1 is absorbed in place
				failing++
			}
			b, _ := json.Marshal(v)
			recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(v.Key), Value: b,
				Headers: []kgo.RecordHeader{{Key: "trace", Value: []byte("t-" + strconv.Itoa(k*100+seq))}}})
		}
	}
	kafkatest.Produce(t, prod, recs...)

	order := newKeyOrder()
	var mu sync.Mutex
	var violations []error
	attemptsAt := map[string]int{} // "key/seq" -> attempt of the success
	tiersAt := map[string]int{}
	wrongTopic := 0
	var out string
	var exactlyOnce consumer.ExactlyOnce
	if eos {
		out = c.Topic(t, "rt-out", 2)
		exactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("rt-txn")}
	}
	cfg := consumer.Config[string, keyed]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group, Logger: kafkatest.Logger(t), GroupProtocol: proto, Concurrency: consumer.Concurrency{Max: max(conc, 0)},
		ExactlyOnce: exactlyOnce,
		Key:         serde.String(), Value: serde.JSON[keyed](),
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(5*time.Millisecond), 2), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics: consumer.RetryTopics{Tiers: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 200 * time.Millisecond}},
		Handler: func(_ context.Context, r *consumer.Record[string, keyed]) error {
			v := r.Value
			if r.Raw.Topic != topic || string(r.Raw.Headers[0].Value) == "" || r.Raw.Headers[0].Key != "trace" || len(r.Raw.Headers) != 1 {
				mu.Lock()
				wrongTopic++
				mu.Unlock()
			}
			if v.Fails < 0 || r.Attempt <= v.Fails {
				return failure.Transient(fmt.Errorf("flaky dependency for %s/%d, attempt %d", v.Key, v.Seq, r.Attempt))
			}
			if err := order.add(v.Key, v.Seq); err != nil {
				mu.Lock()
				violations = append(violations, err)
				mu.Unlock()
			}
			mu.Lock()
			attemptsAt[v.Key+"/"+strconv.Itoa(v.Seq)] = r.Attempt
			tiersAt[v.Key+"/"+strconv.Itoa(v.Seq)] = r.Tier
			mu.Unlock()
			if eos {
				return r.Produce(&kgo.Record{Topic: out, Key: []byte(v.Key + "/" + strconv.Itoa(v.Seq))})
			}
			return nil
		},
	}
	if conc < 0 {
		cfg.Handler, cfg.BatchHandler, cfg.Batching = nil, asBatch(cfg.Handler), consumer.Batching{Size: 32}
		cfg.Concurrency = consumer.Concurrency{Max: -conc}
	}
	c1, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	want := keys*perKey - forever
	kafkatest.WaitFor(t, 90*time.Second, "every good record processed and the poison dead-lettered", func() bool {
		return order.count() >= want && c1.Stats().DeadLettered >= uint64(forever)
	})
	// The seq after the dead-lettered one of key-7 was processed after it
	// was settled: order.add saw seq 3 missing; allow exactly that gap.
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := c1.Stats()
	mu.Lock()
	defer mu.Unlock()
	var real []error
	for _, v := range violations {
		if v.Error() != "key key-7: seq 4 completed before seq 3" {
			real = append(real, v)
		}
	}
	if len(real) > 0 {
		t.Errorf("%d per-key order violations, first: %v", len(real), real[0])
	}
	if wrongTopic > 0 {
		t.Errorf("%d handler calls saw something other than the original topic and headers", wrongTopic)
	}
	for _, r := range recs {
		var v keyed
		_ = json.Unmarshal(r.Value, &v)
		id := v.Key + "/" + strconv.Itoa(v.Seq)
		if v.Fails < 0 {
			continue
		}
		if got := attemptsAt[id]; got != v.Fails+1 {
			t.Errorf("%s (fails %d): succeeded at attempt %d, want %d", id, v.Fails, got, v.Fails+1)
		}
		wantTier := max(v.Fails-1, 0) // the first failure is retried in place
		if got := tiersAt[id]; got != wantTier {
			t.Errorf("%s (fails %d): Record.Tier %d, want %d", id, v.Fails, got, wantTier)
		}
	}
	if s.Forwarded == 0 || s.Parked == 0 {
		t.Errorf("Stats.Forwarded %d, Parked %d: want both > 0", s.Forwarded, s.Parked)
	}
	if s.DeadLettered != uint64(forever) {
		t.Errorf("dead-lettered %d, want %d", s.DeadLettered, forever)
	}
	if len(s.RetryTopics) != 3 || s.RetryTopics[0].Topic != topic+".retry.100ms" && s.RetryTopics[0].Topic != topic+".retry.200ms" && s.RetryTopics[0].Topic != topic+".retry.50ms" {
		t.Errorf("Stats.RetryTopics = %+v", s.RetryTopics)
	}
	for _, rt := range s.RetryTopics {
		if !rt.Ready || rt.Source != topic {
			t.Errorf("retry topic %+v not ready", rt)
		}
	}

	// The dead letter: the original record byte for byte, its original
	// coordinates, and every try counted (2 here, 1 per tier).
	dl := readAll
	if eos {
		dl = readCommitted
		outs := map[string]int{}
		for _, r := range readCommitted(t, c, out) {
			outs[string(r.Key)]++
		}
		for id := range attemptsAt {
			if outs[id] != 1 {
				t.Errorf("output of %s: %d times, want 1", id, outs[id])
			}
		}
		if len(outs) != len(attemptsAt) {
			t.Errorf("%d outputs, want %d", len(outs), len(attemptsAt))
		}
		t.Logf("%s: %d transactions committed, %d aborted", c.Kind(), s.TransactionsCommitted, s.TransactionsAborted)
	}
	checkRetryDeadLetter(t, topic, dl(t, c, topic+".dlq"), recs[3*keys+7], forever)
}

// checkRetryDeadLetter checks the dead letter of testRetryTopics.
func checkRetryDeadLetter(t *testing.T, topic string, dl []*kgo.Record, src *kgo.Record, forever int) {
	t.Helper()
	if len(dl) != forever {
		t.Fatalf("dead-letter topic holds %d records, want %d", len(dl), forever)
	}
	f, err := deadletter.ParseRecord(dl[0])
	if err != nil {
		t.Fatal(err)
	}
	if f.OriginalTopic != topic || f.Attempts != 2+3 || f.Reason != string(deadletter.ReasonExhausted) || string(dl[0].Key) != "key-7" {
		t.Errorf("dead letter: topic %s attempts %d reason %s key %q; want %s, 5, %s, key-7", f.OriginalTopic, f.Attempts, f.Reason, dl[0].Key, topic, deadletter.ReasonExhausted)
	}
	if len(f.OriginalHeaders) != 1 || f.OriginalHeaders[0].Key != "trace" {
		t.Errorf("dead letter's original headers = %+v, want the one trace header", f.OriginalHeaders)
	}
	if string(dl[0].Value) != string(src.Value) || f.OriginalOffset < 0 {
		t.Errorf("dead letter value %q, want %q", dl[0].Value, src.Value)
	}
	for _, h := range dl[0].Headers {
		if h.Key == consumer.HeaderRetryTier || h.Key == consumer.HeaderRetryDue {
			t.Errorf("dead letter carries retry header %s", h.Key)
		}
	}
}

// TestRetryTopicsConfig: bad retry-topic settings fail in New, naming the
// field.
func TestRetryTopicsConfig(t *testing.T) {
	base := func() consumer.Config[string, string] {
		return consumer.Config[string, string]{
			Brokers: []string{"127.0.0.1:1"}, Topics: []string{"orders"}, Group: "g",
			Value: serde.String(), Handler: func(context.Context, *consumer.Record[string, string]) error { return nil },
			Policy: consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Then: consumer.ActionRetryTopic}}},
		}
	}
	for _, tc := range []struct {
		name, field string
		edit        func(*consumer.Config[string, string])
	}{
		{"no tiers", "Policy", func(c *consumer.Config[string, string]) {}},
		{"tiers without ActionRetryTopic", "RetryTopics.Tiers", func(c *consumer.Config[string, string]) {
			c.Policy = consumer.Policy{}
			c.RetryTopics.Tiers = []time.Duration{time.Second}
		}},
		{"short tier", "RetryTopics.Tiers[1]", func(c *consumer.Config[string, string]) {
			c.RetryTopics.Tiers = []time.Duration{time.Second, time.Millisecond}
		}},
		{"same delay twice", "RetryTopics.Tiers[1]", func(c *consumer.Config[string, string]) {
			c.RetryTopics.Tiers = []time.Duration{time.Second, time.Second}
		}},
		{"template without delay", "RetryTopics.Topic", func(c *consumer.Config[string, string]) {
			c.RetryTopics.Tiers = []time.Duration{time.Second}
			c.RetryTopics.Topic = "{topic}.retry"
		}},
		{"bad placeholder", "RetryTopics.Topic", func(c *consumer.Config[string, string]) {
			c.RetryTopics.Tiers = []time.Duration{time.Second}
			c.RetryTopics.Topic = "{topic}.{nope}.{delay}"
		}},
		{"then retry topic", "RetryTopics.Then", func(c *consumer.Config[string, string]) {
			c.RetryTopics.Tiers = []time.Duration{time.Second}
			c.RetryTopics.Then = consumer.ActionRetryTopic
		}},
		{"tier is a source", "RetryTopics.Topic", func(c *consumer.Config[string, string]) {
			c.RetryTopics.Tiers = []time.Duration{time.Second}
			c.Topics = []string{"orders", "orders.retry.1s"}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base()
			tc.edit(&cfg)
			c, err := consumer.New(cfg)
			if err == nil {
				c.Close()
				t.Fatal("New accepted the configuration")
			}
			if !errors.Is(err, consumer.ErrConfig) || !strings.Contains(err.Error(), ": "+tc.field+": ") {
				t.Fatalf("error %v: want a ConfigError naming %s", err, tc.field)
			}
		})
	}
}

func TestDelayName(t *testing.T) {
	for d, want := range map[time.Duration]string{
		250 * time.Millisecond: "250ms", time.Second: "1s", 30 * time.Second: "30s", 5 * time.Minute: "5m",
		90 * time.Minute: "1h30m", 1500 * time.Millisecond: "1s500ms", 2 * time.Hour: "2h",
	} {
		if got := consumer.DelayName(d); got != want {
			t.Errorf("DelayName(%v) = %q, want %q", d, got, want)
		}
	}
	rt := consumer.RetryTopics{Tiers: []time.Duration{time.Second}}
	if got := rt.TierTopic("orders", "billing", 30*time.Second); got != "orders.retry.30s" {
		t.Errorf("TierTopic = %q", got)
	}
	rt.Topic = "{group}.{topic}.r{delay}"
	if got := rt.TierTopic("orders", "billing", 5*time.Minute); got != "billing.orders.r5m" {
		t.Errorf("TierTopic = %q", got)
	}
}

// TestIntegrationRetryTopicsWaitAndKillSwitch: a tier partition whose head
// record is not due has its fetching paused (Partition.Paused is PauseDue)
// while the source partition flows; the kill switch ends the wait, and the
// record, tried once more, goes to the dead-letter topic.
func TestIntegrationRetryTopicsWaitAndKillSwitch(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "rtwait", 1)
	group := kafkatest.UniqueName("rtwait-group")
	prod := c.Client(t, kgo.ProducerLinger(0))
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte("a"), Value: []byte("bad")})

	var mu sync.Mutex
	var good, tries int
	c1, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics: consumer.RetryTopics{Tiers: []time.Duration{10 * time.Minute, 20 * time.Minute}},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			mu.Lock()
			defer mu.Unlock()
			if r.Value == "bad" {
				tries++
				return failure.Transient(errors.New("always down"))
			}
			good++
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	tier := topic + ".retry.10m"
	kafkatest.WaitFor(t, 60*time.Second, "the tier partition paused until its record is due", func() bool {
		for _, p := range c1.Stats().Partitions {
			if p.Topic == tier && p.Paused == consumer.PauseDue {
				return true
			}
		}
		return false
	})
	// The source flows meanwhile, and records of other keys are not delayed.
	for i := 0; i < 20; i++ {
		kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i)), Value: []byte("ok")})
	}
	kafkatest.WaitFor(t, 30*time.Second, "20 good records processed", func() bool { mu.Lock(); defer mu.Unlock(); return good == 20 })
	if s := c1.Stats(); s.DeadLettered != 0 || s.Forwarded != 1 {
		t.Fatalf("before the kill switch: dead-lettered %d, forwarded %d; want 0 and 1", s.DeadLettered, s.Forwarded)
	}
	c1.SetRetryEnabled(false)
	kafkatest.WaitFor(t, 30*time.Second, "the waiting record dead-lettered", func() bool { return c1.Stats().DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if tries != 2 {
		t.Errorf("the bad record was tried %d times, want 2 (source, then once from the tier)", tries)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	l, err := deadletter.ParseRecord(dl[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.Reason != string(deadletter.ReasonRetryDisabled) || l.Attempts != 2 || l.OriginalTopic != topic {
		t.Errorf("dead letter reason %s attempts %d topic %s; want %s, 2, %s", l.Reason, l.Attempts, l.OriginalTopic, deadletter.ReasonRetryDisabled, topic)
	}
}

// TestIntegrationRetryTopicsMaxParked: at RetryTopics.MaxParked records in
// the tiers, the source partition stops (PauseParked) instead of growing
// the per-key state, and goes on once the tiers drain.
func TestIntegrationRetryTopicsMaxParked(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "rtmax", 1)
	group := kafkatest.UniqueName("rtmax-group")
	prod := c.Client(t, kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for i := 0; i < 30; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k" + strconv.Itoa(i%3)), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.Produce(t, prod, recs...)

	var mu sync.Mutex
	release := false
	done := map[string]int{}
	c1, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics: consumer.RetryTopics{Tiers: []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond}, MaxParked: 5},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			mu.Lock()
			defer mu.Unlock()
			if r.Key == "k0" && !release {
				return failure.Transient(errors.New("k0 is down"))
			}
			done[r.Key]++
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	kafkatest.WaitFor(t, 60*time.Second, "the source partition stopped at MaxParked", func() bool {
		for _, p := range c1.Stats().Partitions {
			if p.Topic == topic && p.Paused == consumer.PauseParked {
				return true
			}
		}
		return false
	})
	mu.Lock()
	release = true
	mu.Unlock()
	kafkatest.WaitFor(t, 60*time.Second, "every record processed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done["k0"]+done["k1"]+done["k2"] >= 30
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
