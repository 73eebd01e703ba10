package consumer

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// letterBench is the input of the letter benchmarks: a 200-byte value that
// is a poison pill (truncated JSON) with 3 original headers, and the error
// serde.JSON returns for it.
func letterBench(b *testing.B) (*dlqWriter, *kgo.Record, error) {
	b.Helper()
	value := append([]byte(`{"id":8412,"customer":"customer-00042","sku":"SKU-000123","note":"`), bytes.Repeat([]byte("x"), 200)...)[:200]
	rec := &kgo.Record{
		Topic: "orders", Partition: 3, Offset: 8412, Timestamp: time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC),
		Key: []byte("order-8412"), Value: value,
		Headers: []kgo.RecordHeader{
			{Key: "traceparent", Value: []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")},
			{Key: "content-type", Value: []byte("application/json")},
			{Key: "producer", Value: []byte("orders-api-7")},
		},
	}
	type order struct {
		ID       int64  `json:"id"`
		Customer string `json:"customer"`
		SKU      string `json:"sku"`
		Note     string `json:"note"`
	}
	_, err := serde.JSON[order]().Deserialize(context.Background(), serde.Meta{Topic: rec.Topic, Part: serde.Value, Headers: headers(rec.Headers)}, rec.Value)
	if err == nil {
		b.Fatal("the poison pill decodes")
	}
	w := &dlqWriter{group: "billing", clientID: "billing-7"}
	return w, rec, err
}

// failureOf builds the failure of rec the way partition.act does.
func failureOf(rec *kgo.Record, err error, group string) *deadletter.Failure {
	now := time.Now()
	f := &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: failure.ClassPermanent.String(),
		ErrorType: deadletter.ErrorType(err), Message: err.Error(),
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp,
		OriginalHeaders: len(rec.Headers), Group: group, Attempts: 1,
		First: now, Last: now,
	}
	if s, ok := serde.StageOf(err); ok {
		f.ErrorStage = s
	}
	return f
}

var sinkLetter *letter

// BenchmarkLetter measures the construction of one dead letter's record,
// without a broker: "record" is what the consumer does for each poison pill
// before the produce (the failure as partition.act builds it, then
// dlqWriter.newLetter with its headers), "headers" only
// deadletter.Failure.AppendHeaders and the copy into franz-go headers.
func BenchmarkLetter(b *testing.B) {
	w, rec, err := letterBench(b)
	l := w.newLetter(rec, failureOf(rec, err, w.group), err)
	if n := len(l.tmpl.Headers); n < len(rec.Headers)+10 || l.tmpl.Headers[0].Key != "traceparent" ||
		!bytes.Equal(l.tmpl.Value, rec.Value) || l.tmpl.Topic != "orders.dlq" {
		b.Fatalf("unexpected letter: topic %q, %d headers, value %q", l.tmpl.Topic, n, l.tmpl.Value)
	}
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkLetter = w.newLetter(rec, failureOf(rec, err, w.group), err)
		}
	})
	b.Run("headers", func(b *testing.B) {
		f := failureOf(rec, err, w.group)
		f.ClientID = w.clientID
		b.ReportAllocs()
		for b.Loop() {
			fh := f.AppendHeaders(make([]deadletter.Header, 0, 16))
			hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+len(fh))
			hs = append(hs, rec.Headers...)
			for _, h := range fh {
				hs = append(hs, kgo.RecordHeader(h))
			}
			sinkLetter = &letter{tmpl: kgo.Record{Headers: hs}}
		}
	})
}
