package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// The tests of records held in a retry tier's partition behind their key.

// heldConfig is a consumer of topic that sends a failure straight to the
// given tiers.
func heldConfig(t *testing.T, c *kafkatest.Cluster, topic string, tiers []time.Duration, h consumer.Handler[string, string]) consumer.Config[string, string] {
	return consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName(topic + "-group"), Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(),
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics: consumer.RetryTopics{Tiers: tiers},
		Handler:     h,
	}
}

// TestIntegrationRetryTopicsHeldOnce: the records held behind a failing key
// are written to the tiers once each. The key's first record fails at its
// source and in the first two tiers; the nine behind it are parked once, at
// their source, then wait in the tier partitions' memory (Stats.Held) while
// it moves on, and are handled in order once it succeeds.
func TestIntegrationRetryTopicsHeldOnce(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "rtheld", 1)
	prod := c.Client(t, kgo.ProducerLinger(0))
	var recs []*kgo.Record
	for i := 0; i < 10; i++ {
		recs = append(recs,
			&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(i))},
			&kgo.Record{Topic: topic, Key: []byte("o" + strconv.Itoa(i)), Value: []byte("0")})
	}
	kafkatest.Produce(t, prod, recs...)

	order := newKeyOrder()
	var mu sync.Mutex
	var violations []error
	c1, err := consumer.New(heldConfig(t, c, topic, []time.Duration{300 * time.Millisecond, 600 * time.Millisecond, 900 * time.Millisecond},
		func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Key == "k" && r.Value == "0" && r.Attempt <= 3 {
				return failure.Transient(errors.New("k is down"))
			}
			seq, _ := strconv.Atoi(r.Value)
			if err := order.add(r.Key, seq); err != nil {
				mu.Lock()
				violations = append(violations, err)
				mu.Unlock()
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	kafkatest.WaitFor(t, 60*time.Second, "every record processed", func() bool { return order.count() == 20 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range violations {
		t.Error(v)
	}
	s := c1.Stats()
	if s.Forwarded != 3 || s.Parked != 9 || s.Held < 9 {
		t.Errorf("Stats: Forwarded %d, Parked %d, Held %d: want 3, 9 (one write per record behind k's first) and at least 9", s.Forwarded, s.Parked, s.Held)
	}
}

// TestIntegrationRetryTopicsHeldOneAtATime: without Concurrency, records
// held in a tier partition that are freed at once are still handled one at
// a time.
func TestIntegrationRetryTopicsHeldOneAtATime(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "rtheld1", 1)
	prod := c.Client(t, kgo.ProducerLinger(0))
	const keys = 20
	var recs []*kgo.Record
	for i := 0; i < keys; i++ {
		k := []byte("k" + strconv.Itoa(i))
		recs = append(recs, &kgo.Record{Topic: topic, Key: k, Value: []byte("B")}, &kgo.Record{Topic: topic, Key: k, Value: []byte("P")})
	}
	kafkatest.Produce(t, prod, recs...)
	var done, cur, peak atomic.Int32
	c1, err := consumer.New(heldConfig(t, c, topic, []time.Duration{200 * time.Millisecond, 400 * time.Millisecond},
		func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value == "B" && r.Attempt <= 2 {
				return failure.Transient(errors.New("down"))
			}
			if r.Value == "P" { // all held in tier 0's partition 0, freed at about the same time
				n := cur.Add(1)
				for p := peak.Load(); n > p && !peak.CompareAndSwap(p, n); p = peak.Load() {
				}
				time.Sleep(20 * time.Millisecond)
				cur.Add(-1)
			}
			done.Add(1)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	kafkatest.WaitFor(t, 60*time.Second, "every record processed", func() bool { return done.Load() >= 2*keys })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := c1.Stats(); s.Held == 0 || peak.Load() != 1 {
		t.Errorf("%d handler calls at once in one tier partition (Held %d): want 1, and some held", peak.Load(), s.Held)
	}
}

// TestIntegrationRetryTopicsFailedLetterBehindHeld: a forward whose write
// failed, behind a record held in the same tier partition, is written again
// without waiting for the held record's key to be free.
func TestIntegrationRetryTopicsFailedLetterBehindHeld(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("refuses a write with a kfake control")
	}
	topic := c.Topic(t, "rtheldfail", 1)
	prod := c.Client(t, kgo.ProducerLinger(0))
	kafkatest.Produce(t, prod,
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("B")},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("P")},
		&kgo.Record{Topic: topic, Key: []byte("x"), Value: []byte("X")})
	var armed atomic.Bool
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		if !armed.CompareAndSwap(true, false) {
			return nil, nil, false
		}
		return refusal(req.(*kmsg.ProduceRequest), invalidRecord), nil, true
	})
	var mu sync.Mutex
	var calls []string // value/attempt, in the order of the handler's calls
	c1, err := consumer.New(heldConfig(t, c, topic, []time.Duration{500 * time.Millisecond, 1500 * time.Millisecond, 4 * time.Second},
		func(_ context.Context, r *consumer.Record[string, string]) error {
			mu.Lock()
			calls = append(calls, r.Value+"/"+strconv.Itoa(r.Attempt))
			mu.Unlock()
			switch {
			case r.Value == "B" && r.Attempt <= 3: // P waits behind it in tier 0 until it succeeds in the last tier
				return failure.Transient(errors.New("B is down"))
			case r.Value == "X" && r.Attempt <= 2:
				if r.Attempt == 2 {
					armed.Store(true) // its forward from tier 0 to tier 1, behind the held P, fails once
				}
				return failure.Transient(errors.New("X is down"))
			}
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	kafkatest.WaitFor(t, 60*time.Second, "P and X processed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, call := range calls {
			if call == "P/1" || call == "X/3" {
				n++
			}
		}
		return n == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, call := range calls {
		if call == "P/1" {
			t.Fatalf("P was handled before X's third try: X's failed forward waited behind it (%v)", calls)
		}
		if call == "X/3" {
			return
		}
	}
}

// TestIntegrationRetryTopicsHeldWakeOnce: when the first record of a key is
// settled, only the record now first wakes; the others, held behind it,
// wait on (each starts to wait once, not once per record settled before
// it).
func TestIntegrationRetryTopicsHeldWakeOnce(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "rtheldwake", 1)
	prod := c.Client(t, kgo.ProducerLinger(0))
	const n = 300
	var recs []*kgo.Record
	for i := 0; i < n; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.Produce(t, prod, recs...)
	var done atomic.Int32
	c1, err := consumer.New(heldConfig(t, c, topic, []time.Duration{time.Second, 1500 * time.Millisecond}, // time for the 299 parks into the first
		func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value == "0" && r.Attempt <= 2 {
				return failure.Transient(errors.New("k is down"))
			}
			done.Add(1)
			return nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, c1)
	kafkatest.WaitFor(t, 60*time.Second, "every record processed", func() bool { return done.Load() >= n })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := c1.Stats(); s.Held == 0 || s.Held > 2*n {
		t.Errorf("Stats.Held %d for %d records held behind one: want each to start waiting about once (%+v)", s.Held, n-1, s)
	}
}
