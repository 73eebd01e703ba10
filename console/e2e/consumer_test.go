package e2e

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationConsoleConsumer: a running consumer stuck on a record
// that fails transiently for ever, and the console on its admin API. The console shows the partition stuck
// on its offset and skips it; stuck again on the next one, the kill switch
// turns retrying off and the consumer dead-letters it.
func TestIntegrationConsoleConsumer(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "stuck", 1)
	pcl := c.Client(t, kgo.ProducerLinger(0))
	t.Cleanup(func() { deleteTopic(pcl, topic+".dlq") })
	kafkatest.Produce(t, pcl,
		&kgo.Record{Topic: topic, Value: []byte("poison-1")},
		&kgo.Record{Topic: topic, Value: []byte("ok-1")},
		&kgo.Record{Topic: topic, Value: []byte("poison-2")},
		&kgo.Record{Topic: topic, Value: []byte("ok-2")},
		&kgo.Record{Topic: topic, Value: []byte("poison-3")},
		&kgo.Record{Topic: topic, Value: []byte("ok-3")},
	)
	var processed atomic.Int32
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"),
		Value: serde.String(),
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			if strings.HasPrefix(r.Value, "poison") {
				return failure.Transient(errors.New("inventory database down"))
			}
			processed.Add(1)
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.Fixed(50 * time.Millisecond)},
		}},
		Logger: kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	})
	stuckOn := func(o int64) func() bool {
		return func() bool { s := cons.Stats().Stuck; return len(s) == 1 && s[0].Offset == o }
	}
	kafkatest.WaitFor(t, 60*time.Second, "stuck on offset 0", stuckOn(0))

	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t),
		Consumers: map[string]admin.Consumer{"orders": cons}, Prefix: "/ui/",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	// Served by the admin API of the consumer, under /ui/.
	adm, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"orders": cons}, Token: token, Logger: kafkatest.Logger(t), Console: h})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, adm, "/ui")
	tb.login(t)
	tb.run(t, "consumer page",
		chromedp.Click(`#consumers a`, chromedp.ByQuery),
		chromedp.WaitVisible("#partitions", chromedp.ByID),
	)
	row := tb.text(t, "#partitions tbody tr")
	contains(t, "partition row", row, "stuck")
	contains(t, "partition row", row, "inventory database down")
	if got := tb.text(t, ".stuck-offset"); got != "0" {
		t.Errorf("stuck offset shown %q, want 0", got)
	}
	tb.screenshot(t, "consumer")

	// Skip the record: the consumer moves on, and gets stuck on the next.
	tb.run(t, "skip", chromedp.Click("button.skip", chromedp.ByQuery), chromedp.WaitVisible("#message", chromedp.ByID))
	contains(t, "after skip", tb.text(t, "#message"), "skipped")
	kafkatest.WaitFor(t, 60*time.Second, "stuck on offset 2", stuckOn(2))
	if st := cons.Stats(); st.Skipped != 1 || processed.Load() != 1 {
		t.Errorf("after the skip: %d skipped, %d processed; want 1 and 1", st.Skipped, processed.Load())
	}

	// Dead-letter the record: it goes to the dead-letter topic (reason
	// operator), and the consumer gets stuck on the next.
	tb.run(t, "dead-letter",
		chromedp.Navigate(tb.base+"/consumers/orders"),
		chromedp.WaitVisible("button.deadletter", chromedp.ByQuery),
		chromedp.Click("button.deadletter", chromedp.ByQuery),
		chromedp.WaitVisible("#message", chromedp.ByID),
	)
	contains(t, "after dead-letter", tb.text(t, "#message"), "dead-lettered "+topic+"[0] offset 2")
	kafkatest.WaitFor(t, 60*time.Second, "stuck on offset 4", stuckOn(4))
	kafkatest.WaitFor(t, 60*time.Second, "poison-2 dead-lettered", func() bool { return cons.Stats().DeadLettered == 1 })
	if processed.Load() != 2 {
		t.Errorf("after the dead letter: %d processed; want 2", processed.Load())
	}

	// The kill switch: retrying off, the record goes to the dead-letter
	// topic, and the partition flows again.
	if !cons.Stats().RetryEnabled {
		t.Fatal("retrying is off before the kill switch")
	}
	tb.run(t, "kill switch",
		chromedp.Navigate(tb.base+"/consumers/orders"),
		chromedp.WaitVisible("#kill", chromedp.ByID),
		chromedp.Click("#kill", chromedp.ByID),
		chromedp.WaitVisible("#message", chromedp.ByID),
	)
	if got := tb.text(t, "#retry-state"); got != "off" {
		t.Errorf("retrying shown %q after the kill switch, want off", got)
	}
	if cons.Stats().RetryEnabled {
		t.Error("Stats().RetryEnabled is still true after the kill switch")
	}
	kafkatest.WaitFor(t, 60*time.Second, "the third poison pill dead-lettered", func() bool { return cons.Stats().DeadLettered == 2 })
	kafkatest.WaitFor(t, 60*time.Second, "ok-3 processed", func() bool { return processed.Load() == 3 })
	tb.run(t, "reload", chromedp.Navigate(tb.base+"/consumers/orders"), chromedp.WaitVisible("#partitions", chromedp.ByID))
	contains(t, "after the kill switch", tb.text(t, "#partitions tbody tr"), "flowing")
	contains(t, "after the kill switch", tb.text(t, "#dead-lettered"), "2")

	// Retrying on again.
	tb.run(t, "retrying on", chromedp.Click("#kill", chromedp.ByID), chromedp.WaitVisible("#kill.danger", chromedp.ByQuery))
	if got := tb.text(t, "#retry-state"); got != "on" || !cons.Stats().RetryEnabled {
		t.Errorf("retrying shown %q after turning it on, Stats().RetryEnabled %v; want on and true", got, cons.Stats().RetryEnabled)
	}

	// Pause the partition, then resume it.
	operatorPaused := func() bool {
		ps := cons.Stats().Partitions
		return len(ps) == 1 && ps[0].Paused == consumer.PauseOperator
	}
	tb.run(t, "pause", chromedp.Click("#partitions button.pause", chromedp.ByQuery), chromedp.WaitVisible("#partitions button.resume", chromedp.ByQuery))
	contains(t, "after pause", tb.text(t, "#message"), topic+"[0] paused")
	if !operatorPaused() {
		t.Errorf("after Pause: partitions %+v, want paused by the operator", cons.Stats().Partitions)
	}
	contains(t, "after pause", tb.text(t, "#partitions tbody tr"), "paused (operator)")
	tb.screenshot(t, "consumer-paused")
	tb.run(t, "resume", chromedp.Click("#partitions button.resume", chromedp.ByQuery), chromedp.WaitVisible("#partitions button.pause", chromedp.ByQuery))
	contains(t, "after resume", tb.text(t, "#message"), topic+"[0] resumed")
	if operatorPaused() {
		t.Errorf("after Resume: partitions %+v, still paused by the operator", cons.Stats().Partitions)
	}
	if d := tb.dialogs.Load(); d != 0 {
		t.Errorf("%d dialogs opened", d)
	}
}

