package deadletter

import (
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Dialect names the system that wrote a dead letter.
type Dialect string

// Dialects that [Parse] reads.
const (
	// DialectUnknown: no known failure headers.
	DialectUnknown Dialect = ""
	// DialectAntidote: Antidote's antidote.* headers (see the package
	// documentation).
	DialectAntidote Dialect = "antidote"
	// DialectSpring: Spring Kafka's DeadLetterPublishingRecoverer
	// (kafka_dlt-* headers).
	DialectSpring Dialect = "spring"
	// DialectConnect: a Kafka Connect sink connector with
	// errors.deadletterqueue.context.headers.enable=true
	// (__connect.errors.* headers).
	DialectConnect Dialect = "connect"
	// DialectStreams: the Kafka Streams dead-letter queue of KIP-1034
	// (__streams.errors.* headers).
	DialectStreams Dialect = "streams"
	// DialectShareGroup: the share-group dead-letter queue of KIP-1191,
	// written by the broker (__dlq.errors.* headers).
	DialectShareGroup Dialect = "share-group"
)

// String returns the dialect's name, "unknown" for [DialectUnknown].
func (d Dialect) String() string {
	if d == DialectUnknown {
		return "unknown"
	}
	return string(d)
}

// Spring Kafka's DeadLetterPublishingRecoverer headers (KafkaHeaders.DLT_*).
// Strings are UTF-8. The partition is a 4-byte big-endian int, the offset
// and the timestamp (epoch milliseconds) are 8-byte big-endian longs. The
// timestamp type is "CreateTime" or "LogAppendTime". The key-exception
// headers replace the exception headers when the key failed to deserialize.
const (
	SpringPrefix                = "kafka_dlt-"
	SpringOriginalTopic         = "kafka_dlt-original-topic"
	SpringOriginalPartition     = "kafka_dlt-original-partition"
	SpringOriginalOffset        = "kafka_dlt-original-offset"
	SpringOriginalTimestamp     = "kafka_dlt-original-timestamp"
	SpringOriginalTimestampType = "kafka_dlt-original-timestamp-type"
	SpringOriginalGroup         = "kafka_dlt-original-consumer-group"
	SpringExceptionFQCN         = "kafka_dlt-exception-fqcn"
	SpringExceptionCauseFQCN    = "kafka_dlt-exception-cause-fqcn"
	SpringExceptionMessage      = "kafka_dlt-exception-message"
	SpringExceptionStacktrace   = "kafka_dlt-exception-stacktrace"
	SpringKeyExceptionFQCN      = "kafka_dlt-key-exception-fqcn"
	SpringKeyExceptionMessage   = "kafka_dlt-key-exception-message"
	SpringKeyExceptionStack     = "kafka_dlt-key-exception-stacktrace"
)

// Spring's metadata headers: neither failure headers of the kafka_dlt-*
// family nor the original record's. [Parse] puts them in
// [Letter.Metadata], and a redrive leaves them out.
//
// ErrorHandlingDeserializer adds the deserializer-exception headers on the
// consuming side (a Java-serialized DeserializationException, often
// several KB, that the original record never had); the recoverer keeps
// them with retainExceptionHeader. JsonSerializer adds the type headers
// when the dead letter is produced (it removes and re-adds them, so they
// follow the kafka_dlt-* headers): those after the first kafka_dlt-*
// header describe the dead-letter record, not the original one.
const (
	SpringValueDeserializerException = "springDeserializerExceptionValue"
	SpringKeyDeserializerException   = "springDeserializerExceptionKey"
)

// springTypeHeaders are the type headers of Spring's JsonSerializer
// (AbstractJavaTypeMapper).
var springTypeHeaders = map[string]bool{
	"__TypeId__": true, "__ContentTypeId__": true, "__KeyTypeId__": true,
	"__Key_TypeId__": true, "__Key_ContentTypeId__": true, "__Key_KeyTypeId__": true,
}

// Values of [SpringOriginalTimestampType] (Java's TimestampType.name).
const (
	TimestampCreateTime    = "CreateTime"
	TimestampLogAppendTime = "LogAppendTime"
	TimestampNone          = "NoTimestampType"
)

// Kafka Connect's dead-letter context headers (DeadLetterQueueReporter).
// Every value is a UTF-8 string; partition, offset and task id are
// decimal. Without a source record Connect writes topic "" and
// partition and offset -1.
const (
	ConnectPrefix           = "__connect.errors."
	ConnectTopic            = "__connect.errors.topic"
	ConnectPartition        = "__connect.errors.partition"
	ConnectOffset           = "__connect.errors.offset"
	ConnectConnector        = "__connect.errors.connector.name"
	ConnectTask             = "__connect.errors.task.id"
	ConnectStage            = "__connect.errors.stage"
	ConnectClass            = "__connect.errors.class.name"
	ConnectException        = "__connect.errors.exception.class.name"
	ConnectExceptionMessage = "__connect.errors.exception.message"
	ConnectExceptionStack   = "__connect.errors.exception.stacktrace"
)

// Kafka Streams' dead-letter headers (KIP-1034, ExceptionHandlerUtils).
// Every value is a UTF-8 string (null when Java had null); partition and
// offset are decimal, -1 when unknown. The record's timestamp is the
// failed record's.
const (
	StreamsPrefix     = "__streams.errors."
	StreamsException  = "__streams.errors.exception"
	StreamsMessage    = "__streams.errors.message"
	StreamsStacktrace = "__streams.errors.stacktrace"
	StreamsTopic      = "__streams.errors.topic"
	StreamsPartition  = "__streams.errors.partition"
	StreamsOffset     = "__streams.errors.offset"
)

// Share-group dead-letter headers (KIP-1191), written by the broker
// (ShareGroupDLQStateManager). Every value is a UTF-8 string; partition,
// offset and delivery count are decimal. Delivery count and message are
// optional. The original headers are not copied, and the key and value
// only when the group sets errors.deadletterqueue.copy.record.enable.
const (
	SharePrefix        = "__dlq.errors."
	ShareTopic         = "__dlq.errors.topic"
	SharePartition     = "__dlq.errors.partition"
	ShareOffset        = "__dlq.errors.offset"
	ShareGroup         = "__dlq.errors.group"
	ShareDeliveryCount = "__dlq.errors.delivery.count"
	ShareMessage       = "__dlq.errors.message"
)

// The messages the broker writes in [ShareMessage], and the reasons
// [Parse] gives them.
const (
	ShareMessageRejected = "Offset rejected by client."
	ShareMessageExceeded = "Offset delivery count exceeded the threshold."

	ShareReasonRejected = "client-rejected"
	ShareReasonExceeded = "delivery-count-exceeded"
)

// antidoteFailureHeaders are the names that mark an Antidote dead letter.
var antidoteFailureHeaders = map[string]bool{
	HeaderStage: true, HeaderReason: true, HeaderClass: true, HeaderErrorType: true,
	HeaderErrorStage: true, HeaderErrorMessage: true, HeaderOriginalTopic: true,
	HeaderOriginalPartition: true, HeaderOriginalOffset: true, HeaderOriginalTimestamp: true,
	HeaderOriginalHeaders: true, HeaderGroup: true, HeaderClientID: true, HeaderAttempts: true,
	HeaderFirstFailure: true, HeaderLastFailure: true,
}

// dialectOf returns the dialect a header belongs to, or DialectUnknown.
func dialectOf(key string) Dialect {
	switch {
	case antidoteFailureHeaders[key]:
		return DialectAntidote
	case strings.HasPrefix(key, SpringPrefix):
		return DialectSpring
	case strings.HasPrefix(key, ConnectPrefix):
		return DialectConnect
	case strings.HasPrefix(key, StreamsPrefix):
		return DialectStreams
	case strings.HasPrefix(key, SharePrefix):
		return DialectShareGroup
	}
	return DialectUnknown
}

// springBinary are the Spring headers whose values are big-endian
// numbers, and their sizes.
var springBinary = map[string]int{
	SpringOriginalPartition: 4,
	SpringOriginalOffset:    8,
	SpringOriginalTimestamp: 8,
}

// SpringNumber shows the value of a Spring header that is a big-endian
// number (the original partition, offset and timestamp) as decimal text,
// the timestamp with its time; "" for any other header. A value of the
// wrong size is described as malformed.
func SpringNumber(h Header) string {
	size, ok := springBinary[h.Key]
	if !ok {
		return ""
	}
	if len(h.Value) != size {
		return fmt.Sprintf("malformed: %d bytes, want %d", len(h.Value), size)
	}
	if size == 4 {
		return strconv.Itoa(int(int32(binary.BigEndian.Uint32(h.Value))))
	}
	n := int64(binary.BigEndian.Uint64(h.Value))
	if h.Key == SpringOriginalTimestamp && n >= 0 {
		return fmt.Sprintf("%d (%s)", n, time.UnixMilli(n).UTC().Format(TimeLayout))
	}
	return strconv.FormatInt(n, 10)
}
