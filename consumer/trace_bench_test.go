package consumer

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/serde"
)

// hotPartition is a partition of a consumer that is never run, for the
// record path alone: processNew of a record that decodes and is handled.
// Its ledger marks nothing (there is no group).
func hotPartition(tb testing.TB, tr Tracer) (*partition[string, string], func() *kgo.Record) {
	tb.Helper()
	c, err := New(Config[string, string]{
		Brokers: []string{"127.0.0.1:1"}, Topics: []string{"orders"}, Group: "billing",
		Value:   serde.String(),
		Handler: func(context.Context, *Record[string, string]) error { return nil },
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
		Tracer:  tr,
	})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { c.cl.Close() })
	p := newPartition(c, "orders", 0)
	p.ledger.mark = func(*kgo.Record) {}
	offset := int64(0)
	rec := kgo.Record{Topic: "orders", Partition: 0, Value: []byte("order 1"), Timestamp: time.Unix(1, 0),
		Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")}}}
	next := func() *kgo.Record {
		r := rec
		r.Offset = offset
		offset++
		p.mu.Lock()
		p.flow.hold([]*kgo.Record{&r}, 0)
		p.mu.Unlock()
		return &r
	}
	return p, next
}

// BenchmarkRecordPath is the handling of a record that is decoded and
// processed, without a Tracer and with one that does nothing: the nil
// tracer must add no allocation (compare allocs/op with the parent commit
// of the tracing seam; TestNilTracerAllocs checks the seam itself).
func BenchmarkRecordPath(b *testing.B) {
	for _, bc := range []struct {
		name string
		tr   Tracer
	}{{"tracer=nil", nil}, {"tracer=nop", nopTracer{}}} {
		b.Run(bc.name, func(b *testing.B) {
			p, next := hotPartition(b, bc.tr)
			b.ReportAllocs()
			for b.Loop() {
				if !p.processNew(next()) {
					b.Fatal("stopped")
				}
				p.ledger.flush()
			}
		})
	}
}

// TestNilTracerAllocs: without a Tracer, the seam's calls on the record path
// allocate nothing, and the record path allocates the same with a Tracer
// that does nothing as without one, plus its span.
func TestNilTracerAllocs(t *testing.T) {
	p, next := hotPartition(t, nil)
	rec := next()
	o := &origin{rec: rec}
	ctx := context.Background()
	if n := testing.AllocsPerRun(100, func() {
		if p.startSpan(rec, o) {
			t.Fatal("a span without a Tracer")
		}
		o.trace.settledAs(OutcomeProcessed, "", 0, nil, 0)
		tctx := o.trace.try(ctx, 1)
		o.trace.endTry(tctx, deadletter.StageProcess, nil)
		endSpan(o)
	}); n != 0 {
		t.Errorf("the nil tracer's calls allocate %v times a record, want 0", n)
	}
	untraced := testing.AllocsPerRun(100, func() { p.processNew(next()); p.ledger.flush() })
	q, nextQ := hotPartition(t, nopTracer{})
	traced := testing.AllocsPerRun(100, func() { q.processNew(nextQ()); q.ledger.flush() })
	if traced != untraced+1 { // the traced struct on the origin
		t.Errorf("a record allocates %v times with a nop Tracer and %v without, want one more", traced, untraced)
	}
}

// nopTracer traces nothing, without allocating.
type nopTracer struct{}

func (nopTracer) Start(context.Context, TraceRecord) Span                         { return nopSpan{} }
func (nopTracer) StartBatch(ctx context.Context, _ []Span, _ int) context.Context { return ctx }
func (nopTracer) EndBatch(context.Context, error)                                 {}

type nopSpan struct{}

func (nopSpan) Try(ctx context.Context, _ int) context.Context  { return ctx }
func (nopSpan) EndTry(context.Context, deadletter.Stage, error) {}
func (nopSpan) Letter(TraceLetter) (context.Context, []kgo.RecordHeader) {
	return context.Background(), nil
}
func (nopSpan) EndLetter(context.Context, error) {}
func (nopSpan) End(TraceEnd)                     {}
