// Package framed reads record bytes in the schema registry's wire format
// (a magic byte 0, the writer schema's id as 4 big-endian bytes, the
// payload) and decodes them into JSON with the writer schema from a
// Confluent-compatible registry: Avro, JSON Schema and Protobuf.
// antidote ui and antidote group rescue decode with it (--registry).
//
// Record bytes are hostile input. The JSON a [Decoder] returns is escaped
// for neither a terminal nor a page: its caller does that.
package framed

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
	"github.com/antidote-kafka/antidote/serde/protobuf"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// headerLen is the length of the wire format's header: the magic byte and
// the schema id.
const headerLen = 5

// SchemaID returns the schema id of bytes in the wire format, and false
// when b is too short or does not start with the magic byte 0.
func SchemaID(b []byte) (int, bool) {
	if len(b) < headerLen || b[0] != 0 {
		return 0, false
	}
	return int(b[1])<<24 | int(b[2])<<16 | int(b[3])<<8 | int(b[4]), true
}

// Payload returns what follows the header of bytes in the wire format
// (for Protobuf, the message indexes, then the message), or b itself when
// it is not in it.
func Payload(b []byte) []byte {
	if _, ok := SchemaID(b); !ok {
		return b
	}
	return b[headerLen:]
}

// A Value is bytes in the wire format, decoded.
type Value struct {
	// ID is the writer schema's id.
	ID int
	// Format is the schema's: Avro, JSON Schema or Protobuf.
	Format string
	// JSON is the record as one line of JSON.
	JSON string
}

// A Decoder decodes bytes in the wire format with the writer schemas of a
// registry, which it fetches once per id. It is safe for concurrent use.
type Decoder struct {
	reg *registry.Registry
	js  *jsonschema.Deserializer[json.RawMessage]
	pb  *protobuf.JSONDeserializer
}

// New returns a decoder that looks schemas up in reg.
func New(reg *registry.Registry) (*Decoder, error) {
	js, err := jsonschema.NewDeserializer[json.RawMessage](reg)
	if err != nil {
		return nil, err
	}
	pb, err := protobuf.NewJSONDeserializer(reg, "")
	if err != nil {
		return nil, err
	}
	return &Decoder{reg: reg, js: js, pb: pb}, nil
}

// Decode decodes b. It returns [ErrNotFramed] when b is not in the wire
// format; otherwise an error that says why the schema could not be had or
// the payload does not decode with it, the schema id first. ctx bounds the
// registry requests.
func (d *Decoder) Decode(ctx context.Context, b []byte) (Value, error) {
	id, ok := SchemaID(b)
	if !ok {
		return Value{}, ErrNotFramed
	}
	s, err := d.reg.Schema(ctx, id)
	if err != nil {
		return Value{ID: id}, fmt.Errorf("schema %d: %w", id, err)
	}
	v := Value{ID: id}
	var out []byte
	switch s.Type {
	case sr.TypeAvro:
		v.Format = "Avro"
		out, err = avroJSON(s, b[headerLen:])
	case sr.TypeJSON:
		v.Format = "JSON Schema"
		var raw json.RawMessage
		if raw, err = d.js.Deserialize(ctx, serde.Meta{}, b); err == nil {
			out, err = compact(raw)
		}
	case sr.TypeProtobuf:
		v.Format = "Protobuf"
		if out, err = d.pb.Deserialize(ctx, serde.Meta{}, b); err == nil {
			out, err = compact(out)
		}
	default:
		return v, fmt.Errorf("schema %d is of type %s, which is not decoded", id, s.Type)
	}
	if err != nil {
		// The codecs' errors are staged for dead-letter headers
		// ("serde: jsonschema: ..."): what they wrap says enough here.
		if se, ok := errors.AsType[*serde.Error](err); ok {
			err = se.Err
		}
		return v, fmt.Errorf("schema %d (%s): %w", id, v.Format, err)
	}
	v.JSON = string(out)
	return v, nil
}

// avroJSON decodes an Avro payload with its writer schema into JSON, with
// the bounds of serde/avro: memory bounded by the payload's size, a payload
// cut short refused, and so is a schema whose arrays could claim elements
// that take no bytes.
func avroJSON(s sr.Schema, payload []byte) ([]byte, error) {
	v, err := avro.DecodeGeneric(s.Schema, payload)
	if err != nil {
		return nil, err
	}
	// The caller escapes what it shows: no \u003c here.
	var j bytes.Buffer
	enc := json.NewEncoder(&j)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSpace(j.Bytes()), nil
}

// compact is JSON on one line.
func compact(b []byte) ([]byte, error) {
	var out bytes.Buffer
	if err := json.Compact(&out, b); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}
