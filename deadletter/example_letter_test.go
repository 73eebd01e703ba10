package deadletter_test

import (
	"encoding/binary"
	"fmt"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

func ExampleParse() {
	// A dead letter written by Antidote.
	f := &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		ErrorType: "*json.SyntaxError", Message: "unexpected end of JSON input",
		Topic: "orders", Partition: 3, Offset: 8412, OriginalHeaders: 1,
		Timestamp: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC),
	}
	headers := f.AppendHeaders([]deadletter.Header{{Key: "traceparent", Value: []byte("00-…-01")}})
	l, err := deadletter.Parse(deadletter.Record{Topic: "orders.dlq", Value: []byte(`{"id":`), Headers: headers})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %s[%d]@%d %s %s, %d original header(s)\n",
		l.Dialect, l.OriginalTopic, l.OriginalPartition, l.OriginalOffset, l.Stage, l.Summary(), len(l.OriginalHeaders))

	// A dead letter written by Spring Kafka: the partition is a 4-byte
	// big-endian int, the offset an 8-byte big-endian long.
	spring := []deadletter.Header{
		{Key: "kafka_dlt-exception-fqcn", Value: []byte("org.springframework.kafka.listener.ListenerExecutionFailedException")},
		{Key: "kafka_dlt-exception-cause-fqcn", Value: []byte("java.lang.IllegalStateException")},
		{Key: "kafka_dlt-exception-message", Value: []byte("out of stock")},
		{Key: "kafka_dlt-original-topic", Value: []byte("payments")},
		{Key: "kafka_dlt-original-partition", Value: binary.BigEndian.AppendUint32(nil, 2)},
		{Key: "kafka_dlt-original-offset", Value: binary.BigEndian.AppendUint64(nil, 1234)},
		{Key: "kafka_dlt-original-consumer-group", Value: []byte("payments-service")},
	}
	l, err = deadletter.Parse(deadletter.Record{Topic: "payments-dlt", Headers: spring})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("%s: %s[%d]@%d %s %s, group %s\n",
		l.Dialect, l.OriginalTopic, l.OriginalPartition, l.OriginalOffset, l.Stage, l.Summary(), l.Group)

	// Output:
	// antidote: orders[3]@8412 deserialize-value *json.SyntaxError: unexpected end of JSON input, 1 original header(s)
	// spring: payments[2]@1234 process java.lang.IllegalStateException: out of stock, group payments-service
}

func ExampleParseWhen() {
	_, ago, _ := deadletter.ParseWhen("7d")
	at, _, _ := deadletter.ParseWhen("2026-03-14T15:00:00Z")
	_, _, err := deadletter.ParseWhen("yesterday")
	fmt.Println(ago, at.Format(time.RFC3339))
	fmt.Println(err)
	// Output:
	// 168h0m0s 2026-03-14T15:00:00Z
	// "yesterday": want an RFC 3339 time (2026-03-14T15:00:00Z) or a duration ago (90m, 2h, 7d)
}

func ExampleSpringNumber() {
	fmt.Println(deadletter.SpringNumber(deadletter.Header{Key: deadletter.SpringOriginalPartition, Value: []byte{0, 0, 0, 3}}))
	fmt.Println(deadletter.SpringNumber(deadletter.Header{Key: deadletter.SpringOriginalOffset, Value: []byte{0, 1}}))
	fmt.Printf("%q\n", deadletter.SpringNumber(deadletter.Header{Key: "traceparent", Value: []byte("00-abc-01")}))
	// Output:
	// 3
	// malformed: 2 bytes, want 8
	// ""
}
