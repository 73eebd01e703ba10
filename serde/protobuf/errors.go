package protobuf

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrNotFramed matches (errors.Is) a [*WireError]: the bytes are not in
	// the schema-registry wire format for Protobuf. Permanent.
	ErrNotFramed = errors.New("protobuf: not in the schema-registry wire format")

	// ErrUnknownSchema matches (errors.Is) an [*UnknownSchemaError].
	// Permanent.
	ErrUnknownSchema = errors.New("protobuf: unknown schema")

	// ErrUnknownType matches (errors.Is) an [*UnknownTypeError]. Permanent.
	ErrUnknownType = errors.New("protobuf: unknown writer type")
)

// stage is the name of this package's codec in serde errors and dead-letter
// headers.
const stage = "protobuf"

// WireError reports bytes that are not in the wire format. It matches
// [ErrNotFramed].
type WireError struct {
	// Len is the length of the data.
	Len int
	// Magic is the first byte, when it is not 0x00.
	Magic byte
	// Reason says what is wrong.
	Reason string
}

// Error returns e.g. "protobuf: not in the schema-registry wire format: no 0x00 magic byte (0x7b)".
func (e *WireError) Error() string {
	if e.Magic != 0 {
		return fmt.Sprintf("%v: %s (0x%02x)", ErrNotFramed, e.Reason, e.Magic)
	}
	return fmt.Sprintf("%v: %s (%d bytes)", ErrNotFramed, e.Reason, e.Len)
}

// Is reports whether target is [ErrNotFramed].
func (e *WireError) Is(target error) bool { return target == ErrNotFramed }

// UnknownSchemaError reports a schema id, or a schema a reference names,
// that the registry does not know. It matches [ErrUnknownSchema].
type UnknownSchemaError struct {
	// ID is the schema id read from the record.
	ID int
	// Reference is the subject of a missing reference, "" if the id itself
	// is unknown.
	Reference string
}

// Error returns "protobuf: unknown schema id 42".
func (e *UnknownSchemaError) Error() string {
	if e.Reference != "" {
		return fmt.Sprintf("%v id %d: its reference %q is missing", ErrUnknownSchema, e.ID, e.Reference)
	}
	return ErrUnknownSchema.Error() + " id " + strconv.Itoa(e.ID)
}

// Is reports whether target is [ErrUnknownSchema].
func (e *UnknownSchemaError) Is(target error) bool { return target == ErrUnknownSchema }

// UnknownTypeError reports a writer message type that is not the Go type
// of the deserializer (another message of a shared topic), or message
// indexes that name no message of the schema. It matches [ErrUnknownType].
type UnknownTypeError struct {
	// ID is the writer schema id.
	ID int
	// Name is the writer message's full name, "" if the indexes name none.
	Name string
	// Indexes are the record's message indexes.
	Indexes []int
}

// Error returns "protobuf: unknown writer type acme.Refund (schema id 7)".
func (e *UnknownTypeError) Error() string {
	if e.Name == "" {
		return fmt.Sprintf("%v: message indexes %v name no message of schema id %d", ErrUnknownType, e.Indexes, e.ID)
	}
	return fmt.Sprintf("%v %s (schema id %d)", ErrUnknownType, e.Name, e.ID)
}

// Is reports whether target is [ErrUnknownType].
func (e *UnknownTypeError) Is(target error) bool { return target == ErrUnknownType }

// IsUnknownType reports whether err's tree holds an [*UnknownTypeError].
func IsUnknownType(err error) bool { return errors.Is(err, ErrUnknownType) }

// SchemaError reports a registered schema this package cannot use: not
// Protobuf, or a file (or one it imports) that does not compile. Permanent.
type SchemaError struct {
	// ID is the schema id.
	ID int
	// Reason says what is wrong.
	Reason string
}

// Error returns "protobuf: schema id 7 unusable: <Reason>".
func (e *SchemaError) Error() string {
	return "protobuf: schema id " + strconv.Itoa(e.ID) + " unusable: " + e.Reason
}

// DecodeError reports a payload that is not a valid encoding of the
// message. Permanent.
type DecodeError struct {
	// ID is the writer schema id.
	ID int
	// Name is the message's full name.
	Name string
	// Reason is the Protobuf library's explanation.
	Reason string
}

// Error returns "protobuf: decoding acme.Order (schema id 7): <Reason>".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("protobuf: decoding %s (schema id %d): %s", e.Name, e.ID, e.Reason)
}

var (
	_ error = (*WireError)(nil)
	_ error = (*UnknownSchemaError)(nil)
	_ error = (*UnknownTypeError)(nil)
	_ error = (*SchemaError)(nil)
	_ error = (*DecodeError)(nil)
)
