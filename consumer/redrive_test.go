package consumer_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationRedriveThenProcess: records rejected while a bug was live
// are dead-lettered; after the fix, a redrive puts them back on the source
// topic, byte for byte with provenance headers, and the consumer processes
// them.
func TestIntegrationRedriveThenProcess(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "redrive", 2)
	produced := produceOrders(t, c, topic, 2, 20)
	var fixed atomic.Bool
	l := newLedger()
	redriven := make(chan *kgo.Record, 100)
	cons := newConsumer(t, c, topic, kafkatest.UniqueName("redrive"), func(_ context.Context, r *consumer.Record[string, order]) error {
		if r.Value.ID%5 == 0 && !fixed.Load() {
			return failure.Permanent(errors.New("bug: cannot bill"))
		}
		for _, h := range r.Raw.Headers {
			if h.Key == deadletter.HeaderRedriveCount {
				redriven <- r.Raw
			}
		}
		l.done(r.Raw)
		return nil
	}, nil)
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, time.Minute, "first pass settled", func() bool {
		s := cons.Stats()
		return s.Processed == 32 && s.DeadLettered == 8
	})

	fixed.Store(true)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := deadletter.Redrive(ctx, c.Client(t, deadletter.ScanOpts()...), deadletter.RedriveConfig{Topic: topic + ".dlq"})
	if err != nil || res.Redriven != 8 {
		t.Fatalf("Redrive = %+v, %v; want 8 redriven", res, err)
	}
	kafkatest.WaitFor(t, time.Minute, "redriven records processed", func() bool { return len(redriven) == 8 })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	byValue := map[string]*kgo.Record{}
	for _, r := range produced {
		byValue[string(r.Value)] = r
	}
	for range 8 {
		r := <-redriven
		src := byValue[string(r.Value)]
		if src == nil || string(src.Key) != string(r.Key) || orderID(src)%5 != 0 {
			t.Fatalf("redriven record %s/%d@%d is not a rejected original", r.Topic, r.Partition, r.Offset)
		}
	}
}
