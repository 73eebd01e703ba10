package otel

import (
	"context"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
	otelapi "go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
	"go.opentelemetry.io/otel/trace"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
)

// instrumentationName names the tracer (the instrumentation scope).
const instrumentationName = "github.com/antidote-kafka/antidote/trace/otel"

// Attribute keys of Antidote's own, next to the messaging conventions.
const (
	// AttrOutcome: how the record was settled (consumer.Outcome:
	// processed, dead-lettered, forwarded, skipped, halted, released), or
	// "unsettled" when the consumer stopped first.
	AttrOutcome = attribute.Key("antidote.outcome")
	// AttrStage: where the record failed (deserialize-key,
	// deserialize-value, process).
	AttrStage = attribute.Key("antidote.stage")
	// AttrClass: the failure's class (transient, permanent,
	// unclassified).
	AttrClass = attribute.Key("antidote.failure.class")
	// AttrAttempt: the number of a try, from 1, across retries in place
	// and retry tiers; on a record span, the tries so far.
	AttrAttempt = attribute.Key("antidote.attempt")
	// AttrTiers: how many retry tiers the record went through.
	AttrTiers = attribute.Key("antidote.retry.tiers")
	// AttrTierTopic and AttrTierOffset: the retry tier a record was read
	// back from, and its offset there (the messaging attributes name the
	// original record).
	AttrTierTopic  = attribute.Key("antidote.retry.topic")
	AttrTierOffset = attribute.Key("antidote.retry.offset")
	// AttrLetter: what a send span writes: "dead-letter" or
	// "retry-tier".
	AttrLetter = attribute.Key("antidote.letter")
	// AttrRedrivenFrom: the dead letter a redriven record came from
	// (topic/partition/offset, deadletter.HeaderRedriveFrom).
	AttrRedrivenFrom = attribute.Key("antidote.redrive.from")
)

// outcomeUnsettled is the AttrOutcome of a record the consumer stopped
// handling before it was settled.
const outcomeUnsettled = "unsettled"

// Tracer is a [consumer.Tracer] that records OpenTelemetry spans: set it as
// consumer.Config.Tracer. Make it with [NewTracer]; it is safe for
// concurrent use.
type Tracer struct {
	tracer trace.Tracer
	prop   propagation.TextMapPropagator
	key    func(*kgo.Record) (string, bool)
}

var _ consumer.Tracer = (*Tracer)(nil)

// Opt configures a [Tracer].
type Opt func(*Tracer)

// TracerProvider sets the provider of the spans. Optional; default: the
// global one (otel.GetTracerProvider).
func TracerProvider(p trace.TracerProvider) Opt {
	return func(t *Tracer) { t.tracer = p.Tracer(instrumentationName, trace.WithSchemaURL(semconv.SchemaURL)) }
}

// Propagator sets how the trace context is read from a record's headers.
// Optional; default: the global one (otel.GetTextMapPropagator), or W3C
// trace context and baggage when the global one is the no-op default.
func Propagator(p propagation.TextMapPropagator) Opt {
	return func(t *Tracer) { t.prop = p }
}

// MessageKey sets how a record's key becomes the messaging.kafka.message.key
// attribute: the string, and whether to record it at all. Optional;
// default: a key of valid UTF-8 up to 256 bytes is recorded as it is, any
// other key is not. Keys that may hold personal data should be left out
// (see [NoMessageKeys]) or hashed here.
func MessageKey(fn func(*kgo.Record) (string, bool)) Opt {
	return func(t *Tracer) { t.key = fn }
}

// NoMessageKeys records no message keys.
func NoMessageKeys() Opt {
	return MessageKey(func(*kgo.Record) (string, bool) { return "", false })
}

// NewTracer returns a Tracer configured by opts.
func NewTracer(opts ...Opt) *Tracer {
	t := &Tracer{key: defaultKey}
	for _, o := range opts {
		o(t)
	}
	if t.tracer == nil {
		TracerProvider(otelapi.GetTracerProvider())(t)
	}
	if t.prop == nil {
		t.prop = otelapi.GetTextMapPropagator()
		if len(t.prop.Fields()) == 0 { // the no-op default
			t.prop = propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{})
		}
	}
	return t
}

