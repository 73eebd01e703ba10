package protobuf_test

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/protobuf/internal/testpb"
)

// FuzzDeserialize: decoding arbitrary bytes with a known schema id must not
// panic, and every failure is classified.
func FuzzDeserialize(f *testing.F) {
	sreg := srtest.New(f)
	id := registerOrder(f, sreg, false)
	d := must(protobuf.NewDeserializer[*testpb.Order](newRegistry(f, sreg)))
	good := frame(f, id, order())
	for _, s := range [][]byte{nil, {0}, good, good[:len(good)-2], frame(f, id, &testpb.Refund{OrderId: "x"}, 1),
		append(protobuf.AppendWire(nil, id, 0, 0), 0x0a, 0x01, 'a'), append(protobuf.AppendWire(nil, id), 0x1a, 0xff, 0xff, 0xff, 0xff, 0x0f)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 5 && data[0] == 0 {
			data = append(protobuf.AppendWire(nil, id)[:5], data[5:]...) // keep the id known
		}
		v, err := d.Deserialize(context.Background(), meta, data)
		if err != nil {
			if _, ok := failure.MarkOf(err); !ok {
				t.Fatalf("unclassified error: %v", err)
			}
		} else if v == nil {
			t.Fatal("nil message without an error")
		}
	})
}

// FuzzJSONDeserialize: decoding arbitrary bytes into JSON without
// generated types must not panic; every failure is classified, and every
// success is valid JSON.
func FuzzJSONDeserialize(f *testing.F) {
	sreg := srtest.New(f)
	id := registerOrder(f, sreg, false)
	d := must(protobuf.NewJSONDeserializer(newRegistry(f, sreg), ""))
	good := frame(f, id, order())
	for _, s := range [][]byte{nil, {0}, good, good[:len(good)-2], frame(f, id, &testpb.Refund{OrderId: "x"}, 1),
		append(protobuf.AppendWire(nil, id, 0, 0), 0x0a, 0x01, 'a'), append(protobuf.AppendWire(nil, id), 0x0a, 0x02, 0xff, 0xfe)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 5 && data[0] == 0 {
			data = append(protobuf.AppendWire(nil, id)[:5], data[5:]...) // keep the id known
		}
		v, err := d.Deserialize(context.Background(), meta, data)
		if err != nil {
			if _, ok := failure.MarkOf(err); !ok {
				t.Fatalf("unclassified error: %v", err)
			}
		} else if !json.Valid(v) {
			t.Fatalf("invalid JSON: %q", v)
		}
	})
}
