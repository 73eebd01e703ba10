package deadletter_test

import (
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/deadletter/internal/letters"
)

// The letters of each dialect, from deadletter/internal/letters.
type hs = letters.HS

var (
	h              = letters.H
	be32           = letters.BE32
	be64           = letters.BE64
	ts0            = letters.TS0
	springLetter   = letters.Spring
	connectLetter  = letters.Connect
	streamsLetter  = letters.Streams
	shareLetter    = letters.Share
	antidoteLetter = letters.Antidote
)

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
