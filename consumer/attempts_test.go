package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
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
	fails := failsAlways(&mu, &seen)
	handler := func(ctx context.Context, r *consumer.Record[string, string]) error {
		if r.Value != "always fails" {
			return nil
		}
		return fails(ctx, r)
	}
	mod := func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Concurrency = consumer.Concurrency{Max: conc}
		if batch {
			cfg.Handler, cfg.BatchHandler = nil, asBatch(cfg.Handler)
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
// a retry of a record runs does not count that try when it failed with a
// context error (its failure may be the stop's own), but keeps the tries
// before it: the next member goes on at the cut try's attempt. (Before:
// nothing was saved, and it started again at 1; CI caught it as
// [1 2 1 2 3 ...].) A try that failed with an error of its own counts, even
// when the stop came before the worker looked at it: the next member goes on
// after it.
func TestIntegrationDurableAttemptsStoppedDuringATry(t *testing.T) {
	c := kafkatest.New(t)
	for _, tc := range []struct {
		name string
		err  func(ctx context.Context) error
		want []int
	}{
		{"context-error", func(ctx context.Context) error { return fmt.Errorf("calling the dependency: %w", ctx.Err()) }, []int{1, 2, 2, 3, 4}},
		{"own-error", func(context.Context) error { return failure.Transient(errors.New("dependency down")) }, []int{1, 2, 3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
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
					return tc.err(ctx)
				}
				return failure.Transient(errors.New("dependency down"))
			}
			mod := func(cfg *consumer.Config[string, string]) {
				cfg.Key = nil
				cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 4)
			}
			runUntil(t, testConsumer(t, c, topic, group, serde.String(), handler, mod), running, "the second try")
			untilDeadLettered(t, c, topic, group, handler, mod)
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(seen, tc.want) {
				t.Fatalf("attempts seen by the handler %v; want %v", seen, tc.want)
			}
		})
	}
}

// TestIntegrationDurableAttemptsBatchStopped: a batch that fails one record
// with an error of its own and is then cut by the member's stop (a later
// record of it ran until the stop) keeps that failure: the next member tries
// the record at attempt 2. (Before: the batch path saved nothing when the
// worker stopped, and the record was tried at 1 again; kfake seed 917447937
// of the fault runs.)
func TestIntegrationDurableAttemptsBatchStopped(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "durable-batch-cut", "fails", "waits")
	group := kafkatest.UniqueName("durable-batch-cut")
	var mu sync.Mutex
	var seen []int // attempts of "fails"
	running := make(chan struct{}, 1)
	waited := false
	batch := func(ctx context.Context, recs []*consumer.Record[string, string]) error {
		errs := map[int]error{}
		for i, r := range recs {
			switch r.Value {
			case "fails":
				mu.Lock()
				seen = append(seen, r.Attempt)
				mu.Unlock()
				errs[i] = failure.Transient(errors.New("dependency down"))
			case "waits":
				mu.Lock()
				first := !waited
				waited = true
				mu.Unlock()
				if first { // the first member's batch: it runs until the stop
					running <- struct{}{}
					<-ctx.Done()
					errs[i] = ctx.Err()
				}
			}
		}
		if len(errs) > 0 {
			return &consumer.BatchError{Errs: errs}
		}
		return nil
	}
	mod := func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Handler = nil
		cfg.BatchHandler = batch
		cfg.Batching = consumer.Batching{Size: 2, Linger: time.Second}
		cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 4)
	}
	runUntil(t, testConsumer(t, c, topic, group, serde.String(), nil, mod), running, "the batch")
	untilDeadLettered(t, c, topic, group, nil, mod)
	mu.Lock()
	defer mu.Unlock()
	if want := []int{1, 2, 3, 4}; !slices.Equal(seen, want) {
		t.Fatalf("attempts of the failing record %v; want %v (its failure in the cut batch counted)", seen, want)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 || parse(t, dl[0]).Attempts != 4 {
		t.Fatalf("dead letters %d; want one with 4 attempts", len(dl))
	}
}

