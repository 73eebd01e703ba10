package e2e

import (
	"context"
	"errors"
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

// TestIntegrationConsoleShareGroup: the console over a share-group member
// that retries its records in place for ever. The page shows the share
// group (its delivery limit, its counters) and the records retried in
// place instead of partitions; Skip ends one, Dead-letter sends another to
// the dead-letter topic, and the kill switch the third.
func TestIntegrationConsoleShareGroup(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	topic := c.Topic(t, "share-console", 3)
	pcl := c.Client(t, kgo.ProducerLinger(0), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	t.Cleanup(func() { deleteTopic(pcl, topic+".dlq") })
	for p := range 3 {
		kafkatest.Produce(t, pcl, &kgo.Record{Topic: topic, Partition: int32(p), Value: []byte("poison")})
	}
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), ClientOpts: c.ClientOpts(), Topics: []string{topic}, ShareGroup: kafkatest.UniqueName("share-console-group"),
		Share: consumer.Share{FromEarliest: true}, Value: serde.String(),
		Handler: func(context.Context, *consumer.Record[string, string]) error {
			return failure.Transient(errors.New("inventory database down"))
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.Fixed(time.Hour)},
		}},
		Concurrency: consumer.Concurrency{Max: 3},
		Logger:      kafkatest.Logger(t),
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
	// The records come in one poll or in several (a broker may return one
	// partition's records a poll): each step waits for the next.
	settled := func(n uint64) func() bool {
		return func() bool { s := cons.Stats(); return s.Skipped+s.DeadLettered == n && len(s.Stuck) > 0 }
	}
	kafkatest.WaitFor(t, 60*time.Second, "a record retried in place", settled(0))

	h, err := console.New(console.Config{
		ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t),
		Consumers: map[string]admin.Consumer{"jobs": cons}, Prefix: "/ui/",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	adm, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"jobs": cons}, Token: token, Logger: kafkatest.Logger(t), Console: h})
	if err != nil {
		t.Fatal(err)
	}
	tb := newTab(t, adm, "/ui")
	tb.login(t)
	tb.run(t, "consumer page",
		chromedp.Click(`#consumers a`, chromedp.ByQuery),
		chromedp.WaitVisible("#retrying", chromedp.ByID),
	)
	contains(t, "share group", tb.text(t, "#share-limit"), "5: a record whose failure may pass is released")
	contains(t, "share group", tb.text(t, "#share-setup"), "no problem found")
	contains(t, "share group", tb.text(t, "#share-deliveries"), "1: ")
	contains(t, "retried record", tb.text(t, "#retrying tbody tr"), "inventory database down")
	tb.screenshot(t, "consumer-share")

	tb.run(t, "skip", chromedp.Click("#retrying button.skip", chromedp.ByQuery), chromedp.WaitVisible("#message", chromedp.ByID))
	contains(t, "after skip", tb.text(t, "#message"), "skipped")
	kafkatest.WaitFor(t, 30*time.Second, "the skip, and another record retried", settled(1))

	tb.run(t, "dead-letter",
		chromedp.Navigate(tb.base+"/consumers/jobs"),
		chromedp.WaitVisible("#retrying button.deadletter", chromedp.ByQuery),
		chromedp.Click("#retrying button.deadletter", chromedp.ByQuery),
		chromedp.WaitVisible("#message", chromedp.ByID),
	)
	contains(t, "after dead-letter", tb.text(t, "#message"), "dead-lettered")
	kafkatest.WaitFor(t, 30*time.Second, "the dead letter, and the last record retried", settled(2))

	tb.run(t, "kill switch",
		chromedp.Navigate(tb.base+"/consumers/jobs"),
		chromedp.WaitVisible("#kill", chromedp.ByID),
		chromedp.Click("#kill", chromedp.ByID),
		chromedp.WaitVisible("#message", chromedp.ByID),
	)
	kafkatest.WaitFor(t, 30*time.Second, "the kill switch's dead letter", func() bool {
		s := cons.Stats()
		return s.DeadLettered == 2 && len(s.Stuck) == 0
	})
	st := cons.Stats()
	if st.Skipped != 1 || st.DeadLettered != 2 || st.ShareGroup.Accepted != 3 {
		t.Errorf("skipped %d, dead-lettered %d, accepted %d; want 1, 2, 3", st.Skipped, st.DeadLettered, st.ShareGroup.Accepted)
	}
	tb.run(t, "reload", chromedp.Navigate(tb.base+"/consumers/jobs"), chromedp.WaitVisible("#retrying", chromedp.ByID))
	contains(t, "after", tb.text(t, "#retrying tbody tr"), "No record is retried in place")
	contains(t, "after", tb.text(t, "#share-accepted"), "3")
	if d := tb.dialogs.Load(); d != 0 {
		t.Errorf("%d dialogs opened", d)
	}
}
