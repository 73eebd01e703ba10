package consumer_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// newClients counts the kgo clients its hooks are installed in, as
// kprom.Metrics does in OnNewClient (where kprom registers its collectors,
// and panics the second time).
type newClients struct{ n atomic.Int32 }

func (h *newClients) OnNewClient(*kgo.Client) { h.n.Add(1) }

// TestIntegrationClientHooksSeeOneClient: the kgo hooks of Config.ClientOpts are
// installed in the consumer's client only. With retry topics, the per-key
// order rebuild of a restarted consumer makes a reader client of its own
// from ClientOpts, hooks included.
func TestIntegrationClientHooksSeeOneClient(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "hooks", 1)
	group := kafkatest.UniqueName("hooks-group")
	prod := c.Client(t, kgo.ProducerLinger(0))
	ctx := context.Background()
	kafkatest.Produce(t, prod,
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("fail")},
		&kgo.Record{Topic: topic, Key: []byte("k"), Value: []byte("later")},
	)
	run := func(hooks *newClients, until func(consumer.Stats) bool) {
		cons, err := consumer.New(consumer.Config[string, string]{
			Brokers: c.Brokers(), Topics: []string{topic}, Group: group,
			Key: serde.String(), Value: serde.String(),
			Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
				if r.Value == "fail" {
					return failure.Transient(errors.New("down"))
				}
				return nil
			},
			Policy:         consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Outcome{Retry: backoff.None(), Then: consumer.RetryTopic}}},
			RetryTopics:    consumer.RetryTopics{Tiers: []time.Duration{time.Hour}},
			CommitInterval: 100 * time.Millisecond,
			Logger:         slog.New(slog.NewTextHandler(io.Discard, nil)),
			ClientOpts:     []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hooks)},
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithTimeout(ctx, 20*time.Second)
		defer stop()
		done := make(chan error, 1)
		go func() { done <- cons.Run(rctx) }()
		for rctx.Err() == nil && !until(cons.Stats()) {
			time.Sleep(20 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond) // a commit, and the rebuild
		stop()
		<-done
	}
	// The first run forwards "fail" to the 1h tier and parks "later".
	first := &newClients{}
	run(first, func(s consumer.Stats) bool { return s.Forwarded == 1 && s.Parked == 1 })
	// The second run finds them in the tier when assigned.
	second := &newClients{}
	run(second, func(s consumer.Stats) bool { return s.Ready })
	if n := first.n.Load(); n != 1 {
		t.Errorf("first run: ClientOpts' hooks installed in %d clients, want 1", n)
	}
	if n := second.n.Load(); n != 1 {
		t.Errorf("second run: ClientOpts' hooks installed in %d clients, want 1 (a kprom.Metrics panics: duplicate metrics collector registration)", n)
	}
}
