package avro

import (
	"errors"
	"fmt"
	"strconv"

	"github.com/antidote-kafka/antidote/serde/registry"
)

var (
	// ErrNotAvro matches (errors.Is) a [*WireError]: the bytes are not in
	// the Confluent wire format (no 0x00 magic byte, or shorter than the
	// 5-byte header). A string produced by kcat or a console producer is the
	// usual cause. Permanent.
	ErrNotAvro = errors.New("avro: not in the schema-registry wire format")

	// ErrUnknownSchema matches (errors.Is) an [*UnknownSchemaError]: the
	// registry answered that it has no schema with the record's id.
	// Permanent.
	ErrUnknownSchema = errors.New("avro: unknown schema id")

	// ErrUnknownType matches (errors.Is) an [*UnknownTypeError]: the writer
	// schema is a record type this reader has no Go type for. Permanent;
	// see [IsUnknownType] for skipping such records.
	ErrUnknownType = errors.New("avro: unknown writer type")

	// ErrBreakerOpen is the cause of the transient error returned, without
	// asking the registry, while the circuit breaker is open
	// (registry.ErrBreakerOpen). The error carries a failure.RetryAfter
	// hint: the time until the next probe.
	ErrBreakerOpen = registry.ErrBreakerOpen
)

// stage is the name of this package's codec in serde errors and dead-letter
// headers.
const stage = "avro"

// The typed errors below are root causes: they do not unwrap to the
// sentinels (they match them through an Is method) nor to the Avro
// library's error. The dead-letter header "error type" names the root cause
// of a failure, so that it reads "*avro.WireError" rather than
// "*errors.errorString".

// WireError reports bytes that are not in the wire format: magic byte 0x00,
// a 4-byte big-endian schema id, then the Avro binary encoding. It matches
// [ErrNotAvro].
type WireError struct {
	// Len is the length of the data.
	Len int
	// Magic is the first byte, if Len > 0.
	Magic byte
}

// Error returns e.g. "avro: not in the schema-registry wire format: magic byte 0x7b, want 0x00".
func (e *WireError) Error() string {
	if e.Len > 0 && e.Magic != 0 {
		return fmt.Sprintf("%v: magic byte 0x%02x, want 0x00", ErrNotAvro, e.Magic)
	}
	return fmt.Sprintf("%v: %d bytes, want at least 5", ErrNotAvro, e.Len)
}

// Is reports whether target is [ErrNotAvro].
func (e *WireError) Is(target error) bool { return target == ErrNotAvro }

// UnknownSchemaError reports a schema id the registry does not know (HTTP
// 404, error code 40403). It matches [ErrUnknownSchema].
type UnknownSchemaError struct {
	// ID is the schema id read from the record.
	ID int
}

// Error returns "avro: unknown schema id 42".
func (e *UnknownSchemaError) Error() string {
	return ErrUnknownSchema.Error() + " " + strconv.Itoa(e.ID)
}

// Is reports whether target is [ErrUnknownSchema].
func (e *UnknownSchemaError) Is(target error) bool { return target == ErrUnknownSchema }

// UnknownTypeError reports a writer schema whose type this reader has no Go
// type for: a shared topic carrying several record types, of which this
// service handles only some. It matches [ErrUnknownType].
type UnknownTypeError struct {
	// ID is the writer schema id.
	ID int
	// Name is the writer schema's full name, e.g. "com.acme.Refund", or
	// its type ("string", "array") when it is not a named type.
	Name string
}

// Error returns "avro: unknown writer type com.acme.Refund (schema id 7)".
func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("%v %s (schema id %d)", ErrUnknownType, e.Name, e.ID)
}

// Is reports whether target is [ErrUnknownType].
func (e *UnknownTypeError) Is(target error) bool { return target == ErrUnknownType }

// IsUnknownType reports whether err's tree holds an [*UnknownTypeError].
//
// serde has no notion of skipping a record, so a reader of a shared topic
// that wants to ignore the types it does not handle matches this predicate
// where failures are settled (see the package documentation, "Shared
// topics").
func IsUnknownType(err error) bool { return errors.Is(err, ErrUnknownType) }

// ResolveError reports a writer schema of a known type that cannot be
// resolved to the reader schema (an incompatible change: a field removed
// without a default, a type changed). Permanent.
type ResolveError struct {
	// ID is the writer schema id.
	ID int
	// Name is the full name of the type.
	Name string
	// Reason is the Avro library's explanation.
	Reason string
}

// Error returns "avro: schema id 7 (com.acme.Order) does not resolve to the reader schema: <Reason>".
func (e *ResolveError) Error() string {
	return fmt.Sprintf("avro: schema id %d (%s) does not resolve to the reader schema: %s", e.ID, e.Name, e.Reason)
}

// DecodeError reports Avro binary data that does not decode with its writer
// schema: truncated or corrupt bytes. Permanent.
type DecodeError struct {
	// ID is the writer schema id.
	ID int
	// Reason is the Avro library's explanation.
	Reason string
}

// Error returns "avro: decoding with schema id 7: <Reason>".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("avro: decoding with schema id %d: %s", e.ID, e.Reason)
}

// RegistryError reports a failed registry call that may succeed later
// (registry.RegistryError): the registry is unreachable, timed out,
// answered 5xx or 429 (or any error other than "schema not found"), or the
// circuit breaker is open (Err is [ErrBreakerOpen]). It is returned marked
// transient, with failure.RetryAfter when the registry or the breaker gave
// a hint.
type RegistryError = registry.RegistryError

// IsBreakerOpen reports whether err was returned, without a registry call,
// because the circuit breaker is open.
func IsBreakerOpen(err error) bool { return registry.IsBreakerOpen(err) }

// SchemaError reports a schema the registry returned that this package
// cannot use: not Avro, not parseable, or with references. Permanent.
type SchemaError struct {
	// ID is the schema id.
	ID int
	// Reason says what is wrong.
	Reason string
}

// Error returns "avro: schema id 7 unusable: <Reason>".
func (e *SchemaError) Error() string {
	return "avro: schema id " + strconv.Itoa(e.ID) + " unusable: " + e.Reason
}

var (
	_ error = (*WireError)(nil)
	_ error = (*UnknownSchemaError)(nil)
	_ error = (*UnknownTypeError)(nil)
	_ error = (*ResolveError)(nil)
	_ error = (*DecodeError)(nil)
	_ error = (*SchemaError)(nil)
)
