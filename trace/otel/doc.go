// Package otel traces an Antidote consumer with OpenTelemetry: a
// [consumer.Tracer] in a module of its own, so that the consumer packages
// never import OpenTelemetry. It is modelled on franz-go's plugin/kotel.
//
//	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter))
//	cfg.Tracer = antiotel.NewTracer(antiotel.TracerProvider(tp))
//	c, err := consumer.New(cfg)
//
// # Spans
//
// Each handling of a record is a consumer span, "process <topic>", that
// continues the trace of the record's headers (traceparent and tracestate,
// read by the propagator: W3C trace context by default). Under it:
//
//   - "try <topic>": each try, decode and handler, the first one and each
//     retry in place (antidote.attempt). The deserializers and the handler
//     get its context: their own spans are its children.
//   - "send <topic>": the write of the letter that settles the record, a
//     producer span: a dead letter (antidote.letter=dead-letter) or a copy
//     forwarded to a retry tier (retry-tier). Its trace context is written
//     into the letter, in the header antidote.trace.letter
//     (deadletter.HeaderTraceLetter); the letter keeps the record's own
//     traceparent among its original headers.
//
// A record read back from a retry tier is handled again under the forward's
// send span: one trace holds a record's whole way, through its retries, its
// tiers and its dead letter. `antidote dlq redrive` copies the letter's
// antidote.trace.letter into the redriven record (antidote.redrive.trace,
// deadletter.HeaderRedriveTrace), and the redriven record's span links to
// the span that dead-lettered it.
//
// With a BatchHandler, each record still has its span (decode, failures,
// letters), and each call of the handler is a span of its own, "process
// <topic>", the root of a trace with a link to the span of every record of
// the batch (messaging.batch.message_count), as OpenTelemetry's messaging
// conventions have it for batches. The handler gets its context. Share
// groups are traced like the rest; a record released for another delivery
// ends its span with antidote.outcome=released, and the next delivery is a
// span of its own in the same trace.
//
// # Attributes
//
// The messaging semantic conventions (semconv v1.43.0): messaging.system
// (kafka), messaging.operation.type and .name (process, send),
// messaging.destination.name (the record's topic: for a record read back
// from a tier, its original topic, with the tier's topic and offset in
// antidote.retry.topic and antidote.retry.offset),
// messaging.destination.partition.id, messaging.kafka.offset,
// messaging.consumer.group.name, messaging.kafka.message.key (a key of
// valid UTF-8 up to 256 bytes; see [MessageKey] and [NoMessageKeys]) and
// messaging.kafka.message.tombstone. A span that ends with a failure has
// error.type (the error's Go type) and the error as an event; a record
// span has antidote.outcome (processed, dead-lettered, forwarded, skipped,
// halted, released, or unsettled when the consumer stopped first),
// antidote.stage and antidote.failure.class. Dead-lettered, skipped and
// halted records have the status Error; forwarded and released ones are not
// over yet and keep it unset.
//
// # Cost
//
// A consumer without a Tracer pays nothing for tracing (the consumer
// package's BenchmarkRecordPath and TestNilTracerAllocs). With this one, a
// processed record costs its two spans (process and try) and their
// attributes: BenchmarkProcessedRecord measures them with the SDK, sampled
// and not exported (about 7µs and 27 allocations on a laptop-class core).
package otel
