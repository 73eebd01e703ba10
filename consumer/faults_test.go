package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestShutdownWithUnansweredDeadLetterWrite: a dead-letter produce request
// reaches the broker but is never answered (a hung or crashed leader).
// franz-go's idempotent producer never fails a batch whose outcome it does
// not know, so the worker must not wait for it: Run returns within the write
// timeout after cancel (the same wait would block a revoke), and the record
// stays unsettled.
func TestShutdownWithUnansweredDeadLetterWrite(t *testing.T) {
	synctest.Test(t, testShutdownWithUnansweredDeadLetterWrite)
}

func testShutdownWithUnansweredDeadLetterWrite(t *testing.T) {
	c := kafkatest.NewVirtual(t)
	topic := oneTopic(t, c, "hang", "ok", "\xff\xfe", "after")

	var blocking atomic.Bool
	blocking.Store(true)
	var seen atomic.Int32
	c.Fake().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		if !blocking.Load() {
			return nil, nil, false
		}
		seen.Add(1)
		return nil, nil, true // swallow: no response
	})
	t.Cleanup(func() { blocking.Store(false) })

	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil },
		func(cfg *consumer.Config[string, string]) {
			cfg.DeadLetter.WriteTimeout = time.Second
			cfg.ClientOpts = append(cfg.ClientOpts, kgo.ProduceRequestTimeout(time.Second), kgo.RequestTimeoutOverhead(time.Second))
		})
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(ctx) }()

	kafkatest.WaitFor(t, 30*time.Second, "dead-letter produce request sent", func() bool { return seen.Load() >= 1 })
	synctest.Wait() // the worker waits on the unanswered write
	cancel()
	select {
	case <-errc:
		return // shut down cleanly: no bug
	case <-time.After(10 * time.Second):
		t.Errorf("Run did not return within 10s of cancel while a dead-letter write was unanswered (WriteTimeout 1s); produce requests swallowed: %d", seen.Load())
	}
	blocking.Store(false) // let the broker answer: Run now returns
	select {
	case <-errc:
	case <-time.After(30 * time.Second):
		t.Fatal("Run did not return even after the broker answered")
	}
}

// TestDeadLetterRetryPolicyThatGivesUp: a bounded DeadLetter.Retry policy
// does not drop the dead letter, and once exhausted it keeps its last wait
// instead of retrying a fast-failing write in a hot loop.
func TestDeadLetterRetryPolicyThatGivesUp(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake fault injection")
	}
	topic := oneTopic(t, c, "dlqhot", "\xff\xfe")
	// Every produce from now on fails at once with a non-retryable error.
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		return refusal(req.(*kmsg.ProduceRequest), invalidRecord), nil, true
	})
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil },
		func(cfg *consumer.Config[string, string]) {
			cfg.DeadLetter.Retry = backoff.MaxAttempts(backoff.Fixed(200*time.Millisecond), 3)
		})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "first failed write", func() bool { return cons.Stats().DeadLetterWriteErrors >= 1 })
	time.Sleep(2 * time.Second)
	n := cons.Stats().DeadLetterWriteErrors
	_ = stop()
	// With a 200ms pace, 2s allow about 10 attempts.
	if n > 50 {
		t.Fatalf("%d failed dead-letter writes in ~2s: the write is retried in a hot loop once DeadLetter.Retry is exhausted", n)
	}
}

// flipOnRetryLog flips the kill switch from inside the "record failed,
// retrying" log call: after the retry decision, before the sleep.
type flipOnRetryLog struct {
	slog.Handler
	flip func()
}

func (h flipOnRetryLog) Enabled(context.Context, slog.Level) bool { return true }
func (h flipOnRetryLog) Handle(_ context.Context, r slog.Record) error {
	if strings.Contains(r.Message, "record failed, retrying") {
		h.flip()
	}
	return nil
}
func (h flipOnRetryLog) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h flipOnRetryLog) WithGroup(string) slog.Handler      { return h }

