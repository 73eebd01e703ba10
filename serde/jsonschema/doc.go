// Package jsonschema reads and writes JSON records in the wire format of a
// Confluent-compatible schema registry: a 0x00 magic byte, the schema id as
// 4 big-endian bytes, then the JSON text. Each record is validated against
// the JSON Schema registered under its id, then decoded into a T with
// encoding/json. [Deserializer] and [Serializer] are codecs for package
// serde: they compose with serde.Pipe, Retry and Handle, and plug into
// consumer.Config.Value.
//
//	reg, err := registry.New("https://registry:8081")
//	orders, err := jsonschema.NewDeserializer[Order](reg)
//	c, err := consumer.New(consumer.Config[[]byte, Order]{..., Value: orders})
//
// The registry client is package serde/registry's, shared with the other
// formats: an avro.Registry's Registry field shares its schema cache and
// circuit breaker, so that one outage opens one breaker. A schema is
// fetched and compiled once per id.
//
// Validation uses santhosh-tekuri/jsonschema v6: a maintained, pure-Go
// implementation of every JSON Schema draft from 4 to 2020-12 (a schema's
// $schema picks its draft, 2020-12 otherwise) that passes the official
// test suite and reports where a value fails, in the instance and in the
// schema. Compiling a schema loads nothing: a $ref to a file or a URL is a
// [*SchemaError], never a read.
//
// # Errors
//
// Every error is a *serde.Error with stage "jsonschema" (serde.StageOf),
// marked with its class (package failure):
//
//	error                    errors.Is         class      when
//	*WireError               ErrNotFramed      permanent  no 0x00 magic byte, or shorter than 5 bytes
//	*UnknownSchemaError      ErrUnknownSchema  permanent  the registry has no such id
//	*SchemaError                               permanent  registry schema unusable (not JSON Schema, references)
//	*DecodeError                               permanent  not JSON, trailing data, or JSON that does not fit T
//	*ValidationError         ErrInvalid        permanent  fails its schema: Path names the failing value
//	*registry.RegistryError  registry.ErrBreakerOpen  transient  unreachable, timeout, 5xx, 429; breaker open
//
// A [*ValidationError] names the first failing value as a JSON pointer
// (Path, "/items/1/qty") and the failing keyword in the schema (Keyword,
// "/properties/items/items/properties/qty/minimum"). Both come from the
// record, so they are made printable and bounded (256 bytes), as is Reason.
//
// # Limits
//
// Schema references are reported as [*SchemaError]. The payload is parsed
// twice (once for validation, once into T), so one record costs about
// twice its size in memory, plus T.
package jsonschema
