package otel_test

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/propagation"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/serde"
	antiotel "github.com/antidote-kafka/antidote/trace/otel"
)

// A poison pill's trace: the producer's span, then the consumer's handling
// of the record, its try (the decode failed) and the write of its dead
// letter, all in the producer's trace.
func Example() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.dlq"))
	defer cluster.Close()

	// In production, export with a batcher to a collector:
	// sdktrace.WithBatcher(otlptracehttp.New(ctx)).
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	defer tp.Shutdown(context.Background())

	// A traced producer writes its span's context into the record.
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx, send := tp.Tracer("orders-api").Start(context.Background(), "send orders", trace.WithSpanKind(trace.SpanKindProducer))
	rec := &kgo.Record{Topic: "orders", Value: []byte("{not json")}
	propagation.TraceContext{}.Inject(ctx, antiotel.Carrier(rec))
	producer.ProduceSync(ctx, rec)
	send.End()

	type Order struct {
		ID int `json:"id"`
	}
	c, err := consumer.New(consumer.Config[string, Order]{
		Brokers: cluster.ListenAddrs(), Topics: []string{"orders"}, Group: "billing",
		Value:      serde.JSON[Order](),
		Handler:    func(context.Context, *consumer.Record[string, Order]) error { return nil },
		Tracer:     antiotel.NewTracer(antiotel.TracerProvider(tp)),
		Logger:     slog.New(slog.DiscardHandler),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	for c.Stats().DeadLettered < 1 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done

	var lines []string
	for _, s := range spans.GetSpans() {
		line := fmt.Sprintf("%-14s %-8s same trace: %v", s.Name, s.SpanKind, s.SpanContext.TraceID() == send.SpanContext().TraceID())
		for _, a := range s.Attributes {
			if a.Key == antiotel.AttrOutcome || a.Key == antiotel.AttrStage {
				line += fmt.Sprintf(" %s=%s", a.Key, a.Value.AsString())
			}
		}
		lines = append(lines, line)
	}
	slices.Sort(lines)
	for _, l := range lines {
		fmt.Println(l)
	}
	// Output:
	// process orders consumer same trace: true antidote.outcome=dead-lettered antidote.stage=deserialize-value
	// send orders    producer same trace: true
	// send orders.dlq producer same trace: true
	// try orders     internal same trace: true antidote.stage=deserialize-value
}
