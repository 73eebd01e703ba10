package serde

import (
	"context"
	"strconv"
)

// Part says which part of a record is being read or written.
type Part uint8

const (
	// Key is the record key.
	Key Part = 1
	// Value is the record value.
	Value Part = 2
)

// String returns "key" or "value".
func (p Part) String() string {
	switch p {
	case Key:
		return "key"
	case Value:
		return "value"
	}
	return "Part(" + strconv.Itoa(int(p)) + ")"
}

// Header is one record header.
//
// The layout of Header is fixed: exactly these two fields, in this order, the
// same as franz-go's kgo.RecordHeader. The consumer converts
// []kgo.RecordHeader to []Header without copying (unsafe). Do not add,
// remove or reorder fields.
type Header struct {
	Key   string
	Value []byte
}

// Meta describes the record part being read or written: everything a
// [Deserializer] may need besides the bytes.
type Meta struct {
	// Topic is the record's topic.
	Topic string
	// Part says whether the bytes are the key or the value.
	Part Part
	// Headers are the record's headers. Deserializers must not modify them;
	// serializers may append to them.
	Headers []Header
}

// Header returns the value of the last header named key. Kafka allows
// repeated header keys; the last one wins, as with a map built in order.
func (m *Meta) Header(key string) ([]byte, bool) {
	for i := len(m.Headers) - 1; i >= 0; i-- {
		if m.Headers[i].Key == key {
			return m.Headers[i].Value, true
		}
	}
	return nil, false
}

// A Deserializer turns the bytes of a record key or value into a T.
//
// Contract, for every implementation:
//
//   - Deserialize is safe for concurrent use by many goroutines.
//   - ctx bounds any waiting (a schema-registry lookup, a key service, a
//     retry). When ctx is done, Deserialize returns promptly, with an error.
//   - m is passed by value; its Headers must not be modified.
//   - data is owned by the caller and valid only during the call. An
//     implementation that keeps data, or returns a T that aliases it, must
//     say so in its documentation. The built-in codecs do not alias.
//   - A failure returns a non-nil error, ideally classified (see package
//     failure): permanent when the bytes can never be read, transient when a
//     dependency failed.
type Deserializer[T any] interface {
	Deserialize(ctx context.Context, m Meta, data []byte) (T, error)
}

// DeserializerFunc adapts a function to the [Deserializer] interface.
type DeserializerFunc[T any] func(ctx context.Context, m Meta, data []byte) (T, error)

// Deserialize returns f(ctx, m, data).
func (f DeserializerFunc[T]) Deserialize(ctx context.Context, m Meta, data []byte) (T, error) {
	return f(ctx, m, data)
}

// A Serializer turns a T into the bytes of a record key or value.
//
// Serialize is safe for concurrent use. It may append headers to m.Headers
// (an encryption stage records its key id). The returned bytes belong to the
// caller; they may alias v when v is itself bytes (see [Bytes]).
type Serializer[T any] interface {
	Serialize(ctx context.Context, m *Meta, v T) ([]byte, error)
}

// SerializerFunc adapts a function to the [Serializer] interface.
type SerializerFunc[T any] func(ctx context.Context, m *Meta, v T) ([]byte, error)

// Serialize returns f(ctx, m, v).
func (f SerializerFunc[T]) Serialize(ctx context.Context, m *Meta, v T) ([]byte, error) {
	return f(ctx, m, v)
}

// A Codec is both directions of one format.
type Codec[T any] interface {
	Deserializer[T]
	Serializer[T]
}

// A Stage is one bytes-to-bytes step of a [Pipe]: decryption, decompression,
// stripping an envelope.
//
// Name is short, stable and lower case ("gzip", "aes-gcm"); it names the
// stage in errors and dead-letter headers. Decode follows the [Deserializer]
// contract: concurrent use, ctx, and data owned by the caller and valid only
// during the call. Decode may return a sub-slice of data or a new slice;
// either way the result is only read, never kept, by the next step, except
// that a codec's documentation may say otherwise.
type Stage interface {
	Name() string
	Decode(ctx context.Context, m Meta, data []byte) ([]byte, error)
}

// An EncodeStage is the encoding twin of a [Stage], run by [PipeSerializer].
// Encode may append headers to m.Headers. It may return a sub-slice of data
// or a new slice.
type EncodeStage interface {
	Name() string
	Encode(ctx context.Context, m *Meta, data []byte) ([]byte, error)
}

// A StageCodec is a stage with both directions. The built-in stages are
// StageCodecs.
type StageCodec interface {
	Stage
	EncodeStage
}