// TestIntegrationDurableAttemptsBatchStoppedInARetry: a batch that fails two
// records, the first of which is retrying in place when the member stops,
// keeps the second one's failure too: the next member tries it at attempt 2.
// (Before: only the record being retried saved its count, and the next
// member tried the second at 1 again; kfake seed 9700050 of the fault runs.)
func TestIntegrationDurableAttemptsBatchStoppedInARetry(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "durable-batch-wait", "a", "b")
	group := kafkatest.UniqueName("durable-batch-wait")
	var mu sync.Mutex
	seen := map[string][]int{}
	batch := func(_ context.Context, recs []*consumer.Record[string, string]) error {
		errs := map[int]error{}
		mu.Lock()
		defer mu.Unlock()
		for i, r := range recs {
			seen[r.Value] = append(seen[r.Value], r.Attempt)
			errs[i] = failure.Transient(errors.New("dependency down"))
		}
		return &consumer.BatchError{Errs: errs}
	}
	mod := func(wait time.Duration) func(cfg *consumer.Config[string, string]) {
		return func(cfg *consumer.Config[string, string]) {
			cfg.Key = nil
			cfg.Handler = nil
			cfg.BatchHandler = batch
			cfg.Batching = consumer.Batching{Size: 2, Linger: time.Second}
			cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(wait), 4)
		}
	}
	// The first member stops while "a" waits for its second try.
	first := testConsumer(t, c, topic, group, serde.String(), nil, mod(time.Minute))
	stop := runConsumer(t, first)
	kafkatest.WaitFor(t, 30*time.Second, "a retrying", func() bool {
		s := first.Stats()
		return len(s.Stuck) == 1 && s.Stuck[0].Offset == 0
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	second := testConsumer(t, c, topic, group, serde.String(), nil, mod(50*time.Millisecond))
	stop = runConsumer(t, second)
	kafkatest.WaitFor(t, 30*time.Second, "both dead-lettered", func() bool { return second.Stats().DeadLettered == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, v := range []string{"a", "b"} {
		if want := []int{1, 2, 3, 4}; !slices.Equal(seen[v], want) {
			t.Errorf("attempts of %s %v; want %v", v, seen[v], want)
		}
	}
}

// TestDurableAttemptsLetterNotWritten: a record that used all of its tries
// keeps its durable entry while its dead letter is not written yet, with the
// failure the letter tells: a member stopped then leaves it to the next one,
// which writes the letter again without trying the record once more.
// (Before: the count was deleted as soon as the letter was sent, and the
// next member tried the record 4 times again, kfake seed 7400042 of the
// fault runs, a dead-letter topic deleted under the consumer; then the
// next member made the last try again, seed 9840015.)
func TestDurableAttemptsLetterNotWritten(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	var refusing atomic.Bool
	var dlq atomic.Pointer[[16]byte]
	refuseWrites(c, &refusing, &dlq)
	for _, tc := range []struct {
		batch bool
		tries int
	}{{false, 4}, {true, 4}, {false, 1}, {true, 1}} {
		batch := tc.batch
		t.Run(fmt.Sprintf("batch-%v-tries-%d", batch, tc.tries), func(t *testing.T) {
			topic := oneTopic(t, c, "durable-unwritten", "always fails")
			created, err := kadm.NewClient(c.Client(t)).CreateTopic(context.Background(), 1, -1, nil, topic+".dlq")
			if err != nil {
				t.Fatal(err)
			}
			id := [16]byte(created.ID)
			dlq.Store(&id)
			group := kafkatest.UniqueName("durable-unwritten")
			mod := func(cfg *consumer.Config[string, string]) {
				cfg.Key = nil
				cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), tc.tries)
				cfg.DeadLetter.Retry = backoff.Fixed(100 * time.Millisecond)
				if batch {
					cfg.Handler, cfg.BatchHandler = nil, asBatch(cfg.Handler)
				}
			}
			// The second member writes the first one's letter: no try.
			f := letterHandedOver(t, c, topic, group, &refusing, tc.tries, mod, mod)
			if f.ErrorType != "*errors.errorString" || f.Reason != deadletter.ReasonExhausted || f.Class != "transient" || f.Stage != deadletter.StageProcess {
				t.Fatalf("dead letter %+v; want the handler's failure", f)
			}
		})
	}
}

// refuseWrites makes every write to the topic whose id is *to fail while
// *refusing is set (a request names it by id from Produce v13, by name
// before); a write of another topic in the same request is retried by the
// client.
func refuseWrites(c *kafkatest.Cluster, refusing *atomic.Bool, to *atomic.Pointer[[16]byte]) (refused *atomic.Int64) {
	refused = new(atomic.Int64)
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		id := to.Load()
		isRefused := func(t kmsg.ProduceRequestTopic) bool {
			return t.TopicID == *id || strings.HasSuffix(t.Topic, ".dlq") || strings.Contains(t.Topic, ".retry.")
		}
		if !refusing.Load() || id == nil || !slices.ContainsFunc(pr.Topics, isRefused) {
			return nil, nil, false
		}
		refused.Add(1)
		return refusal(pr, func(t kmsg.ProduceRequestTopic) int16 {
			if isRefused(t) {
				return kerr.InvalidRecord.Code
			}
			return kerr.NotLeaderForPartition.Code
		}), nil, true
	})
	return refused
}

