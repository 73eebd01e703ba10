// Package deadletter defines Antidote's dead-letter record: the failure
// headers written next to the original key, value and headers, and how a
// dead-letter topic is named.
//
// # The record
//
// A dead letter is the original record copied byte for byte (key, value and
// every original header, in order) with Antidote's failure headers appended.
// The header [HeaderOriginalHeaders] says how many leading headers are the
// original ones, so that a redrive reproduces the original record exactly even
// when it already carried antidote.* headers from an earlier failure.
//
// Every failure header value is a UTF-8 string, readable from any language
// (kcat -J, the Java client, the console consumer). Values are bounded: the
// error message is cut to [MaxMessageBytes], other values to [MaxValueBytes],
// so one record's failure headers stay well under 4 KiB. There are no stack
// traces.
//
//	header                          value
//	antidote.stage                  deserialize-key | deserialize-value | process
//	antidote.reason                 permanent | retries-exhausted | retry-disabled | operator | operator-rescue
//	antidote.class                  permanent | transient | unclassified
//	antidote.error.type             the Go type of the innermost error, e.g. *json.SyntaxError
//	antidote.error.stage            the serde stage that failed, e.g. gzip, json (deserialize only)
//	antidote.error.message          the error text, at most 1 KiB
//	antidote.original.topic         source topic
//	antidote.original.partition     source partition, decimal
//	antidote.original.offset        source offset, decimal
//	antidote.original.timestamp     source record timestamp, RFC 3339 UTC, milliseconds
//	antidote.original.headers       how many leading headers are the original ones, decimal
//	antidote.consumer.group         consumer group
//	antidote.client.id              the dead-lettering client's id
//	antidote.attempts               how many times the record was tried, decimal
//	antidote.failure.first          first failure time, RFC 3339 UTC, milliseconds
//	antidote.failure.last           last failure time, RFC 3339 UTC, milliseconds
//
// # Topic names
//
// The dead-letter topic is named by a template (see [Template]); the default,
// [DefaultTemplate], is "{topic}.dlq". Records go to the source partition when
// the dead-letter topic has at least as many partitions as the source topic,
// and are otherwise partitioned by key.
//
// # Reading dead letters of any dialect
//
// [Parse] reads one dead-letter record into a [Letter], whichever system
// wrote it. The [Dialect] is that of the record's last failure header, so
// a dead letter of a dead letter reads as the outermost one. The dialects
// and their sources:
//
//   - Antidote: the headers above.
//   - Spring Kafka (DeadLetterPublishingRecoverer, KafkaHeaders.DLT_*):
//     kafka_dlt-original-topic, -partition (a 4-byte big-endian int),
//     -offset and -timestamp (8-byte big-endian longs), -timestamp-type,
//     -consumer-group; kafka_dlt-exception-fqcn, -cause-fqcn, -message,
//     -stacktrace, and kafka_dlt-key-exception-* for a key that failed to
//     deserialize. The first original-* headers count (Spring appends them
//     again on every hop), and the last exception headers. The
//     springDeserializerException* headers (a Java-serialized exception
//     that ErrorHandlingDeserializer adds and the recoverer may retain)
//     and the JsonSerializer type headers after the kafka_dlt-* ones
//     (__TypeId__ of the dead-letter record) are Spring's metadata
//     ([Letter.Metadata]): neither failure nor original headers, never
//     redriven. Spring's message for a deserialization failure is "failed
//     to deserialize"; [Letter.RootCause] is the last "Caused by" of the
//     stack trace.
//   - Kafka Connect (DeadLetterQueueReporter, with
//     errors.deadletterqueue.context.headers.enable=true):
//     __connect.errors.topic, .partition, .offset (decimal strings),
//     .connector.name, .task.id, .stage, .class.name,
//     .exception.class.name, .exception.message, .exception.stacktrace.
//   - Kafka Streams (KIP-1034, ExceptionHandlerUtils):
//     __streams.errors.exception, .message, .stacktrace, .topic,
//     .partition, .offset (decimal strings). The record keeps the failed
//     record's timestamp.
//   - Share groups (KIP-1191, written by the broker):
//     __dlq.errors.topic, .partition, .offset, .group, .delivery.count
//     (decimal strings) and .message. The broker copies no original
//     headers, and copies the key and value only with
//     errors.deadletterqueue.copy.record.enable.
//
// For the foreign dialects, the original headers are every header except
// the dialect's own. Malformed values (a 3-byte Spring partition, a
// non-numeric offset) give a [*HeaderError] that names the header, next to
// a Letter holding what could be read. Parse never panics.
//
// [Scan] reads a topic up to the end offsets it has when it starts, so it
// always ends; a broker that stops answering is reported ([ErrStalled]),
// never taken for the end. With [ScanOpts] it reads committed records only
// and counts transaction markers as read. A [Filter] selects letters by
// original topic, stage, class, reason text (also the last "Caused by" of
// a Java stack trace) and time, absolute or relative ([Filter.MaxAge]).
//
// # Redrive
//
// [Redrive] re-produces the original record of each selected letter (key,
// value and original headers, byte for byte) to its original topic, or to
// [RedriveConfig.To]. Two provenance headers follow the original ones:
//
//	antidote.redrive.count          how many times the record was redriven, decimal
//	antidote.redrive.from           the dead letter: topic/partition/offset
//	antidote.redrive.trace          the span that wrote the dead letter (W3C traceparent),
//	                                for a letter of a traced consumer ([HeaderTraceLetter])
//
// A record already redriven [RedriveConfig.MaxRedrives] times (default 3)
// is refused, which breaks poison loops. A missing target topic stops the
// redrive before anything goes to it ([UnknownTargetError]). Records are
// produced in pipelined batches; progress is committed as the offsets of
// a consumer group on the dead-letter topic after each batch is
// acknowledged, so an interrupted redrive resumes without repeating or
// skipping records, and a crash repeats at most one batch. With
// [RedriveConfig.ExactlyOnce] each batch and its progress commit are one
// Kafka transaction ([RedriveTxnOpts]): a crash repeats nothing for a
// read_committed reader. The group's name derives from the filter's
// canonical text, so a relative filter run again resumes.
//
// After a redrive, [RedrivenPrefix] finds how much of each partition it
// redrove: the offset below which a purge (Kafka's DeleteRecords, which
// removes a prefix) deletes only redriven letters, stopping below the
// first letter the redrive passed over or refused, and why.
package deadletter
