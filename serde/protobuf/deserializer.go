package protobuf

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"

	"github.com/bufbuild/protocompile"
	"github.com/twmb/franz-go/pkg/sr"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/descriptorpb"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// Limits on what one schema may pull in through its references.
const (
	maxDepth = 16  // nesting of references
	maxFiles = 256 // files in all
)

// Deserializer decodes Protobuf records in the wire format into a T, a
// generated message type (a pointer, such as *orderpb.Order). It
// implements serde.Deserializer[T] and is safe for concurrent use.
//
// The writer schema of each record (its id, and the message indexes that
// name one message of the file) is compiled once per id, with its
// references resolved through the registry; the message it names must be
// T's message (by full name), or the record fails with an
// [*UnknownTypeError]. Protobuf's own rules make an older or newer writer
// of the same message readable: unknown fields are kept, missing ones
// take their defaults.
type Deserializer[T proto.Message] struct {
	name  protoreflect.FullName
	new   func() T
	files fileCache
}

// fileCache compiles the schema of each id once.
type fileCache struct {
	reg   *registry.Registry
	files sync.Map // int → *compiled
}

// compiled is the file of one schema id, or why there is none.
type compiled struct {
	file protoreflect.FileDescriptor
	err  error
}

// NewDeserializer returns a deserializer of T that looks schemas up in
// reg (the shared client of package serde/registry; an avro.Registry's
// Registry field shares its cache and breaker).
func NewDeserializer[T proto.Message](reg *registry.Registry) (*Deserializer[T], error) {
	if reg == nil {
		return nil, errors.New("protobuf: nil *registry.Registry")
	}
	var zero T
	m := zero.ProtoReflect()
	return &Deserializer[T]{
		files: fileCache{reg: reg},
		name:  m.Descriptor().FullName(),
		new:   func() T { return m.New().Interface().(T) },
	}, nil
}

// Name returns "protobuf", the stage name in errors and dead-letter headers.
func (*Deserializer[T]) Name() string { return stage }

// Deserialize decodes data. See the package documentation for its errors.
func (d *Deserializer[T]) Deserialize(ctx context.Context, m serde.Meta, data []byte) (T, error) {
	var zero T
	id, indexes, payload, err := ParseWire(data)
	if err != nil {
		return zero, wrap(m, failure.Permanent(err))
	}
	fd, err := d.files.file(ctx, id)
	if err != nil {
		return zero, wrap(m, err)
	}
	md := messageAt(fd, indexes)
	if md == nil {
		return zero, wrap(m, failure.Permanent(&UnknownTypeError{ID: id, Indexes: indexes}))
	}
	if md.FullName() != d.name {
		return zero, wrap(m, failure.Permanent(&UnknownTypeError{ID: id, Name: string(md.FullName()), Indexes: indexes}))
	}
	v := d.new()
	if err := proto.Unmarshal(payload, v); err != nil {
		return zero, wrap(m, failure.Permanent(&DecodeError{ID: id, Name: string(d.name), Reason: err.Error()}))
	}
	return v, nil
}

// messageAt returns the message that indexes name in fd, or nil.
func messageAt(fd protoreflect.FileDescriptor, indexes []int) protoreflect.MessageDescriptor {
	var md protoreflect.MessageDescriptor
	msgs := fd.Messages()
	for _, i := range indexes {
		if i >= msgs.Len() {
			return nil
		}
		md = msgs.Get(i)
		msgs = md.Messages()
	}
	return md
}

// file returns the compiled file of schema id, compiling it once. A
// registry failure is not remembered: it is transient.
func (d *fileCache) file(ctx context.Context, id int) (protoreflect.FileDescriptor, error) {
	if c, ok := d.files.Load(id); ok {
		c := c.(*compiled)
		return c.file, c.err
	}
	fd, err := compileID(ctx, d.reg, id)
	if err != nil && !failure.IsPermanent(err) {
		return nil, err
	}
	c, _ := d.files.LoadOrStore(id, &compiled{file: fd, err: err})
	return c.(*compiled).file, c.(*compiled).err
}

// source is one file of a schema: .proto text, or a FileDescriptorProto
// (what Confluent's serializers of other languages may register, base64).
type source struct {
	text  string
	proto *descriptorpb.FileDescriptorProto
}

