// Package letters builds dead letters the way each system writes them,
// header for header and in the same order (see deadletter's package
// documentation for the sources), for deadletter's tests and its
// integration tests.
package letters

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// HS is a list of headers.
type HS = []deadletter.Header

// H is a header with a string value.
func H(k, v string) deadletter.Header { return deadletter.Header{Key: k, Value: []byte(v)} }

// BE32 is a big-endian int32, as Spring writes its numbers.
func BE32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }

// BE64 is a big-endian int64.
func BE64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

// TS0 is the time of the letters' original records.
var TS0 = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// Spring is what DeadLetterPublishingRecoverer (Spring Kafka 3.x)
// publishes for a listener failure: the original headers, the exception
// headers, then the original-* headers.
func Spring(orig HS, topic string, partition int32, offset int64) HS {
	out := append(HS{}, orig...)
	return append(out,
		H(deadletter.SpringExceptionFQCN, "org.springframework.kafka.listener.ListenerExecutionFailedException"),
		H(deadletter.SpringExceptionCauseFQCN, "java.lang.IllegalStateException"),
		H(deadletter.SpringExceptionMessage, "Listener method 'handle' threw exception; nested exception is java.lang.IllegalStateException: no stock"),
		H(deadletter.SpringExceptionStacktrace, "org.springframework.kafka.listener.ListenerExecutionFailedException: ...\n\tat ..."),
		H(deadletter.SpringOriginalTopic, topic),
		deadletter.Header{Key: deadletter.SpringOriginalPartition, Value: BE32(partition)},
		deadletter.Header{Key: deadletter.SpringOriginalOffset, Value: BE64(offset)},
		deadletter.Header{Key: deadletter.SpringOriginalTimestamp, Value: BE64(TS0.UnixMilli())},
		H(deadletter.SpringOriginalTimestampType, "CreateTime"),
		H(deadletter.SpringOriginalGroup, "orders-service"),
	)
}

// Connect is what DeadLetterQueueReporter writes with
// errors.deadletterqueue.context.headers.enable=true.
func Connect(orig HS, topic string, partition int32, offset int64) HS {
	out := append(HS{}, orig...)
	return append(out,
		H(deadletter.ConnectTopic, topic),
		H(deadletter.ConnectPartition, strconv.Itoa(int(partition))),
		H(deadletter.ConnectOffset, strconv.FormatInt(offset, 10)),
		H(deadletter.ConnectConnector, "jdbc-sink"),
		H(deadletter.ConnectTask, "2"),
		H(deadletter.ConnectStage, "VALUE_CONVERTER"),
		H(deadletter.ConnectClass, "org.apache.kafka.connect.json.JsonConverter"),
		H(deadletter.ConnectException, "org.apache.kafka.connect.errors.DataException"),
		H(deadletter.ConnectExceptionMessage, "Converting byte[] to Kafka Connect data failed due to serialization error: "),
		H(deadletter.ConnectExceptionStack, "org.apache.kafka.connect.errors.DataException: ...\n\tat ..."),
	)
}

// Streams is what ExceptionHandlerUtils.buildDeadLetterQueueRecord
// (Kafka Streams 4.2, KIP-1034) builds.
func Streams(orig HS, topic string, partition int32, offset int64) HS {
	out := append(HS{}, orig...)
	return append(out,
		H(deadletter.StreamsException, "org.apache.kafka.common.errors.SerializationException"),
		H(deadletter.StreamsMessage, "Size of data received by IntegerDeserializer is not 4"),
		H(deadletter.StreamsStacktrace, "org.apache.kafka.common.errors.SerializationException: ...\n\tat ..."),
		H(deadletter.StreamsTopic, topic),
		H(deadletter.StreamsPartition, strconv.Itoa(int(partition))),
		H(deadletter.StreamsOffset, strconv.FormatInt(offset, 10)),
	)
}

// Share is what the broker's ShareGroupDLQStateManager writes
// (KIP-1191). It copies no original headers.
func Share(topic string, partition int32, offset int64) HS {
	return HS{
		H(deadletter.ShareTopic, topic),
		H(deadletter.SharePartition, strconv.Itoa(int(partition))),
		H(deadletter.ShareOffset, strconv.FormatInt(offset, 10)),
		H(deadletter.ShareGroup, "billing-share"),
		H(deadletter.ShareDeliveryCount, "5"),
		H(deadletter.ShareMessage, deadletter.ShareMessageExceeded),
	}
}

// Antidote is what consumer/dlq.go writes.
func Antidote(orig HS, topic string, partition int32, offset int64) HS {
	f := &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		ErrorType: "*json.SyntaxError", ErrorStage: "json", Message: "invalid character 'x' looking for beginning of value",
		Topic: topic, Partition: partition, Offset: offset, Timestamp: TS0,
		OriginalHeaders: len(orig), Group: "orders-service", ClientID: "antidote", Attempts: 1,
		First: TS0.Add(time.Second), Last: TS0.Add(time.Second),
	}
	return f.AppendHeaders(append(HS{}, orig...))
}
