package framed

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
)

// newDecoder is a decoder on an in-process registry holding an Avro, a JSON
// Schema and a Protobuf schema, and an Avro schema of nested arrays of
// nulls, with their ids in that order.
func newDecoder(t testing.TB) (*Decoder, []int) {
	_, reg := clitest.Registry(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var ids []int
	for _, s := range []sr.Schema{
		{Type: sr.TypeAvro, Schema: `{"type":"record","name":"R","fields":[{"name":"s","type":"string"},{"name":"a","type":{"type":"array","items":"long"}}]}`},
		{Type: sr.TypeJSON, Schema: `{"type":"object"}`},
		{Type: sr.TypeProtobuf, Schema: "syntax = \"proto3\";\nmessage M {\n  string s = 1;\n}\n"},
		// Nested arrays of nulls: a few bytes could claim millions of them.
		{Type: sr.TypeAvro, Schema: `{"type":"record","name":"Q","fields":[{"name":"q","type":{"type":"array","items":{"type":"array","items":"null"}}}]}`},
	} {
		id, err := reg.Register(ctx, "subject-"+s.Type.String(), s)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	d, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	return d, ids
}

func wire(id int, payload ...byte) []byte {
	return append(binary.BigEndian.AppendUint32([]byte{0}, uint32(id)), payload...)
}

// FuzzDecode: Decode must not panic, nor allocate what a length prefix
// claims; what it decodes is one line of valid JSON.
func FuzzDecode(f *testing.F) {
	d, ids := newDecoder(f)
	avroID, jsonID, protoID := ids[0], ids[1], ids[2]
	for _, seed := range [][]byte{
		nil, {0}, {0, 0, 0, 0}, []byte(`{"not":"framed"}`),
		wire(avroID, 2, 'x', 2, 4, 0),           // s "x", a [2]
		wire(avroID, 2, 'x'),                    // cut before a
		wire(avroID, 0xfe, 0xff, 0xff, 0x0f),    // s claims 2 GiB
		wire(avroID, 0, 0xfe, 0xff, 0xff, 0x0f), // a claims 2^31 elements
		wire(jsonID, []byte(`{"a":[1,{"b":"\u001b"}]}`)...),
		wire(jsonID, []byte(`{"a":`)...),
		wire(protoID, 0, 0x0a, 1, 'y'),
		wire(protoID, 0, 0x0a, 0x7f),
		wire(protoID, 2, 0x7f, 0x7f, 0x0a),
		wire(999, 1, 2, 3),
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		v, err := d.Decode(ctx, b)
		if _, framed := SchemaID(b); !framed {
			if !errors.Is(err, ErrNotFramed) {
				t.Fatalf("bytes %x not in the wire format: %v, want ErrNotFramed", b, err)
			}
			return
		}
		if err != nil {
			return
		}
		if !json.Valid([]byte(v.JSON)) || strings.Contains(v.JSON, "\n") {
			t.Fatalf("bytes %x decode to %q: want one line of JSON", b, v.JSON)
		}
	})
}

// TestDecode: each format decodes to its JSON; a payload cut short, which
// the Avro library reads as zero values, is refused.
func TestDecode(t *testing.T) {
	d, ids := newDecoder(t)
	ctx := context.Background()
	for _, tc := range []struct {
		b          []byte
		json, fmt  string
		errContain string
	}{
		{b: wire(ids[0], 2, 'x', 2, 4, 0), json: `{"a":[2],"s":"x"}`, fmt: "Avro"},
		{b: wire(ids[0], 2, 'x'), fmt: "Avro", errContain: "truncated"},
		{b: wire(ids[0], 0xfe, 0xff, 0xff, 0x0f), fmt: "Avro", errContain: "size"},
		{b: wire(ids[1], []byte(` {"a": [1, 2]} `)...), json: `{"a":[1,2]}`, fmt: "JSON Schema"},
		{b: wire(ids[2], 0, 0x0a, 1, 'y'), json: `{"s":"y"}`, fmt: "Protobuf"},
		{b: wire(999), errContain: "schema 999: "},
		{b: wire(ids[3], 0xfe, 0xff, 0x07, 0xfe, 0xff, 0x07, 0xfe, 0xff, 0x07), fmt: "Avro", errContain: "take no bytes"},
	} {
		v, err := d.Decode(ctx, tc.b)
		switch {
		case tc.errContain != "" && (err == nil || !strings.Contains(err.Error(), tc.errContain)):
			t.Errorf("%x: %v, want an error with %q", tc.b, err, tc.errContain)
		case tc.errContain == "" && (err != nil || v.JSON != tc.json):
			t.Errorf("%x: %q, %v; want %s", tc.b, v.JSON, err, tc.json)
		case v.Format != tc.fmt:
			t.Errorf("%x: format %q, want %q", tc.b, v.Format, tc.fmt)
		}
	}
}
