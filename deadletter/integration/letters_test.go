package integration_test

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// The builders below write dead letters the way each system does, header
// for header and in the same order (the same as deadletter's dialect
// tests; see deadletter's package documentation for the sources).

type hs = []deadletter.Header

func h(k, v string) deadletter.Header { return deadletter.Header{Key: k, Value: []byte(v)} }

func be32(v int32) []byte { return binary.BigEndian.AppendUint32(nil, uint32(v)) }
func be64(v int64) []byte { return binary.BigEndian.AppendUint64(nil, uint64(v)) }

var ts0 = time.Date(2026, 3, 14, 15, 9, 26, 535_000_000, time.UTC)

// springLetter is what DeadLetterPublishingRecoverer (Spring Kafka 3.x)
// publishes for a listener failure: the original headers, the exception
// headers, then the original-* headers.
func springLetter(orig hs, topic string, partition int32, offset int64) hs {
	out := append(hs{}, orig...)
	return append(out,
		h(deadletter.SpringExceptionFQCN, "org.springframework.kafka.listener.ListenerExecutionFailedException"),
		h(deadletter.SpringExceptionCauseFQCN, "java.lang.IllegalStateException"),
		h(deadletter.SpringExceptionMessage, "Listener method 'handle' threw exception; nested exception is java.lang.IllegalStateException: no stock"),
		h(deadletter.SpringExceptionStacktrace, "org.springframework.kafka.listener.ListenerExecutionFailedException: ...\n\tat ..."),
		h(deadletter.SpringOriginalTopic, topic),
		deadletter.Header{Key: deadletter.SpringOriginalPartition, Value: be32(partition)},
		deadletter.Header{Key: deadletter.SpringOriginalOffset, Value: be64(offset)},
		deadletter.Header{Key: deadletter.SpringOriginalTimestamp, Value: be64(ts0.UnixMilli())},
		h(deadletter.SpringOriginalTimestampType, "CreateTime"),
		h(deadletter.SpringOriginalGroup, "orders-service"),
	)
}

// connectLetter is what DeadLetterQueueReporter writes with
// errors.deadletterqueue.context.headers.enable=true.
func connectLetter(orig hs, topic string, partition int32, offset int64) hs {
	out := append(hs{}, orig...)
	return append(out,
		h(deadletter.ConnectTopic, topic),
		h(deadletter.ConnectPartition, strconv.Itoa(int(partition))),
		h(deadletter.ConnectOffset, strconv.FormatInt(offset, 10)),
		h(deadletter.ConnectConnector, "jdbc-sink"),
		h(deadletter.ConnectTask, "2"),
		h(deadletter.ConnectStage, "VALUE_CONVERTER"),
		h(deadletter.ConnectClass, "org.apache.kafka.connect.json.JsonConverter"),
		h(deadletter.ConnectException, "org.apache.kafka.connect.errors.DataException"),
		h(deadletter.ConnectExceptionMessage, "Converting byte[] to Kafka Connect data failed due to serialization error: "),
		h(deadletter.ConnectExceptionStack, "org.apache.kafka.connect.errors.DataException: ...\n\tat ..."),
	)
}

// streamsLetter is what ExceptionHandlerUtils.buildDeadLetterQueueRecord
// (Kafka Streams 4.2, KIP-1034) builds.
func streamsLetter(orig hs, topic string, partition int32, offset int64) hs {
	out := append(hs{}, orig...)
	return append(out,
		h(deadletter.StreamsException, "org.apache.kafka.common.errors.SerializationException"),
		h(deadletter.StreamsMessage, "Size of data received by IntegerDeserializer is not 4"),
		h(deadletter.StreamsStacktrace, "org.apache.kafka.common.errors.SerializationException: ...\n\tat ..."),
		h(deadletter.StreamsTopic, topic),
		h(deadletter.StreamsPartition, strconv.Itoa(int(partition))),
		h(deadletter.StreamsOffset, strconv.FormatInt(offset, 10)),
	)
}

// shareLetter is what the broker's ShareGroupDLQStateManager writes
// (KIP-1191). It copies no original headers.
func shareLetter(topic string, partition int32, offset int64) hs {
	return hs{
		h(deadletter.ShareTopic, topic),
		h(deadletter.SharePartition, strconv.Itoa(int(partition))),
		h(deadletter.ShareOffset, strconv.FormatInt(offset, 10)),
		h(deadletter.ShareGroup, "billing-share"),
		h(deadletter.ShareDeliveryCount, "5"),
		h(deadletter.ShareMessage, deadletter.ShareMessageExceeded),
	}
}

// antidoteLetter is what consumer/dlq.go writes.
func antidoteLetter(orig hs, topic string, partition int32, offset int64) hs {
	f := &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		ErrorType: "*json.SyntaxError", ErrorStage: "json", Message: "invalid character 'x' looking for beginning of value",
		Topic: topic, Partition: partition, Offset: offset, Timestamp: ts0,
		OriginalHeaders: len(orig), Group: "orders-service", ClientID: "antidote", Attempts: 1,
		First: ts0.Add(time.Second), Last: ts0.Add(time.Second),
	}
	return f.AppendHeaders(append(hs{}, orig...))
}
