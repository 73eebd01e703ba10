package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

type item struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"` // "", "bad", "flaky", "panic"
}

// batchRig runs a BatchHandler consumer over records of the given kinds
// (garbage bytes for "garbage") and returns what it saw.
type batchRig struct {
	mu        sync.Mutex
	calls     [][]int     // ids of each batch call, in call order
	processed map[int]int // id -> times in a batch call that succeeded for it
	flakyLeft map[int]int
	failWhole int // whole-batch transient failures still to return
}

func runBatchRig(t *testing.T, kinds []string, size int, failWhole int) (*batchRig, consumer.Stats, []*kgo.Record) {
	t.Helper()
	c := kafkatest.New(t)
	topic := c.Topic(t, "batch", 1)
	group := kafkatest.UniqueName("batch")
	var recs []*kgo.Record
	for i, k := range kinds {
		v, _ := json.Marshal(item{ID: i, Kind: k})
		if k == "garbage" {
			v = []byte{0xde, 0xad}
		}
		recs = append(recs, &kgo.Record{Topic: topic, Value: v})
	}
	kafkatest.Produce(t, c.Client(t, kgo.ProducerLinger(0)), recs...)
	rig := &batchRig{processed: map[int]int{}, flakyLeft: map[int]int{}, failWhole: failWhole}
	for i, k := range kinds {
		if k == "flaky" {
			rig.flakyLeft[i] = 2
		}
	}
	quick := backoff.MaxAttempts(backoff.Fixed(10*time.Millisecond), 4)
	cons, err := consumer.New(consumer.Config[string, item]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group, Logger: kafkatest.Logger(t),
		Value: serde.JSON[item](), CommitInterval: 200 * time.Millisecond,
		Batching: consumer.Batching{Size: size, Linger: 20 * time.Millisecond},
		Policy:   consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: quick}}},
		BatchHandler: func(_ context.Context, batch []*consumer.Record[string, item]) error {
			rig.mu.Lock()
			defer rig.mu.Unlock()
			ids := make([]int, len(batch))
			for i, r := range batch {
				ids[i] = r.Value.ID
			}
			rig.calls = append(rig.calls, ids)
			if rig.failWhole > 0 && len(batch) > 1 {
				rig.failWhole--
				return failure.Transient(errors.New("the bulk endpoint is overloaded"))
			}
			errs := map[int]error{}
			for i, r := range batch {
				switch r.Value.Kind {
				case "panic":
					panic("a record the sink cannot take")
				case "bad":
					errs[i] = failure.Permanent(fmt.Errorf("document %d rejected", r.Value.ID))
				case "flaky":
					if rig.flakyLeft[r.Value.ID] > 0 {
						rig.flakyLeft[r.Value.ID]--
						errs[i] = failure.Transient(fmt.Errorf("document %d: version conflict", r.Value.ID))
					}
				}
			}
			for i, r := range batch {
				if _, failed := errs[i]; !failed {
					rig.processed[r.Value.ID]++
				}
			}
			if len(errs) > 0 {
				return &consumer.BatchError{Errs: errs}
			}
			return nil
		},
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 60*time.Second, "every record settled", func() bool {
		s := cons.Stats()
		return int(s.Processed+s.DeadLettered) == len(kinds)
	})
	kafkatest.WaitFor(t, 30*time.Second, "commits at the end", func() bool { return committed(t, c, group, topic)[0] == int64(len(kinds)) })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	var dl []*kgo.Record
	if s := cons.Stats(); s.DeadLettered > 0 {
		dl = readAll(t, c, topic+".dlq")
	}
	return rig, cons.Stats(), dl
}

// TestIntegrationBatchPerRecordFailures: one record of a batch rejected and
// one that fails transiently are settled alone; the other records of their
// batch are processed once, not retried; a decode failure never reaches a
// batch.
func TestIntegrationBatchPerRecordFailures(t *testing.T) {
	kinds := make([]string, 120)
	kinds[17], kinds[64], kinds[90] = "bad", "flaky", "garbage"
	rig, s, dl := runBatchRig(t, kinds, 50, 0)
	for i, k := range kinds {
		want := 1
		if k == "bad" || k == "garbage" {
			want = 0
		}
		if got := rig.processed[i]; got != want {
			t.Errorf("record %d (%q) processed %d times, want %d", i, k, got, want)
		}
	}
	for _, call := range rig.calls {
		for _, id := range call {
			if id == 90 {
				t.Errorf("the record that cannot be decoded reached a batch: %v", call)
			}
		}
		if len(call) > 50 {
			t.Errorf("a batch of %d records, more than Size", len(call))
		}
	}
	if s.DeadLettered != 2 || s.Processed != 118 {
		t.Errorf("processed %d dead-lettered %d; want 118 and 2", s.Processed, s.DeadLettered)
	}
	stages := map[string]int64{}
	for _, r := range dl {
		l, err := deadletter.ParseRecord(r)
		if err != nil {
			t.Fatal(err)
		}
		stages[l.Stage] = l.OriginalOffset
	}
	if stages["process"] != 17 || stages["deserialize-value"] != 90 {
		t.Errorf("dead letters by stage %v; want process at offset 17, deserialize-value at 90", stages)
	}
}

// TestIntegrationBatchWholeTransient: a batch that fails as a whole with a
// transient error is retried as a batch, then processed once.
func TestIntegrationBatchWholeTransient(t *testing.T) {
	rig, s, _ := runBatchRig(t, make([]string, 30), 30, 2)
	if len(rig.calls) < 3 {
		t.Fatalf("%d batch calls, want the failing batch 3 times: %v", len(rig.calls), rig.calls)
	}
	for i := 0; i < 3; i++ {
		if fmt.Sprint(rig.calls[i]) != fmt.Sprint(rig.calls[0]) {
			t.Errorf("retry %d was batch %v, not the same batch %v", i, rig.calls[i], rig.calls[0])
		}
	}
	for i := 0; i < 30; i++ {
		if rig.processed[i] != 1 {
			t.Errorf("record %d processed %d times, want 1", i, rig.processed[i])
		}
	}
	if s.Retried != 2 || s.Processed != 30 {
		t.Errorf("retried %d processed %d; want 2 and 30", s.Retried, s.Processed)
	}
}

// TestIntegrationBatchPanic: a panic in the batch handler is a permanent
// failure of the batch: its records are tried one by one, the poison pill is
// dead-lettered alone as a panic, and the others are processed.
func TestIntegrationBatchPanic(t *testing.T) {
	kinds := make([]string, 40)
	kinds[25] = "panic"
	rig, s, dl := runBatchRig(t, kinds, 40, 0)
	for i := range kinds {
		want := 1
		if i == 25 {
			want = 0
		}
		if rig.processed[i] != want {
			t.Errorf("record %d processed %d times, want %d", i, rig.processed[i], want)
		}
	}
	if s.DeadLettered != 1 || len(dl) != 1 {
		t.Fatalf("dead-lettered %d (%d letters), want 1", s.DeadLettered, len(dl))
	}
	l, err := deadletter.ParseRecord(dl[0])
	if err != nil {
		t.Fatal(err)
	}
	if l.OriginalOffset != 25 || l.ErrorType != "*serde.PanicError" {
		t.Errorf("dead letter of offset %d, error type %s; want 25 and *serde.PanicError", l.OriginalOffset, l.ErrorType)
	}
}
