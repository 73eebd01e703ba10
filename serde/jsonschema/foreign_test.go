package jsonschema_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
)

// TestIntegrationForeignJSONSerializer: Python's confluent-kafka with its
// JSONSerializer writes orders (registering the schema); poison pills go in
// between: JSON that breaks the schema, text that is not JSON, a string
// with no magic byte. The consumer, with its default policy, processes
// every order in order and dead-letters each pill once with its error type.
func TestIntegrationForeignJSONSerializer(t *testing.T) {
	py := srtest.Python(t)
	sreg := srtest.New(t)
	cluster := kafkatest.New(t)
	const parts, perPart = 2, 10
	topic := cluster.Topic(t, "json-foreign", parts)
	prod := sreg.NewProducer(t, py, cluster.Brokers(), "")
	var id int
	for p := range int32(parts) {
		recs := make([]any, perPart)
		for i := range recs {
			recs[i] = map[string]any{"id": fmt.Sprintf("o-%d-%d", p, i), "amount": i,
				"items": []any{map[string]any{"sku": "s", "qty": i + 1}}}
		}
		ids := prod.Produce(t, srtest.Batch{Format: "json", Schema: orderSchema, Topic: topic, Partition: p, Records: recs})
		id = ids[0]
	}
	kcl := cluster.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	want := map[string]string{
		"invalid":  "*jsonschema.ValidationError",
		"not-json": "*jsonschema.DecodeError",
		"no-magic": "*jsonschema.WireError",
	}
	poison := map[string][]byte{
		"invalid":  frame(id, `{"id":"x","amount":-1}`),
		"not-json": frame(id, `{"id":`),
		"no-magic": []byte(`{"id":"x","amount":1}`),
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for name, v := range poison {
		if err := kcl.ProduceSync(ctx, &kgo.Record{Topic: topic, Partition: 0, Key: []byte(name), Value: v}).FirstErr(); err != nil {
			t.Fatal(err)
		}
	}

	reg := newRegistry(t, sreg)
	d := must(jsonschema.NewDeserializer[Order](reg))
	var mu sync.Mutex
	got := make(map[int32][]Order)
	c, err := consumer.New(consumer.Config[[]byte, Order]{
		Brokers: cluster.Brokers(),
		Topics:  []string{topic},
		Group:   kafkatest.UniqueName("json-foreign"),
		Value:   d,
		Handler: func(_ context.Context, r *consumer.Record[[]byte, Order]) error {
			mu.Lock()
			got[r.Raw.Partition] = append(got[r.Raw.Partition], r.Value)
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
	for st := c.Stats(); st.Processed != parts*perPart || st.DeadLettered != uint64(len(poison)); st = c.Stats() {
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
	for p := range int32(parts) {
		for i, o := range got[p] {
			if o.ID != fmt.Sprintf("o-%d-%d", p, i) || o.Amount != int64(i) || len(o.Items) != 1 || o.Items[0].Qty != i+1 {
				t.Errorf("partition %d record %d: %+v", p, i, o)
			}
		}
	}
	mu.Unlock()

	dlq := cluster.Client(t, kgo.ConsumeTopics(topic+".dlq"), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	for n := 0; n < len(poison); {
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
			if w := want[string(r.Key)]; f.Class != "permanent" || f.ErrorStage != "jsonschema" || f.ErrorType != w {
				t.Errorf("%s: class %q stage %q type %q (want %q): %s", r.Key, f.Class, f.ErrorStage, f.ErrorType, w, f.Message)
			}
		})
	}
}
