// Package pills is the list of poison-pill kinds: the values that
// `antidote poison` produces to a topic, and that the randomized fault runs
// (chaos/) mix into their workload. One list, so that both meet the same
// pills.
package pills

import (
	"encoding/binary"
	"math/rand/v2"
	"slices"
)

// Kind is one kind of poison pill.
type Kind struct {
	Name string
	Help string
	// Value returns the i-th pill (0-based); size is the length of a
	// "huge" pill and is ignored by the other kinds. It is deterministic,
	// so that tests can check what was written.
	Value func(i, size int) []byte
}

// Header names the kind of each pill in a header of its record, so that
// pills can be told from real records downstream.
const Header = "x-antidote-poison"

// UnknownSchemaID is a Confluent schema id no registry hands out in
// practice: the largest positive int32.
const UnknownSchemaID = 0x7fffffff

// AvroBody is a small Avro binary record {id: long 42, name: string
// "poison"}, as a producer without a schema registry writes it.
var AvroBody = []byte{0x54, 0x0c, 'p', 'o', 'i', 's', 'o', 'n'}

// ConfluentFrame prefixes body with the Confluent wire format: the 0x00
// magic byte and a 4-byte big-endian schema id.
func ConfluentFrame(id int, body []byte) []byte {
	b := make([]byte, 0, 5+len(body))
	b = binary.BigEndian.AppendUint32(append(b, 0), uint32(id))
	return append(b, body...)
}

var badJSON = []string{
	`{"id": 42, "customer": "c-0042", "amount_cents": 1250`, // cut
	`{"id": 42, "customer": "c-0042",}`,                     // trailing comma
	`{'id': 42, 'customer': 'c-0042'}`,                      // single quotes
	`{"id": NaN}`,                                           // not JSON
	`id=42,customer=c-0042`,                                 // not JSON at all
}

var wrongShapeJSON = []string{
	`{"id": "abc", "customer": "c-0042", "amount_cents": 1250}`, // string into int
	`[{"id": 42}, {"id": 43}]`,                                  // array, not object
	`{"id": 42, "amount_cents": "12.50"}`,                       // string into int
	`"order 42"`,                                                // a string
	`{"id": {"value": 42}}`,                                     // object into int
}

var kinds = []Kind{
	{"garbage", "random binary bytes, as from a misconfigured producer", func(i, _ int) []byte {
		r := rand.New(rand.NewPCG(uint64(i), 0x9e3779b97f4a7c15))
		b := make([]byte, 16+r.IntN(48))
		for j := range b {
			b[j] = byte(r.Uint32())
		}
		b[0] = 0xff // never a valid JSON or Confluent-framed start
		return b
	}},
	{"empty", "a zero-length (non-null) value", func(int, int) []byte { return []byte{} }},
	{"huge", "a valid JSON document of --size bytes", func(_, size int) []byte {
		const head, tail = `{"id":42,"payload":"`, `"}`
		n := max(size, len(head)+len(tail))
		b := make([]byte, n)
		copy(b, head)
		for j := len(head); j < n-len(tail); j++ {
			b[j] = 'x'
		}
		copy(b[n-len(tail):], tail)
		return b
	}},
	{"no-magic", "an Avro body without the Confluent 0x00 magic byte and schema id", func(int, int) []byte {
		return slices.Clone(AvroBody)
	}},
	{"unknown-schema", "Confluent framing with schema id 2147483647, which no registry knows", func(int, int) []byte {
		return ConfluentFrame(UnknownSchemaID, AvroBody)
	}},
	{"truncated-avro", "Confluent framing (schema id 1) with an Avro body cut short", func(int, int) []byte {
		// id 42, then a string that claims 100 bytes and has 3.
		return ConfluentFrame(1, []byte{0x54, 0xc8, 0x01, 'p', 'o', 'i'})
	}},
	{"bad-json", "malformed JSON: cut, trailing comma, single quotes, NaN, key=value", func(i, _ int) []byte {
		return []byte(badJSON[i%len(badJSON)])
	}},
	{"wrong-shape-json", "valid JSON of the wrong shape: string for int, array for object", func(i, _ int) []byte {
		return []byte(wrongShapeJSON[i%len(wrongShapeJSON)])
	}},
	{"truncated-protobuf", "Confluent Protobuf framing (schema id 1, message index 0) with a body cut short", func(int, int) []byte {
		// Field 1, length-delimited, claims 100 bytes and has 3.
		return ConfluentFrame(1, []byte{0x00, 0x0a, 0x64, 'p', 'o', 'i'})
	}},
	{"bad-protobuf-indexes", "Confluent Protobuf framing (schema id 1) whose message-index array is cut short", func(int, int) []byte {
		// The count says 2 indexes (zigzag 4); one follows, then nothing.
		return ConfluentFrame(1, []byte{0x04, 0x02})
	}},
	{"framed-bad-json", "Confluent JSON Schema framing (schema id 1) around malformed JSON", func(i, _ int) []byte {
		return ConfluentFrame(1, []byte(badJSON[i%len(badJSON)]))
	}},
	{"framed-wrong-shape-json", "Confluent JSON Schema framing (schema id 1) around a JSON array where a schema wants an object", func(int, int) []byte {
		return ConfluentFrame(1, []byte(`[{"id": 42}, {"id": 43}]`))
	}},
}

// Kinds returns every kind, in the order `antidote poison --help` lists them.
func Kinds() []Kind { return slices.Clone(kinds) }

// Find returns the kind called name.
func Find(name string) (Kind, bool) {
	for _, k := range kinds {
		if k.Name == name {
			return k, true
		}
	}
	return Kind{}, false
}

// Names returns the names of the kinds, in order.
func Names() []string {
	names := make([]string, len(kinds))
	for i, k := range kinds {
		names[i] = k.Name
	}
	return names
}
