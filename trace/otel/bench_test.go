package otel_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"

	"github.com/antidote-kafka/antidote/consumer"
	antiotel "github.com/antidote-kafka/antidote/trace/otel"
)

// BenchmarkProcessedRecord is what the tracer adds to a record processed at
// its first try: its span, continued from the record's traceparent, and its
// try span, recorded by the SDK (sampled, no exporter).
func BenchmarkProcessedRecord(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	tr := antiotel.NewTracer(antiotel.TracerProvider(tp))
	rec := &kgo.Record{Topic: "orders", Partition: 3, Offset: 8412, Key: []byte("order-8412"), Value: []byte(`{"id":8412}`),
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s := tr.Start(ctx, consumer.TraceRecord{Record: rec, Fetched: rec, Group: "billing"})
		tctx := s.Try(ctx, 1)
		s.EndTry(tctx, "process", nil)
		s.End(consumer.TraceEnd{Outcome: consumer.OutcomeProcessed})
	}
}
