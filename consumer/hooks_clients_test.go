package consumer_test

import (
	"context"
	"errors"
	"log/slog"
	"sync"
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

// logSignal closes seen the first time a line with message msg is logged,
// and passes every line on to next, if set.
type logSignal struct {
	msg  string
	once sync.Once
	seen chan struct{}
	next slog.Handler
}

func (h *logSignal) Enabled(context.Context, slog.Level) bool { return true }
func (h *logSignal) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == h.msg {
		h.once.Do(func() { close(h.seen) })
	}
	if h.next != nil {
		return h.next.Handle(ctx, r)
	}
	return nil
}
func (h *logSignal) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h *logSignal) WithGroup(string) slog.Handler      { return h }

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
	// run runs a consumer until wait returns.
	run := func(hooks *newClients, logs slog.Handler, wait func(*consumer.Consumer[string, string])) {
		cons, err := consumer.New(consumer.Config[string, string]{
			Brokers: c.Brokers(), Topics: []string{topic}, Group: group,
			Key: serde.String(), Value: serde.String(),
			Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
				if r.Value == "fail" {
					return failure.Transient(errors.New("down"))
				}
				return nil
			},
			Policy:         consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic}}},
			RetryTopics:    consumer.RetryTopics{Tiers: []time.Duration{time.Hour}},
			CommitInterval: 100 * time.Millisecond,
			Logger:         slog.New(logs),
			ClientOpts:     []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(hooks)},
		})
		if err != nil {
			t.Fatal(err)
		}
		rctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		go func() { done <- cons.Run(rctx) }()
		defer func() {
			stop()
			<-done
		}()
		wait(cons)
	}
	// The first run forwards "fail" to the 1h tier and parks "later", and
	// commits both.
	first := &newClients{}
	run(first, slog.DiscardHandler, func(cons *consumer.Consumer[string, string]) {
		kafkatest.WaitFor(t, 20*time.Second, "\"fail\" forwarded and \"later\" parked", func() bool {
			s := cons.Stats()
			return s.Forwarded == 1 && s.Parked == 1
		})
		kafkatest.WaitFor(t, 20*time.Second, "both committed", func() bool { return committed(t, c, group, topic)[0] == 2 })
	})
	// The second run finds them in the tier when assigned: it rebuilds the
	// per-key order from the tier, with its reader client.
	second := &newClients{}
	rebuilt := &logSignal{msg: "per-key order rebuilt from the retry tiers", seen: make(chan struct{})}
	run(second, rebuilt, func(cons *consumer.Consumer[string, string]) {
		kafkatest.WaitFor(t, 20*time.Second, "ready", func() bool { return cons.Stats().Ready })
		select {
		case <-rebuilt.seen:
		case <-time.After(20 * time.Second):
			t.Fatal("timed out after 20s waiting for the per-key order rebuilt from the tier")
		}
	})
	if n := first.n.Load(); n != 1 {
		t.Errorf("first run: ClientOpts' hooks installed in %d clients, want 1", n)
	}
	if n := second.n.Load(); n != 1 {
		t.Errorf("second run: ClientOpts' hooks installed in %d clients, want 1 (a kprom.Metrics panics: duplicate metrics collector registration)", n)
	}
}
