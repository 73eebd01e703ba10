package consumer_test

import (
	"context"
	"errors"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// floodTopic writes n records to a 2-partition topic: partition 0 gets good
// records then a run of poison pills (a bad deploy), partition 1 only good
// records.
func floodTopic(t *testing.T, c *kafkatest.Cluster, good, bad int) string {
	t.Helper()
	topic := c.Topic(t, "flood", 2)
	var recs []*kgo.Record
	for i := 0; i < good; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("good-" + strconv.Itoa(i))})
	}
	for i := 0; i < bad; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("\xffpoison")})
	}
	for i := 0; i < 50; i++ {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Value: []byte("other-" + strconv.Itoa(i))})
	}
	kafkatest.Produce(t, manualProducer(t, c), recs...)
	return topic
}

type floodHooks struct {
	consumer.NopHooks
	tripped, resumed atomic.Int32
}

func (h *floodHooks) FloodGuardTripped(consumer.Flood) { h.tripped.Add(1) }
func (h *floodHooks) FloodGuardResumed(consumer.Flood) { h.resumed.Add(1) }

// TestIntegrationFloodGuard: a run of poison pills that would dead-letter
// more than half of a partition's window trips the guard: the consumer stops
// dead-lettering, shows the flood in Stats, fires the hook, and waits; after
// ResumeFlood the rest is dead-lettered and nothing is lost.
func TestIntegrationFloodGuard(t *testing.T) {
	c := kafkatest.New(t)
	topic := floodTopic(t, c, 20, 60)
	hooks := &floodHooks{}
	var processed atomic.Int32
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error {
		processed.Add(1)
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.FloodGuard = consumer.FloodGuard{Window: 50, Share: 0.5, Min: 10}
		cfg.Hooks = hooks
	})
	if err := cons.ResumeFlood(); !errors.Is(err, consumer.ErrNotFlooded) {
		t.Fatalf("ResumeFlood before a flood = %v", err)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "the flood guard tripped", func() bool { return cons.Stats().Flood != nil })
	kafkatest.WaitFor(t, 30*time.Second, "the trip settled: its hook called, partition 0 stuck on the guard", func() bool {
		s := cons.Stats()
		return hooks.tripped.Load() >= 1 && len(s.Stuck) == 1 && s.Stuck[0].Reason == consumer.StuckFlood
	})
	s := cons.Stats()
	// Of the 20 good and 60 poison records of partition 0, the guard
	// trips when a dead letter would make more than 25 of the last 45.
	if f := s.Flood; f.Topic != topic || f.Partition != 0 || f.DeadLetters <= 10 || f.Window != 50 {
		t.Fatalf("Flood = %+v; want partition 0 with its dead letters counted", f)
	}
	if s.Ready {
		t.Fatal("Stats.Ready while the flood guard holds the consumer")
	}
	if err := cons.DeadLetter(topic, 0, s.Stuck[0].Offset, "bob"); !errors.Is(err, consumer.ErrNotRetrying) {
		t.Fatalf("DeadLetter of a record the flood guard holds = %v; want ErrNotRetrying", err)
	}
	// The figures the operator reads: the dead letters of the records the
	// window held, a share of them over the guard's.
	if f := s.Flood; f.Records < f.DeadLetters || f.Records > f.Window || float64(f.DeadLetters) <= f.Share*float64(f.Records) ||
		f.Share <= 0 || f.Min <= 0 || f.DeadLetters < f.Min || f.Percent() <= 100*f.Share {
		t.Fatalf("Flood = %+v (%.1f%%); want the records the window held and the guard's share and minimum", f, f.Percent())
	}
	if s.DeadLettered >= 60 || s.FloodTrips != 1 || hooks.tripped.Load() != 1 {
		t.Fatalf("stats %+v, hook %d; want the dead-lettering stopped by one trip", s, hooks.tripped.Load())
	}
	if len(s.Stuck) != 1 || s.Stuck[0].Reason != consumer.StuckFlood || s.Stuck[0].Offset != s.Flood.Offset {
		t.Fatalf("Stuck = %+v; want partition 0 waiting on the flood guard", s.Stuck)
	}
	held := s.DeadLettered
	// A negative check, not synchronisation: for three commit intervals
	// with the guard tripped, no dead letter is written.
	time.Sleep(300 * time.Millisecond)
	if cons.Stats().DeadLettered != held {
		t.Fatal("dead letters kept coming while the guard was tripped")
	}
	if err := cons.ResumeFlood(); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "every record settled after the resume", func() bool {
		s := cons.Stats()
		return s.DeadLettered == 60 && s.Processed == 70
	})
	if !cons.Stats().Ready {
		t.Fatal("Stats.Ready false after the resume")
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := cons.Stats(); s.Flood != nil || hooks.resumed.Load() != 1 || len(readAll(t, c, topic+".dlq")) != 60 {
		t.Fatalf("after the resume: flood %+v, resumed hook %d; want cleared, 60 letters", s.Flood, hooks.resumed.Load())
	}
}

// TestIntegrationFloodGuardHalt: with Halt, the guard stops the consumer:
// Run returns a HaltError wrapping ErrFlood, and the offset stays before the
// record that tripped it.
func TestIntegrationFloodGuardHalt(t *testing.T) {
	c := kafkatest.New(t)
	topic := floodTopic(t, c, 0, 30)
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil },
		func(cfg *consumer.Config[string, string]) {
			cfg.FloodGuard = consumer.FloodGuard{Window: 20, Min: 5, Halt: true}
		})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := cons.Run(ctx)
	var h *consumer.HaltError
	if !errors.As(err, &h) || !errors.Is(err, consumer.ErrFlood) || h.Partition != 0 {
		t.Fatalf("Run = %v; want a HaltError wrapping ErrFlood on partition 0", err)
	}
	if s := cons.Stats(); s.DeadLettered >= 30 || s.FloodTrips != 1 {
		t.Fatalf("stats %+v; want the flood halted before it emptied the partition", s)
	}
	group := cons.Client().OptValue(kgo.ConsumerGroup).(string)
	if got, ok := committed(t, c, group, topic)[0]; ok && got > h.Offset {
		t.Fatalf("committed %d past the record %d that tripped the guard", got, h.Offset)
	}
}