// compileID fetches schema id and every file it references, and compiles
// them. Nothing is read but what the registry returns, and the standard
// imports (google/protobuf/*.proto).
func compileID(ctx context.Context, reg *registry.Registry, id int) (fd protoreflect.FileDescriptor, err error) {
	fail := func(reason string) error {
		return failure.Permanent(&SchemaError{ID: id, Reason: reason})
	}
	defer func() {
		if p := recover(); p != nil {
			fd, err = nil, fail(fmt.Sprintf("panic compiling it: %v", p))
		}
	}()
	s, err := reg.Schema(ctx, id)
	if err != nil {
		if errors.Is(err, registry.ErrUnknownSchema) {
			return nil, failure.Permanent(&UnknownSchemaError{ID: id})
		}
		return nil, err
	}
	if s.Type != sr.TypeProtobuf {
		return nil, fail("schema type is " + s.Type.String() + ", not PROTOBUF")
	}
	files := make(map[string]source)
	main := "antidote-schema-" + strconv.Itoa(id) + ".proto"
	if src := parseSource(s.Schema); src.proto != nil {
		main = src.proto.GetName()
		files[main] = src
	} else {
		files[main] = src
	}
	if err := collect(ctx, reg, id, s.References, files, 1); err != nil {
		return nil, err
	}
	c := protocompile.Compiler{
		Resolver: protocompile.WithStandardImports(protocompile.ResolverFunc(func(path string) (protocompile.SearchResult, error) {
			src, ok := files[path]
			switch {
			case !ok:
				return protocompile.SearchResult{}, fmt.Errorf("%s: not a reference of the schema", path)
			case src.proto != nil:
				return protocompile.SearchResult{Proto: src.proto}, nil
			}
			return protocompile.SearchResult{Source: strings.NewReader(src.text)}, nil
		})),
		MaxParallelism: 1,
	}
	out, err := c.Compile(ctx, main)
	if err != nil {
		return nil, fail(err.Error())
	}
	return out[0], nil
}

// collect adds the files that refs name, and theirs, to files.
func collect(ctx context.Context, reg *registry.Registry, id int, refs []sr.SchemaReference, files map[string]source, depth int) error {
	for _, ref := range refs {
		if _, ok := files[ref.Name]; ok {
			continue
		}
		if depth > maxDepth || len(files) >= maxFiles {
			return failure.Permanent(&SchemaError{ID: id, Reason: "too many nested references"})
		}
		s, err := reg.Reference(ctx, ref)
		if err != nil {
			if errors.Is(err, registry.ErrUnknownSchema) {
				return failure.Permanent(&UnknownSchemaError{ID: id, Reference: ref.Subject})
			}
			return err
		}
		files[ref.Name] = parseSource(s.Schema)
		if err := collect(ctx, reg, id, s.References, files, depth+1); err != nil {
			return err
		}
	}
	return nil
}

// parseSource tells a base64 FileDescriptorProto from .proto text.
func parseSource(schema string) source {
	if b, err := base64.StdEncoding.DecodeString(strings.TrimSpace(schema)); err == nil {
		fdp := new(descriptorpb.FileDescriptorProto)
		if proto.Unmarshal(b, fdp) == nil && fdp.GetName() != "" {
			fillJSONNames(fdp.GetMessageType(), fdp.GetExtension())
			return source{proto: fdp}
		}
	}
	return source{text: schema}
}

// wrap names the stage of err, for serde.StageOf and dead-letter headers.
func wrap(m serde.Meta, err error) error {
	return &serde.Error{Stage: stage, Part: m.Part, Err: err}
}

// fillJSONNames sets the JSON name of every field that has none, as protoc
// does: descriptors serialized by Python's runtime omit them, and the
// compiler would read each as a custom empty name.
func fillJSONNames(msgs []*descriptorpb.DescriptorProto, exts []*descriptorpb.FieldDescriptorProto) {
	for _, f := range exts {
		if f.JsonName == nil {
			f.JsonName = proto.String(jsonName(f.GetName()))
		}
	}
	for _, m := range msgs {
		for _, f := range m.GetField() {
			if f.JsonName == nil {
				f.JsonName = proto.String(jsonName(f.GetName()))
			}
		}
		fillJSONNames(m.GetNestedType(), m.GetExtension())
	}
}

// jsonName is protoc's default JSON name of a field: lower camel case,
// without underscores ("order_id" → "orderId").
func jsonName(field string) string {
	var b strings.Builder
	up := false
	for _, r := range field {
		switch {
		case r == '_':
			up = true
		case up:
			b.WriteRune(unicode.ToUpper(r))
			up = false
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}
