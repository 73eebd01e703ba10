package consumer_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// TestIntegrationTopicPattern: a consumer of a TopicPattern reads the
// matching topics there at its start and one created while it runs, never a
// topic that does not match, nor its own dead-letter topic, which the
// pattern matches by name: the pill dead-lettered once is not read back.
func TestIntegrationTopicPattern(t *testing.T) {
	c := kafkatest.New(t)
	base := kafkatest.UniqueName("pat")
	a := oneTopic(t, c, base+"-a", "a1", "a2", "\xff\xfe", "a3")
	other := oneTopic(t, c, "notpat", "o1")
	// The letters of a source topic deleted since: matched by name, and
	// still the consumer's own.
	orphan := base + "-gone.dlq"
	adm := kadm.NewClient(c.Client(t))
	if _, err := adm.CreateTopic(context.Background(), 1, 1, nil, orphan); err != nil {
		t.Fatal(err)
	}
	kafkatest.Produce(t, manualProducer(t, c), &kgo.Record{Topic: orphan, Value: []byte("letter")})
	var mu sync.Mutex
	seen := map[string]int{}
	cons := stringConsumer(t, c, a, func(_ context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		seen[r.Raw.Topic+"/"+r.Value]++
		mu.Unlock()
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Topics = nil
		cfg.TopicPattern = strings.ReplaceAll(base, ".", `\.`) + "-.*"
		cfg.TopicRefresh = 200 * time.Millisecond
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 60*time.Second, "the first topic read", func() bool {
		s := cons.Stats()
		return s.Processed >= 3 && s.DeadLettered >= 1
	})
	// Created after the dead-letter topic: the listing that finds it saw
	// that topic too.
	b := oneTopic(t, c, base+"-b", "b1", "b2")
	kafkatest.WaitFor(t, 60*time.Second, "the topic created while running read", func() bool { return cons.Stats().Processed >= 5 })
	// Two more listings.
	time.Sleep(500 * time.Millisecond)
	s := cons.Stats()
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, want := range []string{a + "/a1", a + "/a2", a + "/a3", b + "/b1", b + "/b2"} {
		if seen[want] != 1 {
			t.Errorf("%s handled %d times, want once", want, seen[want])
		}
	}
	if len(seen) != 5 || s.Processed != 5 || s.DeadLettered != 1 {
		t.Errorf("handled %v; processed %d, dead-lettered %d: want the 5 records of %s and %s, and one letter (%s not read, nor %s.dlq, nor %s)",
			seen, s.Processed, s.DeadLettered, a, b, other, a, orphan)
	}
}

// TestTopicPatternConfig: a pattern is checked, and does not combine with
// Topics, RetryTopics or share groups.
func TestTopicPatternConfig(t *testing.T) {
	c := kafkatest.New(t)
	for _, tc := range []struct {
		name string
		mod  func(*consumer.Config[string, string])
		want string
	}{
		{"both", func(cfg *consumer.Config[string, string]) { cfg.TopicPattern = "x.*" }, "TopicPattern: set with Topics"},
		{"regexp", func(cfg *consumer.Config[string, string]) { cfg.Topics, cfg.TopicPattern = nil, "orders[" }, "TopicPattern: error parsing regexp"},
		{"refresh", func(cfg *consumer.Config[string, string]) {
			cfg.Topics, cfg.TopicPattern, cfg.TopicRefresh = nil, "x.*", time.Millisecond
		}, "TopicRefresh: at least 100ms"},
		{"none", func(cfg *consumer.Config[string, string]) { cfg.Topics = nil }, "Topics: required: no topics (or a TopicPattern)"},
	} {
		cfg := consumer.Config[string, string]{Brokers: c.Brokers(), Topics: []string{"t"}, Group: "g",
			Value: serde.String(), Handler: func(context.Context, *consumer.Record[string, string]) error { return nil }}
		tc.mod(&cfg)
		if _, err := consumer.New(cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want %q", tc.name, err, tc.want)
		}
	}
}
