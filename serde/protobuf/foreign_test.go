package protobuf_test

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/protobuf/internal/testpb"
)

// TestIntegrationForeignProtobufSerializer: Python's confluent-kafka with
// its ProtobufSerializer writes acme.Order and acme.Refund records to one
// topic (one schema with a reference to acme/money.proto, message indexes
// [0] and [1]); a corrupt record goes in between. A consumer of
// *testpb.Order, with its default policy, decodes every order, in order,
// and dead-letters each refund (a type it has no Go type for) and the
// corrupt record, with their error types.
func TestIntegrationForeignProtobufSerializer(t *testing.T) {
	py := srtest.Python(t)
	sreg := srtest.New(t)
	cluster := kafkatest.New(t)
	topic := cluster.Topic(t, "protobuf-foreign", 1)
	prod := sreg.NewProducer(t, py, cluster.Brokers(), filepath.Join(srtest.RepoRoot(t), "serde", "protobuf", "internal", "testpb", "python"))
	const orders = 10
	recs := make([]any, orders)
	for i := range recs {
		recs[i] = map[string]any{"id": fmt.Sprintf("o-%d", i), "total": map[string]any{"currency": "EUR", "units": i},
			"items": []any{map[string]any{"sku": "s", "qty": i + 1}}, "at": "2026-12-01T12:00:00Z"}
	}
	ids := prod.Produce(t, srtest.Batch{Format: "protobuf", Proto: "acme.order_pb2:Order", Topic: topic, Records: recs[:5]})
	prod.Produce(t, srtest.Batch{Format: "protobuf", Proto: "acme.order_pb2:Refund", Topic: topic,
		Records: []any{map[string]any{"orderId": "o-1", "amount": map[string]any{"currency": "EUR", "units": 1}}}})
	kcl := cluster.Client(t, kgo.ProducerLinger(0))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	corrupt := append(protobuf.AppendWire(nil, ids[0]), 0x0a, 0xff, 0x01, 'x')
	if err := kcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Key: []byte("corrupt"), Value: corrupt}).FirstErr(); err != nil {
		t.Fatal(err)
	}
	prod.Produce(t, srtest.Batch{Format: "protobuf", Proto: "acme.order_pb2:Order", Topic: topic, Records: recs[5:]})

	d := must(protobuf.NewDeserializer[*testpb.Order](newRegistry(t, sreg)))
	var mu sync.Mutex
	var got []*testpb.Order
	c, err := consumer.New(consumer.Config[[]byte, *testpb.Order]{
		Brokers: cluster.Brokers(),
		Topics:  []string{topic},
		Group:   kafkatest.UniqueName("protobuf-foreign"),
		Value:   d,
		Handler: func(_ context.Context, r *consumer.Record[[]byte, *testpb.Order]) error {
			mu.Lock()
			got = append(got, r.Value)
			mu.Unlock()
			return nil
		},
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Logger:     quietLogger(),
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for st := c.Stats(); st.Processed != orders || st.DeadLettered != 2; st = c.Stats() {
		if st.DeadLettered > 2 {
			t.Fatalf("dead-lettered %d records, want 2", st.DeadLettered)
		}
		if time.Now().After(deadline) {
			t.Fatalf("processed %d, dead-lettered %d", st.Processed, st.DeadLettered)
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	if err := <-done; err != nil {
		t.Errorf("Run: %v", err)
	}
	mu.Lock()
	for i, o := range got {
		if o.GetId() != fmt.Sprintf("o-%d", i) || o.GetTotal().GetUnits() != int64(i) || len(o.GetItems()) != 1 ||
			o.GetItems()[0].GetQty() != int32(i+1) || o.GetAt().AsTime() != time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC) {
			t.Errorf("order %d: %v", i, o)
		}
	}
	mu.Unlock()

	want := map[int64]string{5: "*protobuf.UnknownTypeError", 6: "*protobuf.DecodeError"}
	dlq := cluster.Client(t, kgo.ConsumeTopics(topic+".dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < len(want); {
		fs := dlq.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("read %d dead letters: %v", n, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			f, err := deadletter.ParseHeaders(deadletter.RecordOf(r).Headers)
			if err != nil {
				t.Errorf("dead letter: %v", err)
				return
			}
			if w := want[f.Offset]; f.Class != "permanent" || f.ErrorStage != "protobuf" || f.ErrorType != w {
				t.Errorf("offset %d: class %q stage %q type %q (want %q): %s", f.Offset, f.Class, f.ErrorStage, f.ErrorType, w, f.Message)
			}
		})
	}
}
