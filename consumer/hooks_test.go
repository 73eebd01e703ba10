package consumer_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// recorder is a consumer.Hooks that counts what it is told.
type recorder struct {
	consumer.NopHooks
	mu       sync.Mutex
	settled  map[consumer.Outcome]int
	retried  int
	handled  int
	writes   int
	writeErr int
	stuck    int
	unstuck  int
	paused   map[consumer.PauseReason]int
	resumed  map[consumer.PauseReason]int
	assigned int
}

func newRecorder() *recorder {
	return &recorder{settled: map[consumer.Outcome]int{}, paused: map[consumer.PauseReason]int{}, resumed: map[consumer.PauseReason]int{}}
}

func (r *recorder) RecordSettled(e consumer.SettledEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.settled[e.Outcome]++
}
func (r *recorder) RecordRetried(consumer.RetryEvent) { r.mu.Lock(); r.retried++; r.mu.Unlock() }
func (r *recorder) HandlerDone(e consumer.HandlerEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if e.Duration >= 0 {
		r.handled++
	}
}
func (r *recorder) DeadLetterWritten(e consumer.WriteEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.writes++
	if e.Err != nil || e.DeadLetterTopic == "" {
		r.writeErr++
	}
}
func (r *recorder) PartitionStuck(consumer.StuckEvent)       { r.mu.Lock(); r.stuck++; r.mu.Unlock() }
func (r *recorder) PartitionUnstuck(consumer.PartitionEvent) { r.mu.Lock(); r.unstuck++; r.mu.Unlock() }
func (r *recorder) PartitionPaused(e consumer.PauseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.paused[e.Reason]++
}
func (r *recorder) PartitionResumed(e consumer.PauseEvent) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.resumed[e.Reason]++
}
func (r *recorder) PartitionsAssigned(m map[string][]int32) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ps := range m {
		r.assigned += len(ps)
	}
}

var _ consumer.Hooks = (*recorder)(nil)

// TestHooksPauseAndPartitions: the hooks hear every settled record, retry,
// handler call, dead-letter write, stuck and paused partition; an operator
// pause holds a partition until resumed; Stats describes each partition with
// its lag, and readiness.
func TestIntegrationHooksPauseAndPartitions(t *testing.T) {
	c := kafkatest.New(t)
	topic := oneTopic(t, c, "hooks", "a", "\xff", "flaky", "b")
	rec := newRecorder()
	var flaky atomic.Int32
	var processed atomic.Int32
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		if r.Value == "flaky" && flaky.Add(1) == 1 {
			return failure.Transient(errors.New("once"))
		}
		processed.Add(1)
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Hooks = rec
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(50 * time.Millisecond)
	})
	if s := cons.Stats(); s.Running || s.Ready {
		t.Fatalf("before Run: running %v, ready %v", s.Running, s.Ready)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "first records", func() bool { return processed.Load() == 3 && cons.Stats().DeadLettered == 1 })
	group := cons.Client().OptValue(kgo.ConsumerGroup).(string)
	kafkatest.WaitFor(t, 30*time.Second, "committed at the end", func() bool { return committed(t, c, group, topic)[0] == 4 })

	if err := cons.Pause(topic, 0); err != nil {
		t.Fatal(err)
	}
	if err := cons.Pause(topic, 7); !errors.Is(err, consumer.ErrNotAssigned) {
		t.Fatalf("Pause of an unowned partition = %v", err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "partition 0's fetching paused by the operator", func() bool {
		ps := cons.Stats().Partitions
		return len(ps) == 1 && ps[0].Paused == consumer.PauseOperator
	})
	kafkatest.Produce(t, manualProducer(t, c), &kgo.Record{Topic: topic, Value: []byte("while paused")})
	// A negative check, not synchronisation: for five fetch waits (the
	// test config's FetchMaxWait), the paused partition processes nothing.
	time.Sleep(500 * time.Millisecond)
	if processed.Load() != 3 {
		t.Fatal("a paused partition processed a record")
	}
	ps := cons.Stats().Partitions
	if len(ps) != 1 || ps[0].State != consumer.PartitionPaused || ps[0].Paused != consumer.PauseOperator {
		t.Fatalf("Partitions = %+v; want partition 0 paused by the operator", ps)
	}
	if err := cons.Resume(topic, 0); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the record after the resume", func() bool { return processed.Load() == 4 })
	kafkatest.WaitFor(t, 30*time.Second, "lag 0", func() bool {
		ps := cons.Stats().Partitions
		return len(ps) == 1 && ps[0].Lag == 0 && ps[0].Committed == 5 && ps[0].HighWatermark == 5 && ps[0].State == consumer.PartitionFlowing
	})
	if s := cons.Stats(); !s.Running || !s.Ready {
		t.Fatalf("while running: running %v, ready %v", s.Running, s.Ready)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := cons.Stats(); s.Running || s.Ready {
		t.Fatalf("after Run: running %v, ready %v", s.Running, s.Ready)
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	s := cons.Stats()
	if rec.settled[consumer.OutcomeProcessed] != int(s.Processed) || rec.settled[consumer.OutcomeDeadLettered] != int(s.DeadLettered) || rec.retried != int(s.Retried) || rec.retried != 1 {
		t.Errorf("hooks settled %v, retried %d; stats %+v", rec.settled, rec.retried, s)
	}
	if rec.handled != 5 || rec.writes != 1 || rec.writeErr != 0 || rec.stuck != 1 || rec.unstuck != 1 || rec.assigned != 1 {
		t.Errorf("hooks: %d handler calls, %d writes (%d failed), stuck %d, unstuck %d, assigned %d; want 5, 1, 0, 1, 1, 1",
			rec.handled, rec.writes, rec.writeErr, rec.stuck, rec.unstuck, rec.assigned)
	}
	if rec.paused[consumer.PauseStuck] != 1 || rec.paused[consumer.PauseOperator] != 1 || rec.resumed[consumer.PauseOperator] != 1 {
		t.Errorf("hooks paused %v resumed %v; want one retry pause and one operator pause, resumed", rec.paused, rec.resumed)
	}
}
