package deadletter_test

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// The builders below write dead letters the way each system does, header
// for header and in the same order; see the package documentation for the
// sources.

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

// javaSerialized is the start of a Java-serialized DeserializationException
// (ObjectOutputStream: magic 0xACED, version 5, TC_OBJECT, TC_CLASSDESC,
// the class name), padded to the size such blobs have.
func javaSerialized() []byte {
	const class = "org.springframework.kafka.support.serializer.DeserializationException"
	b := []byte{0xac, 0xed, 0x00, 0x05, 0x73, 0x72, 0x00, byte(len(class))}
	b = append(b, class...)
	for len(b) < 4096 {
		b = append(b, 0x78, 0x70, 0x00, 0xff, 'j', 'a', 'v', 'a')
	}
	return b
}

// spring41Deserialization is what Spring Kafka 4.1 publishes for a value
// that ErrorHandlingDeserializer could not read, with the recoverer's
// retainExceptionHeader set and a JsonSerializer dead-letter template: the
// original headers, the retained springDeserializerExceptionValue, the
// exception headers (message "failed to deserialize", the cause only in the
// stack trace), the original-* headers (no consumer group: that is only for
// a ListenerExecutionFailedException), then __TypeId__ from the serializer.
func spring41Deserialization(orig hs, topic string, partition int32, offset int64) hs {
	out := append(hs{}, orig...)
	return append(out,
		deadletter.Header{Key: deadletter.SpringValueDeserializerException, Value: javaSerialized()},
		h(deadletter.SpringExceptionFQCN, "org.springframework.kafka.support.serializer.DeserializationException"),
		h(deadletter.SpringExceptionCauseFQCN, "tools.jackson.core.exc.StreamReadException"),
		h(deadletter.SpringExceptionMessage, "failed to deserialize"),
		h(deadletter.SpringExceptionStacktrace, "org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize\n"+
			"\tat org.springframework.kafka.support.serializer.SerializationUtils.deserializationException(SerializationUtils.java:158)\n"+
			"\tat org.springframework.kafka.support.serializer.ErrorHandlingDeserializer.deserialize(ErrorHandlingDeserializer.java:218)\n"+
			"Caused by: tools.jackson.core.exc.StreamReadException: Unexpected character ('x' (code 120)): was expecting double-quote\n"+
			"\tat tools.jackson.core.JsonParser._constructReadException(JsonParser.java:2612)\n"+
			"\t... 27 more\n"+
			"Caused by: java.io.CharConversionException: Invalid UTF-8 start byte 0xff (at char #3, byte #-1)\n"+
			"\tat tools.jackson.core.io.UTF8Reader.reportInvalidInitial(UTF8Reader.java:399)\n"+
			"\t... 31 more\n"),
		h(deadletter.SpringOriginalTopic, topic),
		deadletter.Header{Key: deadletter.SpringOriginalPartition, Value: be32(partition)},
		deadletter.Header{Key: deadletter.SpringOriginalOffset, Value: be64(offset)},
		deadletter.Header{Key: deadletter.SpringOriginalTimestamp, Value: be64(ts0.UnixMilli())},
		h(deadletter.SpringOriginalTimestampType, "LogAppendTime"),
		h("__TypeId__", "[B"),
	)
}

// springKeyLetter is Spring's letter for a key deserialization failure.
func springKeyLetter(topic string, partition int32, offset int64) hs {
	return hs{
		h(deadletter.SpringKeyExceptionFQCN, "org.springframework.kafka.support.serializer.DeserializationException"),
		h(deadletter.SpringKeyExceptionMessage, "failed to deserialize; nested exception is java.lang.NumberFormatException"),
		h(deadletter.SpringKeyExceptionStack, "org.springframework...DeserializationException\n\tat ..."),
		h(deadletter.SpringOriginalTopic, topic),
		deadletter.Header{Key: deadletter.SpringOriginalPartition, Value: be32(partition)},
		deadletter.Header{Key: deadletter.SpringOriginalOffset, Value: be64(offset)},
		deadletter.Header{Key: deadletter.SpringOriginalTimestamp, Value: be64(ts0.UnixMilli())},
		h(deadletter.SpringOriginalTimestampType, "CreateTime"),
	}
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
