package consumer

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
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
// dlqWriter.newLetter with its headers), "headers" only the headers: the
// source record's, then deadletter.Failure.AppendHeaders.
func BenchmarkLetter(b *testing.B) {
	w, rec, err := letterBench(b)
	l := w.newLetter(rec, failureOf(rec, err, w.group), err, nil)
	if n := len(l.tmpl.Headers); n < len(rec.Headers)+10 || l.tmpl.Headers[0].Key != "traceparent" ||
		!bytes.Equal(l.tmpl.Value, rec.Value) || l.tmpl.Topic != "orders.dlq" {
		b.Fatalf("unexpected letter: topic %q, %d headers, value %q", l.tmpl.Topic, n, l.tmpl.Value)
	}
	b.Run("record", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkLetter = w.newLetter(rec, failureOf(rec, err, w.group), err, nil)
		}
	})
	b.Run("headers", func(b *testing.B) {
		f := failureOf(rec, err, w.group)
		f.ClientID = w.clientID
		l := &letter{src: rec, f: f}
		b.ReportAllocs()
		for b.Loop() {
			l.tmpl.Headers = l.headers(l.hdrs[:0])
		}
		sinkLetter = l
	})
}

// BenchmarkLetterCompression measures what franz-go's compression of the
// dead letters costs, per letter: the bytes of a batch of 22 letters (their
// keys, values, header names and values; the bench's batches hold about as
// many) compressed with each codec, as the client compresses a produce
// batch. The letters differ as the bench's do: their offsets, timestamps,
// ids and the letters of the note. It reports the compressed size in
// percent of the input.
func BenchmarkLetterCompression(b *testing.B) {
	w, rec, err := letterBench(b)
	const perBatch = 22
	rnd := rand.New(rand.NewPCG(1, 2))
	var batch []byte
	for i := range perBatch {
		r := *rec
		r.Offset += int64(i * 10)
		r.Timestamp = r.Timestamp.Add(time.Duration(rnd.IntN(1e9)))
		note := make([]byte, 120)
		for j := range note {
			note[j] = byte('a' + rnd.IntN(26))
		}
		r.Value = fmt.Appendf(nil, `{"id":%d,"customer":"customer-%05d","sku":"SKU-%06d","note":"%s`, r.Offset, rnd.IntN(1e5), rnd.IntN(1e6), note)
		l := w.newLetter(&r, failureOf(&r, err, w.group), err, nil)
		batch = append(append(batch, l.tmpl.Key...), l.tmpl.Value...)
		for _, h := range l.tmpl.Headers {
			batch = append(append(batch, h.Key...), h.Value...)
		}
	}
	for _, c := range []struct {
		name  string
		codec kgo.CompressionCodec
	}{{"snappy", kgo.SnappyCompression()}, {"lz4", kgo.Lz4Compression()}, {"zstd", kgo.ZstdCompression()}} {
		b.Run(c.name, func(b *testing.B) {
			comp, cerr := kgo.DefaultCompressor(c.codec)
			if cerr != nil {
				b.Fatal(cerr)
			}
			var dst bytes.Buffer
			var out []byte
			b.ReportAllocs()
			b.SetBytes(int64(len(batch) / perBatch))
			for b.Loop() {
				dst.Reset()
				out, _ = comp.Compress(&dst, batch)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/perBatch, "ns/letter")
			b.ReportMetric(100*float64(len(out))/float64(len(batch)), "%size")
		})
	}
}