// defaultKey records a key of valid UTF-8 up to 256 bytes.
func defaultKey(r *kgo.Record) (string, bool) {
	if r.Key == nil || len(r.Key) > 256 || !utf8.Valid(r.Key) {
		return "", false
	}
	return string(r.Key), true
}

// traceContext is the W3C format of deadletter.HeaderTraceLetter and
// HeaderRedriveTrace, whatever the configured propagator.
var traceContext = propagation.TraceContext{}

// Start begins the span of one handling of a record: "process <topic>", a
// consumer span. Its parent is the trace context of the forward that wrote
// a retry tier's record (deadletter.HeaderTraceLetter), else the one in the
// record's headers (traceparent, by the propagator); a redriven record's
// span links to the span that wrote its dead letter.
func (t *Tracer) Start(ctx context.Context, r consumer.TraceRecord) consumer.Span {
	rec := r.Record
	parent := t.prop.Extract(ctx, Carrier(rec))
	if r.Fetched != nil && r.Fetched != rec {
		if sc := letterContext(r.Fetched.Headers); sc.IsValid() {
			parent = trace.ContextWithRemoteSpanContext(parent, sc)
		}
	}
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs,
		semconv.MessagingSystemKafka,
		semconv.MessagingOperationTypeProcess,
		semconv.MessagingOperationName("process"),
		semconv.MessagingDestinationName(rec.Topic),
		semconv.MessagingDestinationPartitionID(strconv.FormatInt(int64(rec.Partition), 10)),
		semconv.MessagingKafkaOffset(int(rec.Offset)),
	)
	if r.Group != "" {
		attrs = append(attrs, semconv.MessagingConsumerGroupName(r.Group))
	}
	if k, ok := t.key(rec); ok && rec.Key != nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageKey(k))
	}
	if rec.Key != nil && rec.Value == nil {
		attrs = append(attrs, semconv.MessagingKafkaMessageTombstone(true))
	}
	if r.Tiers > 0 || (r.Fetched != nil && r.Fetched != rec) {
		attrs = append(attrs, AttrTiers.Int(r.Tiers))
		if r.Fetched != nil && r.Fetched != rec {
			attrs = append(attrs, AttrTierTopic.String(r.Fetched.Topic), AttrTierOffset.Int64(r.Fetched.Offset))
		}
	}
	opts := []trace.SpanStartOption{trace.WithSpanKind(trace.SpanKindConsumer)}
	for _, h := range rec.Headers {
		switch h.Key {
		case deadletter.HeaderRedriveTrace:
			if sc := parseTraceparent(h.Value); sc.IsValid() {
				opts = append(opts, trace.WithLinks(trace.Link{SpanContext: sc,
					Attributes: []attribute.KeyValue{AttrLetter.String("dead-letter")}}))
			}
		case deadletter.HeaderRedriveFrom:
			attrs = append(attrs, AttrRedrivenFrom.String(string(h.Value)))
		}
	}
	opts = append(opts, trace.WithAttributes(attrs...))
	_, s := t.tracer.Start(parent, "process "+rec.Topic, opts...)
	return &span{t: t, s: s, topic: rec.Topic}
}

// StartBatch begins the span of one call of a BatchHandler: "process
// <topic>", a consumer span, the root of a trace of its own (the handler's
// spans go there) with a link to the span of each record of the batch, as
// OpenTelemetry's messaging conventions have it for batches.
func (t *Tracer) StartBatch(ctx context.Context, spans []consumer.Span, attempt int) context.Context {
	links := make([]trace.Link, 0, len(spans))
	topic := ""
	for _, s := range spans {
		if s, ok := s.(*span); ok {
			links = append(links, trace.Link{SpanContext: s.s.SpanContext()})
			topic = s.topic
		}
	}
	ctx, _ = t.tracer.Start(ctx, "process "+topic,
		trace.WithNewRoot(),
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithLinks(links...),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeProcess,
			semconv.MessagingOperationName("process"),
			semconv.MessagingDestinationName(topic),
			semconv.MessagingBatchMessageCount(len(spans)),
			AttrAttempt.Int(attempt),
		))
	return ctx
}

// EndBatch ends the batch span of ctx.
func (t *Tracer) EndBatch(ctx context.Context, err error) {
	s := trace.SpanFromContext(ctx)
	if err != nil {
		fail(s, err)
	}
	s.End()
}

// span is the span of one handling of a record.
type span struct {
	t     *Tracer
	s     trace.Span
	topic string
}

