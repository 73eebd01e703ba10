package protobuf

import (
	"context"
	"errors"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// JSONDeserializer decodes Protobuf records in the wire format into JSON
// without generated types: the writer schema, compiled from the registry
// (references included), describes the message, and the value is written
// with protojson (field names as in the .proto, enums by name, 64-bit
// integers as strings, bytes as base64, fields at their default written
// too, so that every document has every field). It serves programs that forward
// or index records they have no Go types for, such as antidote run. It
// implements serde.Deserializer[[]byte] and is safe for concurrent use.
//
// With a message name, a record of any other message fails with an
// [*UnknownTypeError], as with [Deserializer]; without one, any message
// of a registered schema is decoded.
type JSONDeserializer struct {
	name  protoreflect.FullName // "" for any message
	files fileCache
	opts  protojson.MarshalOptions
}

// NewJSONDeserializer returns a deserializer into JSON that looks schemas
// up in reg; message, if not empty, is the full name of the only message
// accepted (acme.Order).
func NewJSONDeserializer(reg *registry.Registry, message string) (*JSONDeserializer, error) {
	if reg == nil {
		return nil, errors.New("protobuf: nil *registry.Registry")
	}
	if message != "" && !protoreflect.FullName(message).IsValid() {
		return nil, errors.New("protobuf: " + message + " is not a message's full name (package.Message)")
	}
	return &JSONDeserializer{
		name:  protoreflect.FullName(message),
		files: fileCache{reg: reg},
		opts:  protojson.MarshalOptions{UseProtoNames: true, EmitUnpopulated: true},
	}, nil
}

// Name returns "protobuf", the stage name in errors and dead-letter headers.
func (*JSONDeserializer) Name() string { return stage }

// Deserialize decodes data into the JSON of its message.
func (d *JSONDeserializer) Deserialize(ctx context.Context, m serde.Meta, data []byte) ([]byte, error) {
	id, indexes, payload, err := ParseWire(data)
	if err != nil {
		return nil, wrap(m, failure.Permanent(err))
	}
	fd, err := d.files.file(ctx, id)
	if err != nil {
		return nil, wrap(m, err)
	}
	md := messageAt(fd, indexes)
	if md == nil {
		return nil, wrap(m, failure.Permanent(&UnknownTypeError{ID: id, Indexes: indexes}))
	}
	if d.name != "" && md.FullName() != d.name {
		return nil, wrap(m, failure.Permanent(&UnknownTypeError{ID: id, Name: string(md.FullName()), Indexes: indexes}))
	}
	v := dynamicpb.NewMessage(md)
	if err := proto.Unmarshal(payload, v); err != nil {
		return nil, wrap(m, failure.Permanent(&DecodeError{ID: id, Name: string(md.FullName()), Reason: err.Error()}))
	}
	out, err := d.opts.Marshal(v)
	if err != nil {
		// Invalid UTF-8 in a string field, say: the record's fault.
		return nil, wrap(m, failure.Permanent(&DecodeError{ID: id, Name: string(md.FullName()), Reason: err.Error()}))
	}
	return out, nil
}
