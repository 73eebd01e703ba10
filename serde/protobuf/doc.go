// Package protobuf reads Protobuf records in the wire format of a
// Confluent-compatible schema registry into generated Go types
// (google.golang.org/protobuf). [Deserializer] is a codec for package
// serde: it composes with serde.Pipe, Retry and Handle, and plugs into
// consumer.Config.Value.
//
//	reg, err := registry.New("https://registry:8081")
//	orders, err := protobuf.NewDeserializer[*orderpb.Order](reg)
//	c, err := consumer.New(consumer.Config[[]byte, *orderpb.Order]{..., Value: orders})
//
// Without generated types, [JSONDeserializer] decodes each record with its
// writer schema into the JSON of its message (protojson), for programs
// that forward or index records they have no Go types for.
//
// # Wire format
//
// A 0x00 magic byte, the schema id as 4 big-endian bytes, the message
// indexes, then the Protobuf binary. The message indexes are the path of
// the record's message type in the schema's file (the first top-level
// message is [0], the second message nested in it [0, 1]), written as a
// count and the indexes, each a zigzag varint; the single byte 0 stands
// for [0]. [ParseWire] and [AppendWire] read and write the header.
//
// # Schemas
//
// The writer schema of a record is fetched once per id through the shared
// registry client of package serde/registry (its cache and circuit breaker;
// an avro.Registry's Registry field shares them), with every schema it
// references (imports registered under their own subjects), and compiled
// with bufbuild/protocompile, the compiler of the buf tools: a pure-Go,
// maintained protoc. A schema may be .proto text (what Confluent's Java
// and Go serializers register) or a base64 FileDescriptorProto (what the
// Python serializer registers); the well-known types
// (google/protobuf/*.proto) are built in; nothing else is read. A record
// whose message indexes name another message than T's (a shared topic) is
// an [*UnknownTypeError].
//
// # Errors
//
// Every error is a *serde.Error with stage "protobuf" (serde.StageOf),
// marked with its class (package failure):
//
//	error                    errors.Is         class      when
//	*WireError               ErrNotFramed      permanent  no magic byte, too short, bad message indexes
//	*UnknownSchemaError      ErrUnknownSchema  permanent  the registry has no such id, or a reference is gone
//	*UnknownTypeError        ErrUnknownType    permanent  the indexes name another message than T's, or none
//	*SchemaError                               permanent  not PROTOBUF, or the file (or an import) does not compile
//	*DecodeError                               permanent  not a valid encoding of the message
//	*registry.RegistryError  registry.ErrBreakerOpen  transient  unreachable, timeout, 5xx, 429; breaker open
//
// A registry failure while fetching a reference is transient too, and is
// not remembered: the schema is compiled once the registry answers.
//
// # Limits
//
// A schema may pull in at most 256 files through references nested at most
// 16 deep. Decoding allocates in proportion to the record: Protobuf's
// lengths are checked against the bytes that remain.
package protobuf
