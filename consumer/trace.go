package consumer

import (
	"context"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// Tracer traces records through the consumer ([Config.Tracer]). The consumer
// imports no tracing library: package trace/otel (a module of its own)
// implements Tracer with OpenTelemetry. Without a Tracer nothing is traced and
// nothing is paid: no call, no allocation.
//
// Each handling of a record has a [Span], begun before the record is decoded
// and ended when it is settled: processed, dead-lettered, forwarded to a retry
// tier, skipped, halted (or, in a share group, released for another delivery).
// Its tries (decode and handler: the first one and each retry in place) and
// the letter that settles it (a dead letter, or a copy forwarded to a retry
// tier) are parts of it. A record read back from a retry tier is handled
// again, with a span of its own: a tracer continues the trace from the tier
// record's headers, where the forward's span was written (see
// [Span.Letter]), so that one trace holds a record's whole way.
//
// With a [BatchHandler], each record still has a span of its own, and each
// call of the handler has a batch span ([Tracer.StartBatch]) that names the
// spans of its records: the handler's context carries the batch span.
//
// Methods are called from the goroutines that handle records (several at
// once), and EndLetter from the client's produce callbacks: they must be safe
// for concurrent use and must not block. The records passed are the
// consumer's: a tracer may read them during the call and must not change or
// keep them.
type Tracer interface {
	// Start begins the span of one handling of a record. ctx is the
	// consumer's. The span's methods are called from one goroutine at a
	// time, and End exactly once, unless the consumer stops first (the
	// record stays unsettled, and End says so).
	Start(ctx context.Context, r TraceRecord) Span
	// StartBatch begins the span of one call of a BatchHandler over the
	// records whose spans are spans (nil entries for records not traced),
	// for its attempt (from 1), and returns the context given to the
	// handler. The consumer does not keep spans after the call.
	StartBatch(ctx context.Context, spans []Span, attempt int) context.Context
	// EndBatch ends the batch span of ctx (from StartBatch) with the
	// handler's error, nil on success.
	EndBatch(ctx context.Context, err error)
}

// TraceRecord is the record a [Span] is begun for.
type TraceRecord struct {
	// Record is the record as the handler sees it: for a record read
	// from a retry tier, the original (its source topic, partition,
	// offset, and original headers).
	Record *kgo.Record
	// Fetched is the record as it was fetched: the retry tier's record,
	// with all its headers (the failure and retry headers and the trace
	// context of the forward), or Record itself.
	Fetched *kgo.Record
	// Group is the consumer group (or share group).
	Group string
	// Tiers is how many retry tiers the record went through: 0 at its
	// source.
	Tiers int
	// Share is true for a record delivered by a share group.
	Share bool
}

// Span is the span of one handling of a record, begun by [Tracer.Start].
type Span interface {
	// Try begins one try of the record (decode, then the handler),
	// attempt counting from 1 across retries in place and tiers, and
	// returns the context given to the deserializers and the handler.
	// ctx is the record's own (it ends when the consumer stops or an
	// operator skips the record).
	Try(ctx context.Context, attempt int) context.Context
	// EndTry ends the try of ctx (from Try): err is nil when the record
	// was decoded and handled, otherwise the failure and the stage it
	// happened at.
	EndTry(ctx context.Context, stage deadletter.Stage, err error)
	// Letter begins the span of writing the letter that settles the
	// record: a dead letter, or a copy forwarded to a retry tier. It
	// returns that span's context and the headers to append to the
	// letter: a tracer writes the trace context of the write, so that
	// the letter names the span that wrote it and a tier's handling
	// continues the trace (the letter keeps the record's own headers,
	// its traceparent among them). EndLetter ends it.
	Letter(l TraceLetter) (context.Context, []kgo.RecordHeader)
	// EndLetter ends the letter span of ctx (from Letter) with the
	// outcome of its first write: nil when the broker acknowledged it.
	// A failed write is written again (and logged, and counted) but
	// not traced again.
	EndLetter(ctx context.Context, err error)
	// End ends the span: the record is settled with e.Outcome, or the
	// consumer stopped first (e.Outcome is empty).
	End(e TraceEnd)
}

// TraceLetter is a letter being written, for [Span.Letter].
type TraceLetter struct {
	// Topic is where it goes: the dead-letter topic, or the retry tier.
	Topic string
	// Outcome is OutcomeDeadLettered or OutcomeForwarded.
	Outcome Outcome
	// Partition is the partition it is written to, -1 when the
	// partitioner has not chosen yet.
	Partition int32
}

// TraceEnd is how a record's handling ended, for [Span.End].
type TraceEnd struct {
	// Outcome is how the record was settled; empty when the consumer
	// stopped first and the record stays unsettled.
	Outcome Outcome
	// Stage, Class and Err are those of the failure that settled it,
	// empty for a processed record.
	Stage deadletter.Stage
	Class failure.Class
	Err   error
	// Attempts is the number of tries of a failed record so far (across
	// retries in place and tiers); 0 when it is not known, as for a
	// processed record (its tries are spans of their own).
	Attempts int
}

// traced is the trace of a record's handling, on its origin: nil unless a
// Tracer is configured.
type traced struct {
	span Span
	end  TraceEnd
}

// letterTrace is the span of a letter's write, ended by its first write.
type letterTrace struct {
	span Span
	ctx  context.Context
}

// startSpan begins the span of rec's handling (o.rec as the handler sees
// it), unless a Tracer is not configured or o has one already. It reports
// whether it began one: the caller then ends it (endSpan).
func (p *partition[K, V]) startSpan(rec *kgo.Record, o *origin) bool {
	t := p.c.cfg.Tracer
	if t == nil || o.trace != nil {
		return false
	}
	o.trace = &traced{span: t.Start(p.ctx, TraceRecord{Record: o.rec, Fetched: rec, Group: p.c.cfg.Group, Tiers: o.tiers})}
	return true
}

// endSpan ends the span of o's handling, if traced.
func endSpan(o *origin) {
	if t := o.trace; t != nil {
		o.trace = nil
		t.span.End(t.end)
	}
}

// settledAs records how the record of t is settled, for its span's end; t
// may be nil (not traced).
func (t *traced) settledAs(outcome Outcome, stage deadletter.Stage, class failure.Class, err error, attempts int) {
	if t != nil {
		t.end = TraceEnd{Outcome: outcome, Stage: stage, Class: class, Err: err, Attempts: attempts}
	}
}

// try begins a try of the record of t (nil: not traced) and returns its
// context.
func (t *traced) try(ctx context.Context, attempt int) context.Context {
	if t == nil {
		return ctx
	}
	return t.span.Try(ctx, attempt)
}

// endTry ends the try of ctx.
func (t *traced) endTry(ctx context.Context, stage deadletter.Stage, err error) {
	if t != nil {
		t.span.EndTry(ctx, stage, err)
	}
}

// end ends the span of t's record, if traced (see TraceEnd).
func (t *traced) endSpan() {
	if t != nil {
		t.span.End(t.end)
	}
}

// traceLetter begins the span of writing l, which settles the record of t
// (nil: not traced), and returns the headers to append to l after extra.
func traceLetter(t *traced, l *letter, outcome Outcome, extra []kgo.RecordHeader) []kgo.RecordHeader {
	if t == nil {
		return extra
	}
	ctx, hs := t.span.Letter(TraceLetter{Topic: l.tmpl.Topic, Outcome: outcome, Partition: -1})
	l.trace = &letterTrace{span: t.span, ctx: ctx}
	if len(hs) == 0 {
		return extra
	}
	return append(extra[:len(extra):len(extra)], hs...)
}
