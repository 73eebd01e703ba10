package e2e

import (
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/console"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

func hdr(k, v string) kgo.RecordHeader { return kgo.RecordHeader{Key: k, Value: []byte(v)} }

// dialectLetters are the headers of a dead letter of each foreign dialect,
// as their writers set them, pointing at original offset o of topic.
func dialectLetters(topic string, o int64) map[string][]kgo.RecordHeader {
	be32 := binary.BigEndian.AppendUint32(nil, 3)
	be64 := binary.BigEndian.AppendUint64(nil, uint64(o))
	ts := binary.BigEndian.AppendUint64(nil, uint64(time.Now().Add(-time.Hour).UnixMilli()))
	return map[string][]kgo.RecordHeader{
		"spring": {
			hdr("traceparent", "00-abc-01"),
			hdr(deadletter.SpringOriginalTopic, topic),
			{Key: deadletter.SpringOriginalPartition, Value: be32},
			{Key: deadletter.SpringOriginalOffset, Value: be64},
			{Key: deadletter.SpringOriginalTimestamp, Value: ts},
			hdr(deadletter.SpringOriginalTimestampType, "CreateTime"),
			hdr(deadletter.SpringOriginalGroup, "billing"),
			hdr(deadletter.SpringExceptionFQCN, "org.springframework.kafka.listener.ListenerExecutionFailedException"),
			hdr(deadletter.SpringExceptionCauseFQCN, "org.springframework.kafka.support.serializer.DeserializationException"),
			hdr(deadletter.SpringExceptionMessage, "failed to deserialize"),
			hdr(deadletter.SpringExceptionStacktrace, "org.springframework.kafka.support.serializer.DeserializationException: failed to deserialize\n\tat org.springframework.kafka.support.serializer.ErrorHandlingDeserializer.deserializationException(ErrorHandlingDeserializer.java:204)\nCaused by: com.fasterxml.jackson.core.JsonParseException: Unexpected character ('g' (code 103))\n\tat com.fasterxml.jackson.core.JsonParser._constructError(JsonParser.java:2477)"),
		},
		"connect": {
			hdr(deadletter.ConnectTopic, topic), hdr(deadletter.ConnectPartition, "1"), hdr(deadletter.ConnectOffset, strconv.FormatInt(o, 10)),
			hdr(deadletter.ConnectConnector, "jdbc-sink"), hdr(deadletter.ConnectTask, "0"), hdr(deadletter.ConnectStage, "VALUE_CONVERTER"),
			hdr(deadletter.ConnectClass, "org.apache.kafka.connect.json.JsonConverter"),
			hdr(deadletter.ConnectException, "org.apache.kafka.connect.errors.DataException"),
			hdr(deadletter.ConnectExceptionMessage, "Converting byte[] to Kafka Connect data failed due to serialization error"),
		},
		"streams": {
			hdr(deadletter.StreamsException, "org.apache.kafka.common.errors.SerializationException"),
			hdr(deadletter.StreamsMessage, "Size of data received by LongDeserializer is not 8"),
			hdr(deadletter.StreamsStacktrace, "org.apache.kafka.common.errors.SerializationException: Size of data received by LongDeserializer is not 8"),
			hdr(deadletter.StreamsTopic, topic), hdr(deadletter.StreamsPartition, "2"), hdr(deadletter.StreamsOffset, strconv.FormatInt(o, 10)),
		},
		"share-group": {
			hdr(deadletter.ShareTopic, topic), hdr(deadletter.SharePartition, "0"), hdr(deadletter.ShareOffset, strconv.FormatInt(o, 10)),
			hdr(deadletter.ShareGroup, "shipping"), hdr(deadletter.ShareDeliveryCount, "5"), hdr(deadletter.ShareMessage, deadletter.ShareMessageExceeded),
		},
	}
}

// TestIntegrationConsoleDialects: a dead-letter topic holding letters of
// every dialect over two hours: the chart spreads them, and each letter
// page says in plain words what its writer recorded.
func TestIntegrationConsoleDialects(t *testing.T) {
	c := kafkatest.New(t)
	dlq := c.Topic(t, "mixed.dlq", 2)
	cl := c.Client(t, kgo.ProducerLinger(0))
	now := time.Now()
	var rs []*kgo.Record
	reasons := []deadletter.Reason{deadletter.ReasonPermanent, deadletter.ReasonExhausted, deadletter.ReasonRetryDisabled}
	for i := range 120 {
		// Denser towards now: a poison storm building up.
		at := now.Add(-time.Duration((120-i)*(120-i)) * time.Second / 2)
		var hs []kgo.RecordHeader
		kind := []string{"antidote", "antidote", "spring", "connect", "antidote", "streams", "antidote", "share-group"}[i%8]
		if kind == "antidote" {
			f := &deadletter.Failure{Stage: deadletter.StageDeserializeValue, Reason: reasons[i%3], Class: "permanent", ErrorType: "*json.SyntaxError",
				Message: "invalid character 'g' looking for beginning of value", Topic: "orders", Partition: int32(i % 2), Offset: int64(i),
				Timestamp: at.Add(-time.Second), Group: "billing", ClientID: "billing-1", Attempts: 1, First: at, Last: at}
			if f.Reason != deadletter.ReasonPermanent {
				f.Stage, f.Class, f.ErrorType, f.Message, f.Attempts = deadletter.StageProcess, "transient", "*net.OpError", "dial tcp 10.0.0.7:5432: connect: connection refused", 4
			}
			for _, h := range f.AppendHeaders(nil) {
				hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
			}
		} else {
			hs = dialectLetters("orders", int64(i))[kind]
		}
		rs = append(rs, &kgo.Record{Topic: dlq, Timestamp: at, Key: []byte(fmt.Sprintf("order-%d", i)), Value: []byte(fmt.Sprintf(`{"id":%d,"sku":"A-%d"}`, i, i)), Headers: hs})
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := cl.ProduceSync(ctx, rs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	h, err := console.New(console.Config{ClientOpts: []kgo.Opt{kgo.SeedBrokers(c.Brokers()...)}, Token: token, Logger: kafkatest.Logger(t), Topics: []string{dlq}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Close)
	tb := newTab(t, h, "")
	tb.login(t)
	tb.run(t, "topic", chromedp.Navigate(tb.base+"/topics/"+dlq), chromedp.WaitVisible("#chart", chromedp.ByID))
	if got := tb.text(t, "#total"); got != "120" {
		t.Errorf("total %q, want 120", got)
	}
	var bars, series int
	tb.run(t, "chart", chromedp.Evaluate(`document.querySelectorAll("#chart svg g").length`, &bars), chromedp.Evaluate(`document.querySelectorAll("#chart .legend li").length`, &series))
	if bars < 10 || series < 5 {
		t.Errorf("chart of letters over two hours: %d bars, %d series; want them spread over time and by reason", bars, series)
	}
	tb.screenshot(t, "topic-dialects")

	find := func(dialect string) string {
		t.Helper()
		var href string
		tb.run(t, "find "+dialect, chromedp.Navigate(tb.base+"/topics/"+dlq), chromedp.WaitVisible("#letters", chromedp.ByID),
			chromedp.Evaluate(`(function(){
				for (const tr of document.querySelectorAll("#letters tbody tr")) {
					if (tr.children[3].textContent === `+strconv.Quote(dialect)+`) return tr.querySelector("a.open").getAttribute("href");
				}
				return "";
			})()`, &href))
		if href == "" {
			t.Fatalf("no %s letter listed", dialect)
		}
		tb.run(t, "open "+dialect, chromedp.Navigate(tb.base+href), chromedp.WaitVisible("#failure", chromedp.ByID))
		return tb.text(t, "#dialect") + "\n" + tb.text(t, "#origin") + "\n" + tb.text(t, "#failure")
	}
	for dialect, want := range map[string][]string{
		"spring":      {"Spring Kafka", "partition\n3", "billing", "CreateTime", "JsonParseException: Unexpected character", "DeserializationException"},
		"connect":     {"Kafka Connect", "jdbc-sink", "VALUE_CONVERTER", "Connect's value converter could not read the value", "DataException"},
		"streams":     {"Kafka Streams", "partition\n2", "LongDeserializer is not 8"},
		"share-group": {"share group", "shipping", "delivery-count-exceeded", "delivered too many times", "attempts\n5"},
		"antidote":    {"Antidote", "billing-1", "the record's value could not be read"},
	} {
		got := find(dialect)
		for _, w := range want {
			contains(t, dialect+" letter", got, w)
		}
		if dialect == "spring" {
			contains(t, "spring headers", tb.text(t, "#headers"), "= 3") // the binary partition, decoded
			tb.screenshot(t, "letter-spring")
		}
	}
}