// Try begins a try: "try <topic>", an internal span, a child of the
// record's span.
func (s *span) Try(ctx context.Context, attempt int) context.Context {
	ctx, _ = s.t.tracer.Start(trace.ContextWithSpan(ctx, s.s), "try "+s.topic,
		trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(AttrAttempt.Int(attempt)))
	return ctx
}

// EndTry ends the try of ctx, with the failure's stage and error.
func (s *span) EndTry(ctx context.Context, stage deadletter.Stage, err error) {
	ts := trace.SpanFromContext(ctx)
	if err != nil {
		ts.SetAttributes(AttrStage.String(string(stage)))
		fail(ts, err)
	}
	ts.End()
}

// Letter begins the span of writing a letter: "send <topic>", a producer
// span, a child of the record's span; its trace context goes into the
// letter's deadletter.HeaderTraceLetter header.
func (s *span) Letter(l consumer.TraceLetter) (context.Context, []kgo.RecordHeader) {
	kind := "dead-letter"
	if l.Outcome == consumer.OutcomeForwarded {
		kind = "retry-tier"
	}
	ctx, ls := s.t.tracer.Start(trace.ContextWithSpan(context.Background(), s.s), "send "+l.Topic,
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			semconv.MessagingSystemKafka,
			semconv.MessagingOperationTypeSend,
			semconv.MessagingOperationName("send"),
			semconv.MessagingDestinationName(l.Topic),
			AttrLetter.String(kind),
		))
	return ctx, []kgo.RecordHeader{{Key: deadletter.HeaderTraceLetter, Value: []byte(traceparent(ls.SpanContext()))}}
}

// EndLetter ends the letter span of ctx with its first write's outcome.
func (s *span) EndLetter(ctx context.Context, err error) {
	ls := trace.SpanFromContext(ctx)
	if err != nil {
		fail(ls, err)
	}
	ls.End()
}

// End ends the record's span with its outcome. A record that was
// dead-lettered, skipped after a failure or halted on has the status Error;
// one forwarded to a retry tier or released for another delivery keeps the
// failure in its attributes and an event, since it is not over.
func (s *span) End(e consumer.TraceEnd) {
	outcome := string(e.Outcome)
	if outcome == "" {
		outcome = outcomeUnsettled
	}
	attrs := []attribute.KeyValue{AttrOutcome.String(outcome)}
	if e.Attempts > 0 {
		attrs = append(attrs, AttrAttempt.Int(e.Attempts))
	}
	if e.Err != nil {
		attrs = append(attrs, AttrStage.String(string(e.Stage)), AttrClass.String(e.Class.String()))
	}
	s.s.SetAttributes(attrs...)
	if e.Err != nil {
		switch e.Outcome {
		case consumer.OutcomeDeadLettered, consumer.OutcomeSkipped, consumer.OutcomeHalted:
			fail(s.s, e.Err)
		default:
			s.s.RecordError(e.Err)
		}
	}
	s.s.End()
}

// fail marks s as failed by err: the status Error, error.type (the
// error's Go type, as the dead letter's antidote.error.type), and the error
// as an event.
func fail(s trace.Span, err error) {
	s.SetStatus(codes.Error, err.Error())
	s.SetAttributes(semconv.ErrorTypeKey.String(deadletter.ErrorType(err)))
	s.RecordError(err)
}

// traceparent formats sc as a W3C traceparent.
func traceparent(sc trace.SpanContext) string {
	m := propagation.MapCarrier{}
	traceContext.Inject(trace.ContextWithSpanContext(context.Background(), sc), m)
	return m.Get("traceparent")
}

// parseTraceparent reads a W3C traceparent; the zero SpanContext if it is
// not one.
func parseTraceparent(v []byte) trace.SpanContext {
	ctx := traceContext.Extract(context.Background(), propagation.MapCarrier{"traceparent": string(v)})
	return trace.SpanContextFromContext(ctx)
}

// letterContext is the span context in the last deadletter.HeaderTraceLetter
// of hs.
func letterContext(hs []kgo.RecordHeader) trace.SpanContext {
	for i := len(hs) - 1; i >= 0; i-- {
		if hs[i].Key == deadletter.HeaderTraceLetter {
			return parseTraceparent(hs[i].Value)
		}
	}
	return trace.SpanContext{}
}