// TestIntegrationConsoleFlood: a consumer whose flood guard tripped, and
// the console's button that lets it go on.
func TestIntegrationConsoleFlood(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "flood", 1)
	pcl := c.Client(t, kgo.ProducerLinger(0))
	t.Cleanup(func() { deleteTopic(pcl, topic+".dlq") })
	var rs []*kgo.Record
	for i := range 10 {
		v := "ok"
		if i < 6 {
			v = "poison"
		}
		rs = append(rs, &kgo.Record{Topic: topic, Value: []byte(v)})
	}
	kafkatest.Produce(t, pcl, rs...)
	var processed atomic.Int32
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"),
		Value: serde.String(),
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			if r.Value == "poison" {
				return failure.Permanent(errors.New("malformed order"))
			}
			processed.Add(1)
			return nil
		},
		// Trips on the third dead letter of the first three records.
		FloodGuard: consumer.FloodGuard{Window: 10, Min: 3, Share: 0.2},
		Logger:     kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond)},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run = %v", err)
		}
	})
	kafkatest.WaitFor(t, 60*time.Second, "the flood guard tripped", func() bool { return cons.Stats().Flood != nil })

	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t),
		Consumers: map[string]admin.Consumer{"orders": cons},
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	tb := newTab(t, h, "")
	tb.login(t)
	tb.run(t, "consumer page", chromedp.Navigate(tb.base+"/consumers/orders"), chromedp.WaitVisible("#flood-resume", chromedp.ByID))
	contains(t, "flood guard", tb.text(t, "#flood"), "tripped at "+topic+"[0] offset 2")
	tb.screenshot(t, "consumer-flood")
	tb.run(t, "let it go on", chromedp.Click("#flood-resume", chromedp.ByID), chromedp.WaitVisible("#message", chromedp.ByID))
	contains(t, "after the flood guard's resume", tb.text(t, "#message"), "the flood guard let the consumer go on")
	kafkatest.WaitFor(t, 60*time.Second, "every record settled", func() bool {
		st := cons.Stats()
		return st.DeadLettered == 6 && processed.Load() == 4
	})
	if st := cons.Stats(); st.Flood != nil || st.FloodTrips != 1 {
		t.Errorf("after the resume: flood %+v, %d trips; want none now and 1 trip", st.Flood, st.FloodTrips)
	}
	tb.run(t, "reload", chromedp.Navigate(tb.base+"/consumers/orders"), chromedp.WaitVisible("#flood", chromedp.ByID))
	contains(t, "after the flood guard's resume", tb.text(t, "#flood"), "not tripped (1 trips)")
}
