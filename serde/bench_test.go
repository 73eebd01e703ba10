package serde_test

import (
	"context"
	"testing"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/serde"
)

type benchOrder struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Amount   float64  `json:"amount"`
	Currency string   `json:"currency"`
	Items    []string `json:"items"`
	Paid     bool     `json:"paid"`
	Note     string   `json:"note"`
}

// benchRecord is a ~200-byte JSON record.
var benchRecord = []byte(`{"id":"ord-2024-000042","customer":"cust-7f3a9c","amount":1234.56,"currency":"EUR",` +
	`"items":["sku-100","sku-200","sku-300"],"paid":true,"note":"leave at the front desk, ring twice please"}`)

func BenchmarkChain(b *testing.B) {
	ctx := context.Background()
	m := serde.Meta{Topic: "orders", Part: serde.Value, Headers: []serde.Header{{Key: "k", Value: []byte("v")}}}
	b.Logf("record: %d bytes", len(benchRecord))

	b.Run("bare", func(b *testing.B) {
		d := serde.JSON[benchOrder]()
		b.ReportAllocs()
		b.SetBytes(int64(len(benchRecord)))
		for b.Loop() {
			if _, err := d.Deserialize(ctx, m, benchRecord); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decorated", func(b *testing.B) {
		d := serde.Handle(serde.Retry(serde.Pipe(serde.JSON[benchOrder]()), backoff.Exponential{}))
		b.ReportAllocs()
		b.SetBytes(int64(len(benchRecord)))
		for b.Loop() {
			r, err := d.Deserialize(ctx, m, benchRecord)
			if err != nil || !r.OK() {
				b.Fatal(err, r.Failure)
			}
		}
	})
}

// Package-level deserializers, so that the compiler cannot devirtualize the
// "bare" calls and flatter them.
var (
	noopValue serde.Deserializer[benchOrder] = serde.DeserializerFunc[benchOrder](
		func(context.Context, serde.Meta, []byte) (benchOrder, error) { return benchOrder{ID: "x"}, nil })
	noopPointer serde.Deserializer[*benchOrder] = serde.DeserializerFunc[*benchOrder](
		func(context.Context, serde.Meta, []byte) (*benchOrder, error) { return &theOrder, nil })
	theOrder  benchOrder
	sinkValue benchOrder
	sinkPtr   *benchOrder
)

// BenchmarkOverhead isolates the decorators' cost: the codec does nothing, so
// the difference between bare and decorated is Handle(Retry(Pipe(...))) alone.
// The value variants decode into a 104-byte struct, the pointer variants into
// a pointer: the difference is the cost of copying the value through one more
// call frame.
func BenchmarkOverhead(b *testing.B) {
	ctx := context.Background()
	m := serde.Meta{Topic: "orders", Part: serde.Value}
	b.Run("value/bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkValue, _ = noopValue.Deserialize(ctx, m, benchRecord)
		}
	})
	b.Run("value/decorated", func(b *testing.B) {
		d := serde.Handle(serde.Retry(serde.Pipe(noopValue), backoff.Exponential{}))
		b.ReportAllocs()
		for b.Loop() {
			r, _ := d.Deserialize(ctx, m, benchRecord)
			sinkValue = r.Value
		}
	})
	b.Run("pointer/bare", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			sinkPtr, _ = noopPointer.Deserialize(ctx, m, benchRecord)
		}
	})
	b.Run("pointer/decorated", func(b *testing.B) {
		d := serde.Handle(serde.Retry(serde.Pipe(noopPointer), backoff.Exponential{}))
		b.ReportAllocs()
		for b.Loop() {
			r, _ := d.Deserialize(ctx, m, benchRecord)
			sinkPtr = r.Value
		}
	})
}
