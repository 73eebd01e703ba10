package jsonschema

import (
	"errors"
	"fmt"
	"strconv"
)

var (
	// ErrNotFramed matches (errors.Is) a [*WireError]: the bytes are not in
	// the schema-registry wire format (no 0x00 magic byte, or shorter than
	// the 5-byte header). Permanent.
	ErrNotFramed = errors.New("jsonschema: not in the schema-registry wire format")

	// ErrUnknownSchema matches (errors.Is) an [*UnknownSchemaError].
	// Permanent.
	ErrUnknownSchema = errors.New("jsonschema: unknown schema id")

	// ErrInvalid matches (errors.Is) a [*ValidationError]: the JSON does
	// not validate against its registered schema. Permanent.
	ErrInvalid = errors.New("jsonschema: invalid against its schema")
)

// stage is the name of this package's codec in serde errors and dead-letter
// headers.
const stage = "jsonschema"

// maxPath bounds the path in a [*ValidationError]: it is built from the
// record's own keys, which are hostile input.
const maxPath = 256

// WireError reports bytes that are not in the wire format. It matches
// [ErrNotFramed].
type WireError struct {
	// Len is the length of the data.
	Len int
	// Magic is the first byte, if Len > 0.
	Magic byte
}

// Error returns e.g. "jsonschema: not in the schema-registry wire format: magic byte 0x7b, want 0x00".
func (e *WireError) Error() string {
	if e.Len > 0 && e.Magic != 0 {
		return fmt.Sprintf("%v: magic byte 0x%02x, want 0x00", ErrNotFramed, e.Magic)
	}
	return fmt.Sprintf("%v: %d bytes, want at least 5", ErrNotFramed, e.Len)
}

// Is reports whether target is [ErrNotFramed].
func (e *WireError) Is(target error) bool { return target == ErrNotFramed }

// UnknownSchemaError reports a schema id the registry does not know. It
// matches [ErrUnknownSchema].
type UnknownSchemaError struct {
	// ID is the schema id read from the record.
	ID int
}

// Error returns "jsonschema: unknown schema id 42".
func (e *UnknownSchemaError) Error() string {
	return ErrUnknownSchema.Error() + " " + strconv.Itoa(e.ID)
}

// Is reports whether target is [ErrUnknownSchema].
func (e *UnknownSchemaError) Is(target error) bool { return target == ErrUnknownSchema }

// SchemaError reports a registered schema this package cannot use: not a
// JSON schema, not valid, or with references. Permanent.
type SchemaError struct {
	// ID is the schema id.
	ID int
	// Reason says what is wrong.
	Reason string
}

// Error returns "jsonschema: schema id 7 unusable: <Reason>".
func (e *SchemaError) Error() string {
	return "jsonschema: schema id " + strconv.Itoa(e.ID) + " unusable: " + e.Reason
}

// ValidationError reports a record that does not validate against its
// registered schema. It names the first failing location. It matches
// [ErrInvalid].
type ValidationError struct {
	// ID is the schema id.
	ID int
	// Path is the JSON pointer of the failing value in the record ("" for
	// the whole record, "/items/0/price"), at most 256 bytes.
	Path string
	// Keyword is the JSON pointer of the failing keyword in the schema,
	// e.g. "/properties/items/items/properties/price/minimum".
	Keyword string
	// Reason is the validator's explanation.
	Reason string
}

// Error returns e.g. `jsonschema: schema id 7: "/items/0/price": minimum: got -1, want 0`.
func (e *ValidationError) Error() string {
	return fmt.Sprintf("jsonschema: schema id %d: %q: %s", e.ID, e.Path, e.Reason)
}

// Is reports whether target is [ErrInvalid].
func (e *ValidationError) Is(target error) bool { return target == ErrInvalid }

// DecodeError reports a payload that is not JSON, or valid JSON that does
// not fit the Go type. Permanent.
type DecodeError struct {
	// ID is the schema id.
	ID int
	// Reason is the JSON decoder's explanation.
	Reason string
}

// Error returns "jsonschema: decoding with schema id 7: <Reason>".
func (e *DecodeError) Error() string {
	return fmt.Sprintf("jsonschema: decoding with schema id %d: %s", e.ID, e.Reason)
}

var (
	_ error = (*WireError)(nil)
	_ error = (*UnknownSchemaError)(nil)
	_ error = (*SchemaError)(nil)
	_ error = (*ValidationError)(nil)
	_ error = (*DecodeError)(nil)
)