// TestKillSwitchFlippedWhileDeciding: a kill switch flipped between the
// retry decision and the sleep still wakes the sleep: the record is
// dead-lettered at once instead of sleeping its hour of backoff.
func TestKillSwitchFlippedWhileDeciding(t *testing.T) {
	synctest.Test(t, testKillSwitchFlippedWhileDeciding)
}

func testKillSwitchFlippedWhileDeciding(t *testing.T) {
	c := kafkatest.NewVirtual(t)
	topic := oneTopic(t, c, "killrace", "a")
	var cons *consumer.Consumer[string, string]
	var flipped atomic.Bool
	cons = stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
		return failure.Transient(errors.New("down"))
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Policy.Process.Transient.Retry = backoff.Fixed(time.Hour)
		cfg.Logger = slog.New(flipOnRetryLog{flip: func() {
			if flipped.CompareAndSwap(false, true) {
				cons.SetRetryEnabled(false)
			}
		}})
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "kill switch flipped", flipped.Load)
	// On the bubble's clock, 5s are far from the hour of backoff: a record
	// still asleep in it is never dead-lettered here.
	kafkatest.WaitFor(t, 5*time.Second, "the record dead-lettered at once, not after its 1h backoff", func() bool {
		return cons.Stats().DeadLettered == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

// TestStuckBehindUnansweredDeadLetter: a quiet partition whose dead letter
// is never answered shows as stuck on it once the stuck delay has passed,
// commits nothing past it, and an operator skip at that offset releases it.
// (Before, the idle wait did not mark the partition: Stats().Stuck stayed
// empty and Skip returned ErrNotStuck.)
func TestStuckBehindUnansweredDeadLetter(t *testing.T) {
	synctest.Test(t, testStuckBehindUnansweredDeadLetter)
}

func testStuckBehindUnansweredDeadLetter(t *testing.T) {
	c := kafkatest.NewVirtual(t)
	topic := oneTopic(t, c, "invis", "\xff\xfe", "a", "b", "c", "d", "e")
	var blocking atomic.Bool
	blocking.Store(true)
	c.Fake().ControlKey(int16(kmsg.Produce), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		if !blocking.Load() {
			return nil, nil, false
		}
		return nil, nil, true
	})
	t.Cleanup(func() { blocking.Store(false) })
	var processed atomic.Int32
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
		processed.Add(1)
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.DeadLetter.WriteTimeout = time.Second
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "the records behind the pill processed", func() bool { return processed.Load() == 5 })
	kafkatest.WaitFor(t, 30*time.Second, "stuck behind the dead letter", func() bool { return len(cons.Stats().Stuck) == 1 })
	st := cons.Stats().Stuck[0]
	if st.Offset != 0 || st.Reason != consumer.StuckDeadLetter || st.Attempts != 1 || st.Since.IsZero() {
		t.Fatalf("Stuck = %+v; want offset 0, %q, 1 write attempt, since", st, consumer.StuckDeadLetter)
	}
	group := cons.Client().OptValue(kgo.ConsumerGroup).(string)
	// Three commit intervals on the bubble's clock, every goroutine then
	// idle: each commit the consumer would make has been made.
	time.Sleep(300 * time.Millisecond)
	synctest.Wait()
	if got, ok := committed(t, c, group, topic)[0]; ok && got > 0 {
		t.Fatalf("committed %d past the unacknowledged dead letter at 0", got)
	}
	if err := cons.Skip(topic, 0, 0); err != nil {
		t.Fatalf("Skip(0) = %v", err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "committed past the skipped pill", func() bool { return committed(t, c, group, topic)[0] == 6 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := cons.Stats(); s.Skipped != 1 || s.DeadLettered != 0 || s.Processed != 5 {
		t.Fatalf("stats %+v; want the pill skipped, 5 processed, nothing dead-lettered", s)
	}
}