// refusal answers pr with an error for each of its partitions: code(t) for
// those of topic t.
func refusal(pr *kmsg.ProduceRequest, code func(t kmsg.ProduceRequestTopic) int16) *kmsg.ProduceResponse {
	resp := pr.ResponseKind().(*kmsg.ProduceResponse)
	resp.Version = pr.Version
	for _, rt := range pr.Topics {
		st := kmsg.NewProduceResponseTopic()
		st.Topic, st.TopicID = rt.Topic, rt.TopicID
		for _, rp := range rt.Partitions {
			sp := kmsg.NewProduceResponseTopicPartition()
			sp.Partition, sp.ErrorCode = rp.Partition, code(rt)
			st.Partitions = append(st.Partitions, sp)
		}
		resp.Topics = append(resp.Topics, st)
	}
	return resp
}

// invalidRecord is a refusal code for every topic: the write fails at once.
func invalidRecord(kmsg.ProduceRequestTopic) int16 { return kerr.InvalidRecord.Code }

// letterHandedOver runs a member of group (configured by mod1, with a
// handler that always fails) until a letter write of topic's one record has
// failed (refusing), stops it, lets writes through, and runs a second member
// (mod2) until the record is dead-lettered. It checks that the handler saw
// tries 1 to tries only, the second member making none, and that the one
// dead letter tells the first member's failure, and returns that letter.
func letterHandedOver(t *testing.T, c *kafkatest.Cluster, topic, group string, refusing *atomic.Bool, tries int, mod1, mod2 func(*consumer.Config[string, string])) *deadletter.Failure {
	t.Helper()
	var mu sync.Mutex
	var seen []int
	handler := failsAlways(&mu, &seen)
	refusing.Store(true)
	first := testConsumer(t, c, topic, group, serde.String(), handler, mod1)
	stop := runConsumer(t, first)
	kafkatest.WaitFor(t, 30*time.Second, "a failed letter write", func() bool { return first.Stats().DeadLetterWriteErrors >= 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	refusing.Store(false)
	untilDeadLettered(t, c, topic, group, handler, mod2)
	mu.Lock()
	defer mu.Unlock()
	var want []int
	for i := 1; i <= tries; i++ {
		want = append(want, i)
	}
	if !slices.Equal(seen, want) {
		t.Fatalf("attempts seen by the handler %v; want %v", seen, want)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 {
		t.Fatalf("dead letters %d; want one", len(dl))
	}
	f := parse(t, dl[0])
	if f.Attempts != tries || f.Message != "dependency down" {
		t.Fatalf("dead letter %+v; want the first member's failure after %d attempts", f, tries)
	}
	return f
}

// TestDurableAttemptsForwardNotWritten: a record that used its tries in
// place and whose forward to a retry tier was not written when its member
// stopped is dead-lettered, without another try, by a next member that has
// no retry tiers (a deploy that turned them off): its durable entry says
// "forward", and there is nothing to forward to.
func TestDurableAttemptsForwardNotWritten(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	var refusing atomic.Bool
	var tier atomic.Pointer[[16]byte]
	refuseWrites(c, &refusing, &tier)
	topic := oneTopic(t, c, "durable-forward", "always fails")
	group := kafkatest.UniqueName("durable-forward")
	tiers := consumer.RetryTopics{Tiers: []time.Duration{50 * time.Millisecond}}
	created, err := kadm.NewClient(c.Client(t)).CreateTopic(context.Background(), 1, -1, nil, tiers.TierTopic(topic, group, tiers.Tiers[0]))
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(created.ID)
	tier.Store(&id)
	f := letterHandedOver(t, c, topic, group, &refusing, 4, func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 4), Then: consumer.ActionRetryTopic}
		cfg.RetryTopics = tiers
		cfg.DeadLetter.Retry = backoff.Fixed(100 * time.Millisecond)
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 4)
	})
	if f.Reason != deadletter.ReasonExhausted {
		t.Fatalf("dead letter %+v; want reason retries exhausted", f)
	}
}

