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
//	antidote.reason                 permanent | retries-exhausted | retry-disabled
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
package deadletter
