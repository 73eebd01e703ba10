package avro_test

import (
	"context"
	"strings"
	"testing"

	hamba "github.com/hamba/avro/v2"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// BenchmarkDecode compares the bare hamba/avro Unmarshal of a ~200-byte
// record with Handle(Retry(Pipe(avro deserializer))) on the same bytes
// (schema cached: the steady state).
func BenchmarkDecode(b *testing.B) {
	sreg := srtest.New(b)
	id := sreg.Register(b, subject("bench"), orderV2)
	reg := newRegistry(b, sreg)
	v := Order{ID: "ord-2024-000042", Amount: 123456, Currency: "EUR",
		Note: strings.Repeat("leave at the front desk, ring twice please. ", 4)}
	data := encode(b, id, orderV2, v)
	schema := hamba.MustParse(orderV2)
	b.Logf("record: %d bytes", len(data))
	ctx := context.Background()

	b.Run("bare", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var o Order
			if err := hamba.Unmarshal(schema, data[5:], &o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("deserializer", func(b *testing.B) {
		var d serde.Deserializer[Order] = must(avro.NewDeserializer[Order](reg, orderV2))
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := d.Deserialize(ctx, meta, data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decorated", func(b *testing.B) {
		d := serde.Handle(serde.Retry(serde.Pipe[Order](must(avro.NewDeserializer[Order](reg, orderV2))), backoff.Exponential{}))
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if r, err := d.Deserialize(ctx, meta, data); err != nil || !r.OK() {
				b.Fatal(err, r.Failure)
			}
		}
	})
}
