package otel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
	antiotel "github.com/antidote-kafka/antidote/trace/otel"
)

// TestIntegrationTraceInMemory runs the scenario on the cluster of kafkatest (kfake,
// or the real broker of make test) with the SDK's in-memory exporter.
func TestIntegrationTraceInMemory(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	sc := runScenario(t, kafkatest.New(t), antiotel.NewTracer(antiotel.TracerProvider(tp)), nil)
	checkScenario(t, sc, fromStubs(exp.GetSpans()), false)
}

// TestIntegrationTraceModes runs the scenario in the modes that handle
// records elsewhere: keyed lanes, and the exactly-once mode, where letters
// are written in transactions.
func TestIntegrationTraceModes(t *testing.T) {
	for name, mode := range map[string]func(*consumer.Config[string, string]){
		"lanes": func(cfg *consumer.Config[string, string]) { cfg.Concurrency = consumer.Concurrency{Max: 4} },
		"exactly-once": func(cfg *consumer.Config[string, string]) {
			cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("traced-txn")}
		},
	} {
		t.Run(name, func(t *testing.T) {
			exp := tracetest.NewInMemoryExporter()
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
			defer func() { _ = tp.Shutdown(context.Background()) }()
			sc := runScenario(t, kafkatest.New(t), antiotel.NewTracer(antiotel.TracerProvider(tp)), mode)
			checkScenario(t, sc, fromStubs(exp.GetSpans()), name == "exactly-once")
		})
	}
}

// fromStubs converts the in-memory exporter's spans.
func fromStubs(stubs tracetest.SpanStubs) []gotSpan {
	var out []gotSpan
	for _, s := range stubs {
		g := gotSpan{Name: s.Name, Trace: s.SpanContext.TraceID().String(), ID: s.SpanContext.SpanID().String(),
			Attrs: map[string]string{}, Error: s.Status.Code == codes.Error}
		if s.Parent.IsValid() {
			g.Parent = s.Parent.SpanID().String()
		}
		for _, a := range s.Attributes {
			g.Attrs[string(a.Key)] = a.Value.String()
		}
		for _, l := range s.Links {
			g.Links = append(g.Links, l.SpanContext.SpanID().String())
			g.LinkedTo = append(g.LinkedTo, l.SpanContext.TraceID().String())
		}
		out = append(out, g)
	}
	return out
}

// TestIntegrationTraceBatch: a BatchHandler's call is a span of its own, linked to the
// span of each record of the batch, and its context reaches the handler; a
// record the batch fails is dead-lettered under its own span.
func TestIntegrationTraceBatch(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	c := kafkatest.New(t)
	topic := c.Topic(t, "batch", 1)
	prod := c.Client(t)
	for i := range 4 {
		kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "doc-%d", i)})
	}
	var inHandler []string
	done := make(chan struct{}, 8)
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("batch"),
		Value: serde.String(),
		BatchHandler: func(ctx context.Context, batch []*consumer.Record[string, string]) error {
			inHandler = append(inHandler, traceOf(ctx))
			errs := map[int]error{}
			for i, r := range batch {
				if r.Value == "doc-2" {
					errs[i] = failure.Permanent(errors.New("rejected"))
				}
				done <- struct{}{}
			}
			if len(errs) > 0 {
				return &consumer.BatchError{Errs: errs}
			}
			return nil
		},
		Batching:   consumer.Batching{Size: 4, Linger: time.Second},
		Tracer:     antiotel.NewTracer(antiotel.TracerProvider(tp)),
		Logger:     kafkatest.Logger(t),
		ClientOpts: append(c.ClientOpts(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(ctx) }()
	kafkatest.WaitFor(t, time.Minute, "the batch settled", func() bool {
		s := cons.Stats()
		return s.Processed == 3 && s.DeadLettered == 1
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	spans := fromStubs(exp.GetSpans())
	var batches []gotSpan
	records := map[string]gotSpan{}
	for _, s := range spans {
		switch {
		case s.Name == "process "+topic && s.Attrs["messaging.batch.message_count"] != "":
			batches = append(batches, s)
		case s.Name == "process "+topic:
			records[s.ID] = s
		}
	}
	if len(records) != 4 {
		t.Fatalf("record spans: %d, want 4: %v", len(records), spans)
	}
	if len(batches) == 0 {
		t.Fatalf("no batch span: %v", spans)
	}
	b := batches[0]
	if b.Parent != "" || b.Attrs["messaging.batch.message_count"] != "4" || len(b.Links) != 4 || !b.Error {
		t.Errorf("the batch span is %v with links %v, want a root of 4 records that failed", b, b.Links)
	}
	for _, id := range b.Links {
		if _, ok := records[id]; !ok {
			t.Errorf("the batch links to %s, not a record's span", id)
		}
	}
	if len(inHandler) == 0 || inHandler[0] != b.Trace {
		t.Errorf("the handler ran in trace %v, want the batch's %s", inHandler, b.Trace)
	}
	outcomes := map[string]int{}
	for _, r := range records {
		outcomes[r.Attrs["antidote.outcome"]]++
	}
	if outcomes["processed"] != 3 || outcomes["dead-lettered"] != 1 {
		t.Errorf("record outcomes %v, want 3 processed and 1 dead-lettered", outcomes)
	}
}

// TestIntegrationTraceShare: a share group's record is traced like any other: it
// continues the trace of its headers, its tries are children of its span,
// and its dead letter names the span that wrote it.
func TestIntegrationTraceShare(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireShareGroups(t)
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	defer func() { _ = tp.Shutdown(context.Background()) }()
	topic := c.Topic(t, "share", 1)
	const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	kafkatest.Produce(t, c.Client(t), &kgo.Record{Topic: topic, Value: []byte("pill"),
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte(parent)}}})
	cons, err := consumer.New(consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, ShareGroup: kafkatest.UniqueName("share"),
		Share: consumer.Share{FromEarliest: true},
		Value: serde.String(),
		Handler: func(context.Context, *consumer.Record[string, string]) error {
			return failure.Permanent(errors.New("malformed"))
		},
		Tracer:     antiotel.NewTracer(antiotel.TracerProvider(tp)),
		Logger:     kafkatest.Logger(t),
		ClientOpts: c.ClientOpts(),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- cons.Run(ctx) }()
	kafkatest.WaitFor(t, time.Minute, "the pill dead-lettered", func() bool { return cons.Stats().DeadLettered == 1 })
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, s := range fromStubs(exp.GetSpans()) {
		if s.Trace != "0af7651916cd43dd8448eb211c80319c" {
			t.Errorf("span %v is not in the record's trace", s)
		}
		names = append(names, s.Name+"="+s.Attrs["antidote.outcome"])
	}
	want := []string{"try " + topic + "=", "send " + topic + ".dlq=", "process " + topic + "=dead-lettered"}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Errorf("spans %v, want %v", names, want)
	}
}

// traceOf is the trace id of the span of ctx, "" if none.
func traceOf(ctx context.Context) string {
	sc := oteltrace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return sc.TraceID().String()
}
