package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationConcurrencyHoldsOnlyItsKey: with keyed concurrency, a
// record retried in place holds back only its own key. The other keys of
// its partition flow; its key's later records wait, in order; the commit
// stays below it; an operator skip settles it, and its key goes on.
func TestIntegrationConcurrencyHoldsOnlyItsKey(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "lanes", 1)
	group := kafkatest.UniqueName("lanes")
	prod := c.Client(t, kgo.ProducerLinger(0))
	var recs []*kgo.Record
	recs = append(recs, &kgo.Record{Topic: topic, Key: []byte("stuck"), Value: []byte("0")})
	for i := 1; i <= 200; i++ {
		key := "k" + strconv.Itoa(i%20)
		if i%50 == 0 {
			key = "stuck"
		}
		recs = append(recs, &kgo.Record{Topic: topic, Key: []byte(key), Value: []byte(strconv.Itoa(i))})
	}
	kafkatest.Produce(t, prod, recs...)

	var mu sync.Mutex
	var order []string // values of key "stuck", as processed
	others := 0
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group, Logger: kafkatest.Logger(t),
		Key: serde.String(), Value: serde.String(), CommitInterval: 100 * time.Millisecond,
		Concurrency: consumer.Concurrency{Max: 4, Ahead: 400},
		Policy:      consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.Fixed(20 * time.Millisecond)}}},
		Handler: func(ctx context.Context, r *consumer.Record[string, string]) error {
			time.Sleep(time.Millisecond)
			mu.Lock()
			defer mu.Unlock()
			if r.Key == "stuck" {
				if r.Value == "0" {
					return failure.Transient(errors.New("this key's dependency is down"))
				}
				order = append(order, r.Value)
				return nil
			}
			others++
			return nil
		},
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 60*time.Second, "the other keys processed while one retries", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return others == 196
	})
	mu.Lock()
	if len(order) != 0 {
		t.Errorf("records of the retrying key ran ahead of it: %v", order)
	}
	mu.Unlock()
	s := cons.Stats()
	if len(s.Stuck) != 1 || s.Stuck[0].Offset != 0 || s.Stuck[0].Reason != consumer.StuckRetrying {
		t.Fatalf("Stats.Stuck = %+v, want the record at offset 0, retrying", s.Stuck)
	}
	if s.Partitions[0].Paused != "" {
		t.Errorf("the partition's fetching is paused (%s): with concurrency, other keys must flow", s.Partitions[0].Paused)
	}
	// A negative check, not synchronisation: for three commit intervals
	// after the other keys settled, no commit passes offset 0.
	time.Sleep(300 * time.Millisecond)
	if got := committed(t, c, group, topic)[0]; got > 0 {
		t.Fatalf("committed offset %d passes the unsettled record at offset 0", got)
	}
	if err := cons.Skip(topic, 0, 1); err == nil {
		t.Fatal("a skip at an offset that is not stuck was accepted")
	}
	if err := cons.Skip(topic, 0, 0); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the key's later records processed", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(order) == 4
	})
	kafkatest.WaitFor(t, 30*time.Second, "commits at the end", func() bool { return committed(t, c, group, topic)[0] == int64(len(recs)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if want := []string{"50", "100", "150", "200"}; len(order) != 4 || order[0] != want[0] || order[1] != want[1] || order[2] != want[2] || order[3] != want[3] {
		t.Errorf("key order %v, want %v", order, want)
	}
	if s := cons.Stats(); s.Skipped != 1 || s.Processed != uint64(len(recs)-1) {
		t.Errorf("skipped %d processed %d; want 1 and %d", s.Skipped, s.Processed, len(recs)-1)
	}
}

// TestConcurrencyConfig: bad concurrency settings fail in New, naming the
// field.
func TestConcurrencyConfig(t *testing.T) {
	for _, tc := range []struct {
		field string
		c     consumer.Concurrency
		rt    consumer.RetryTopics
	}{
		{"Concurrency.Max", consumer.Concurrency{Max: -1}, consumer.RetryTopics{}},
		{"Concurrency.Ahead", consumer.Concurrency{Max: 8, Ahead: 4}, consumer.RetryTopics{}},
		{"Concurrency.AheadBytes", consumer.Concurrency{Max: 8, AheadBytes: -1}, consumer.RetryTopics{}},
	} {
		cfg := consumer.Config[string, string]{
			Brokers: []string{"127.0.0.1:1"}, Topics: []string{"orders"}, Group: "g", Value: serde.String(),
			Handler:     func(context.Context, *consumer.Record[string, string]) error { return nil },
			Concurrency: tc.c, RetryTopics: tc.rt,
		}
		if tc.rt.Tiers != nil {
			cfg.Policy.Process.Transient.Then = consumer.ActionRetryTopic
		}
		c, err := consumer.New(cfg)
		if err == nil {
			c.Close()
			t.Fatalf("%+v accepted", tc.c)
		}
		if !errors.Is(err, consumer.ErrConfig) || !containsField(err, tc.field) {
			t.Errorf("%+v: %v; want a config error naming %s", tc.c, err, tc.field)
		}
	}
}

func containsField(err error, field string) bool {
	s := err.Error()
	for i := 0; i+len(field)+2 <= len(s); i++ {
		if s[i:i+len(field)+2] == field+": " {
			return true
		}
	}
	return false
}
