package protobuf

import (
	"context"
	"errors"
	"sync"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
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
	types sync.Map // schema id → resolver of the types its files define
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
	opts := d.opts
	opts.Resolver = d.resolver(id, fd) // a google.protobuf.Any of the schema's own types
	out, err := opts.Marshal(v)
	if err != nil {
		// Invalid UTF-8 in a string field, say: the record's fault.
		return nil, wrap(m, failure.Permanent(&DecodeError{ID: id, Name: string(md.FullName()), Reason: err.Error()}))
	}
	return out, nil
}

// resolver finds the types of schema id's files first, then the linked-in
// ones (the well-known types), for the messages a google.protobuf.Any holds.
func (d *JSONDeserializer) resolver(id int, fd protoreflect.FileDescriptor) typeResolver {
	if r, ok := d.types.Load(id); ok {
		return r.(typeResolver)
	}
	files := new(protoregistry.Files)
	seen := map[string]bool{}
	var add func(f protoreflect.FileDescriptor)
	add = func(f protoreflect.FileDescriptor) {
		if seen[f.Path()] {
			return
		}
		seen[f.Path()] = true
		imports := f.Imports()
		for i := 0; i < imports.Len(); i++ {
			add(imports.Get(i).FileDescriptor)
		}
		_ = files.RegisterFile(f) // a conflict keeps the first
	}
	add(fd)
	r, _ := d.types.LoadOrStore(id, typeResolver{dynamicpb.NewTypes(files)})
	return r.(typeResolver)
}

// typeResolver looks in a schema's own types, then in the global registry.
type typeResolver struct{ own *dynamicpb.Types }

func (r typeResolver) FindMessageByName(n protoreflect.FullName) (protoreflect.MessageType, error) {
	if t, err := r.own.FindMessageByName(n); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByName(n)
}

func (r typeResolver) FindMessageByURL(url string) (protoreflect.MessageType, error) {
	if t, err := r.own.FindMessageByURL(url); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindMessageByURL(url)
}

func (r typeResolver) FindExtensionByName(n protoreflect.FullName) (protoreflect.ExtensionType, error) {
	if t, err := r.own.FindExtensionByName(n); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByName(n)
}

func (r typeResolver) FindExtensionByNumber(m protoreflect.FullName, n protoreflect.FieldNumber) (protoreflect.ExtensionType, error) {
	if t, err := r.own.FindExtensionByNumber(m, n); err == nil {
		return t, nil
	}
	return protoregistry.GlobalTypes.FindExtensionByNumber(m, n)
}
