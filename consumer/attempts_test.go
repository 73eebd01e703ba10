package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationDurableAttempts: a record retried in place keeps its attempt
// count across a restart of the consumer: the new member goes on from where
// the old one stopped, dead-letters it after the policy's total number of
// tries, and deletes the state entry. (Before: it started again at 1.) It
// runs with one record at a time and with keyed concurrency, where records of
// several keys may retry at once.
func TestIntegrationDurableAttempts(t *testing.T) {
	c := kafkatest.New(t)
	for _, batch := range []bool{false, true} {
		for _, conc := range []int{0, 4} {
			name := fmt.Sprintf("concurrency-%d", conc)
			if batch {
				name = "batch-" + name
			}
			t.Run(name, func(t *testing.T) { testDurableAttempts(t, c, conc, batch, 3) })
		}
	}
	// A member stopped after the first failure: that one is saved at the
	// stop (the retry path saves from the second on).
	t.Run("after-one-failure", func(t *testing.T) { testDurableAttempts(t, c, 0, false, 1) })
	t.Run("batch-after-one-failure", func(t *testing.T) { testDurableAttempts(t, c, 0, true, 1) })
}

func testDurableAttempts(t *testing.T, c *kafkatest.Cluster, conc int, batch bool, failures int) {
	topic := oneTopic(t, c, "durable", "ok", "always fails", "after")
	group := kafkatest.UniqueName("durable")
	var mu sync.Mutex
	var seen []int
	handler := func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value != "always fails" {
			return nil
		}
		mu.Lock()
		seen = append(seen, r.Attempt)
		mu.Unlock()
		return failure.Transient(errors.New("dependency down"))
	}
	mod := func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Concurrency = consumer.Concurrency{Max: conc}
		if batch {
			h := cfg.Handler
			cfg.Handler = nil
			cfg.BatchHandler = func(ctx context.Context, recs []*consumer.Record[string, string]) error {
				errs := map[int]error{}
				for i, r := range recs {
					if err := h(ctx, r); err != nil {
						errs[i] = err
					}
				}
				if len(errs) > 0 {
					return &consumer.BatchError{Errs: errs}
				}
				return nil
			}
		}
		cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(100*time.Millisecond), 8)
	}
	first := testConsumer(t, c, topic, group, serde.String(), handler, mod)
	stop := runConsumer(t, first)
	kafkatest.WaitFor(t, 30*time.Second, fmt.Sprintf("%d failed tries", failures), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= failures
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	before := seen[len(seen)-1]
	mu.Unlock()

	untilDeadLettered(t, c, topic, group, handler, mod)
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%s: attempts seen by the handler: %v", c.Kind(), seen)
	// The first member's last try may have been cut by its stop (the stop
	// came while it ran, or before the worker looked at its result): such
	// a failure may be the stop's own, and is tried again. Every try
	// before it counts, so the second member goes on at before+1, or at
	// before after a cut try, and never lower.
	boundary := -1
	for i := 1; i < len(seen); i++ {
		if seen[i-1] == before && boundary < 0 {
			boundary = i
			if seen[i] != before && seen[i] != before+1 {
				t.Fatalf("attempts %v: the second member went on at %d; want %d (or %d after a try cut by the stop)", seen, seen[i], before+1, before)
			}
			if seen[i] < 2 {
				t.Fatalf("attempts %v: the second member started again at %d", seen, seen[i])
			}
			continue
		}
		if seen[i] <= seen[i-1] {
			t.Fatalf("attempts went back from %d to %d: %v", seen[i-1], seen[i], seen)
		}
	}
	if boundary < 0 || seen[len(seen)-1] != 8 {
		t.Fatalf("attempts %v: want the second member to go on after %d and stop at 8", seen, before)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 || parse(t, dl[0]).Attempts != 8 {
		t.Fatalf("dead letters %d; want one with 8 attempts", len(dl))
	}
	state := readAll(t, c, group+".antidote-attempts")
	if len(state) == 0 || state[len(state)-1].Value != nil || !strings.HasPrefix(string(state[0].Key), topic+"/0") {
		t.Fatalf("attempts topic holds %d records; want entries for %s/0 ending in a tombstone", len(state), topic)
	}
}

// TestIntegrationDurableAttemptsStoppedDuringATry: a member stopped while
// a retry of a record runs does not count that try (its failure may be the
// stop's own), but keeps the tries before it: the next member goes on at
// the cut try's attempt. (Before: nothing was saved, and it started again
// at 1; CI caught it as [1 2 1 2 3 ...].)
func TestIntegrationDurableAttemptsStoppedDuringATry(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "durable-cut", "always fails")
	group := kafkatest.UniqueName("durable-cut")
	var mu sync.Mutex
	var seen []int
	running := make(chan struct{}, 1)
	handler := func(ctx context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		seen = append(seen, r.Attempt)
		n := len(seen)
		mu.Unlock()
		if n == 2 { // the first member's second try: it runs until the stop
			running <- struct{}{}
			<-ctx.Done()
		}
		return failure.Transient(errors.New("dependency down"))
	}
	mod := func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 4)
	}
	first := testConsumer(t, c, topic, group, serde.String(), handler, mod)
	stop := runConsumer(t, first)
	select {
	case <-running:
	case <-time.After(30 * time.Second):
		t.Fatal("the second try never ran")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	untilDeadLettered(t, c, topic, group, handler, mod)
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 2, 3, 4}; !slices.Equal(seen, want) {
		t.Fatalf("attempts seen by the handler %v; want %v (the cut try 2 again, then on to 4)", seen, want)
	}
}

// untilDeadLettered runs a second member of group until it has
// dead-lettered one record, and stops it.
func untilDeadLettered(t *testing.T, c *kafkatest.Cluster, topic, group string, h consumer.Handler[string, string], mod func(*consumer.Config[string, string])) {
	t.Helper()
	second := testConsumer(t, c, topic, group, serde.String(), h, mod)
	stop := runConsumer(t, second)
	kafkatest.WaitFor(t, 30*time.Second, "dead-lettered", func() bool { return second.Stats().DeadLettered == 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}
