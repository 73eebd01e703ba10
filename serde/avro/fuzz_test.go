package avro_test

import (
	"context"
	"testing"

	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// FuzzParseWire: the wire-format parser must not panic.
func FuzzParseWire(f *testing.F) {
	for _, s := range [][]byte{nil, {0}, {0, 0, 0}, {0, 0, 0, 0, 1}, {1, 2, 3, 4, 5, 6}, []byte("kcat string")} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		id, payload, err := avro.ParseWire(data)
		if err == nil && (len(data) < 5 || len(payload) != len(data)-5 || id < 0) {
			t.Fatalf("accepted %x", data)
		}
	})
}

// FuzzDeserialize: decoding arbitrary bytes with a known schema id must not
// panic, allocate without bound, or succeed on garbage silently in a way that
// breaks later decodes. The registry is set up once; each input costs a
// decode (a few microseconds), and the allocation limits keep a hostile
// length from costing more (see the package documentation, "Limits").
func FuzzDeserialize(f *testing.F) {
	sreg := srtest.New(f)
	schema := `{"type":"record","name":"Order","namespace":"com.acme","fields":[
		{"name":"id","type":"string"},{"name":"amount","type":"long"},
		{"name":"tags","type":{"type":"array","items":"string"}},
		{"name":"attrs","type":{"type":"map","values":"bytes"}},
		{"name":"opt","type":["null","double"]}]}`
	id := sreg.Register(f, subject("fuzz"), schema)
	reg := newRegistry(f, sreg)
	type rec struct {
		ID     string            `avro:"id"`
		Amount int64             `avro:"amount"`
		Tags   []string          `avro:"tags"`
		Attrs  map[string][]byte `avro:"attrs"`
		Opt    *float64          `avro:"opt"`
	}
	d := must(avro.NewDeserializer[rec](reg, schema))
	hdr := avro.AppendWire(nil, id)
	good := encode(f, id, schema, rec{ID: "o", Amount: 7, Tags: []string{"a"}, Attrs: map[string][]byte{"k": {1}}})
	seeds := [][]byte{
		nil, {0}, {0, 0, 0}, // empty, 1 byte, 0x00 + short id
		good, good[:len(good)-1],
		append(append([]byte{}, hdr...), 0xfe, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01), // huge string length
		append(append([]byte{}, hdr...), 0x02, 'o', 0x0e, 0xfe, 0xff, 0xff, 0xff, 0x0f),              // huge array count
		append(append([]byte{}, hdr...), 0x01),                                                       // negative length
	}
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 5 && data[0] == 0 {
			// Keep the id known, so that the fuzzer exercises the Avro decoder
			// rather than the registry.
			data = append(append([]byte{}, hdr...), data[5:]...)
		}
		_, _ = d.Deserialize(context.Background(), meta, data)
	})
}