// asBatch is h as a BatchHandler: each record in turn, its failure in a
// BatchError.
func asBatch[V any](h consumer.Handler[string, V]) consumer.BatchHandler[string, V] {
	return func(ctx context.Context, recs []*consumer.Record[string, V]) error {
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

// failsAlways is a handler that fails every call transiently and appends
// the call's attempt to *seen (under mu).
func failsAlways(mu *sync.Mutex, seen *[]int) consumer.Handler[string, string] {
	return func(_ context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		*seen = append(*seen, r.Attempt)
		mu.Unlock()
		return failure.Transient(errors.New("dependency down"))
	}
}

// runUntil runs cons until signal fires (what ran), then stops it.
func runUntil(t *testing.T, cons *consumer.Consumer[string, string], signal <-chan struct{}, what string) {
	t.Helper()
	stop := runConsumer(t, cons)
	select {
	case <-signal:
	case <-time.After(30 * time.Second):
		t.Fatal(what + " never ran")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
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

// TestDurableAttemptsLaneLetterNotWritten: with Concurrency, a record whose
// letter follows its single try, behind a lower record still being handled
// when its member stops, is not tried again by the next member: the letter
// it was in a lane's slot, not yet handed to the ledger, gets its durable
// entry at the stop too.
func TestDurableAttemptsLaneLetterNotWritten(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	var refusing atomic.Bool
	var dlq atomic.Pointer[[16]byte]
	refused := refuseWrites(c, &refusing, &dlq)
	topic := c.Topic(t, "durable-lanes", 1)
	kafkatest.Produce(t, manualProducer(t, c),
		&kgo.Record{Topic: topic, Key: []byte("a"), Value: []byte("slow")},
		&kgo.Record{Topic: topic, Key: []byte("b"), Value: []byte("bad")},
	)
	dlq.Store(createDLQ(t, c, topic))
	group := kafkatest.UniqueName("durable-lanes")
	var mu sync.Mutex
	var badTries []int
	var second atomic.Bool
	h := func(ctx context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "slow" {
			if second.Load() {
				return nil
			}
			<-ctx.Done() // handled until the stop: the bad record's slot stays behind it
			return ctx.Err()
		}
		mu.Lock()
		badTries = append(badTries, r.Attempt)
		mu.Unlock()
		return failure.Transient(errors.New("dependency down"))
	}
	mod := func(cfg *consumer.Config[string, string]) {
		cfg.Concurrency = consumer.Concurrency{Max: 2}
		cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 1)
		cfg.DeadLetter.Retry = backoff.Fixed(100 * time.Millisecond)
	}
	refusing.Store(true)
	first := testConsumer(t, c, topic, group, serde.String(), h, mod)
	stop := runConsumer(t, first)
	kafkatest.WaitFor(t, 30*time.Second, "a refused letter write", func() bool { return refused.Load() >= 1 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	refusing.Store(false)
	second.Store(true)
	untilDeadLettered(t, c, topic, group, h, mod)
	mu.Lock()
	defer mu.Unlock()
	if len(badTries) != 1 {
		t.Fatalf("the bad record was tried %v; want once (its letter was not written when the member stopped)", badTries)
	}
}

// TestDurableAttemptsStoppedWaitingForALetter: a record that failed once and
// whose worker then waits for the failed letter of an earlier record (its
// topic refuses writes) when its member stops keeps that failure: the next
// member tries it at attempt 2. (Before: the failure was saved only when the
// worker saw the stop at the top of its retry loop, not while it waited for
// the earlier letter, and the record was tried at 1 again; kfake seed
// 87100036 of the fault runs, a retry tier deleted under the letter.)
func TestDurableAttemptsStoppedWaitingForALetter(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	var refusing atomic.Bool
	var dlq atomic.Pointer[[16]byte]
	refused := refuseWrites(c, &refusing, &dlq)
	topic := oneTopic(t, c, "durable-wait", "bad", "fails")
	dlq.Store(createDLQ(t, c, topic))
	group := kafkatest.UniqueName("durable-wait")
	var mu sync.Mutex
	var tries []int
	failed := make(chan struct{}, 1)
	h := func(ctx context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "bad" {
			return failure.Permanent(errors.New("bad record"))
		}
		mu.Lock()
		tries = append(tries, r.Attempt)
		n := len(tries)
		mu.Unlock()
		if n == 1 {
			// The first try fails once the bad record's letter was
			// refused: the worker then waits for that letter.
			for refused.Load() == 0 && ctx.Err() == nil {
				time.Sleep(5 * time.Millisecond)
			}
			time.Sleep(100 * time.Millisecond) // its answer reaches the client
			failed <- struct{}{}
		}
		return failure.Transient(errors.New("dependency down"))
	}
	mod := func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.Policy.Process.Transient.Retry = backoff.MaxAttempts(backoff.Fixed(50*time.Millisecond), 4)
		cfg.DeadLetter.Retry = backoff.Fixed(100 * time.Millisecond)
	}
	refusing.Store(true)
	first := testConsumer(t, c, topic, group, serde.String(), h, mod)
	stop := runConsumer(t, first)
	select {
	case <-failed:
	case <-time.After(30 * time.Second):
		t.Fatal("the first try never failed")
	}
	kafkatest.WaitFor(t, 30*time.Second, "the worker waiting for the bad record's letter", func() bool {
		return len(first.Stats().Stuck) > 0 || first.Stats().DeadLetterWriteErrors >= 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	refusing.Store(false)
	second := testConsumer(t, c, topic, group, serde.String(), h, mod)
	stop = runConsumer(t, second)
	kafkatest.WaitFor(t, 30*time.Second, "both records dead-lettered", func() bool { return second.Stats().DeadLettered == 2 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(tries, []int{1, 2, 3, 4}) {
		t.Fatalf("attempts seen by the handler %v; want [1 2 3 4] (the first member's failure kept)", tries)
	}
}

// createDLQ creates the dead-letter topic of topic and returns its id.
func createDLQ(t *testing.T, c *kafkatest.Cluster, topic string) *[16]byte {
	t.Helper()
	created, err := kadm.NewClient(c.Client(t)).CreateTopic(context.Background(), 1, -1, nil, topic+".dlq")
	if err != nil {
		t.Fatal(err)
	}
	id := [16]byte(created.ID)
	return &id
}
