package serde

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"unicode/utf8"
)

// Bytes returns the identity codec for []byte.
//
// Deserialize returns a copy of data (nil for nil, empty for empty): the
// caller's buffer is valid only during the call, and a Result may outlive it.
// Serialize returns v itself, without copying.
func Bytes() Codec[[]byte] { return bytesCodec{} }

type bytesCodec struct{}

func (bytesCodec) Name() string { return "bytes" }

func (bytesCodec) Deserialize(_ context.Context, _ Meta, data []byte) ([]byte, error) {
	return bytes.Clone(data), nil
}

func (bytesCodec) Serialize(_ context.Context, _ *Meta, v []byte) ([]byte, error) {
	return v, nil
}

// A StringOption configures [String].
type StringOption func(*stringCodec)

// ValidUTF8 makes [String] reject bytes (and strings) that are not valid
// UTF-8, with [ErrInvalidUTF8] marked permanent. Optional; by default any
// bytes are accepted, as Go strings allow.
func ValidUTF8() StringOption {
	return func(c *stringCodec) { c.validUTF8 = true }
}

// String returns the codec for string. Deserialize copies data into a new
// string; it never aliases data.
func String(opts ...StringOption) Codec[string] {
	c := stringCodec{}
	for _, o := range opts {
		o(&c)
	}
	return c
}

type stringCodec struct{ validUTF8 bool }

func (stringCodec) Name() string { return "string" }

func (c stringCodec) Deserialize(_ context.Context, m Meta, data []byte) (string, error) {
	if c.validUTF8 && !utf8.Valid(data) {
		return "", permanent("string", m.Part, ErrInvalidUTF8)
	}
	return string(data), nil
}

func (c stringCodec) Serialize(_ context.Context, m *Meta, v string) ([]byte, error) {
	if c.validUTF8 && !utf8.ValidString(v) {
		return nil, permanent("string", m.Part, ErrInvalidUTF8)
	}
	return []byte(v), nil
}

// A JSONOption configures [JSON].
type JSONOption func(*jsonConfig)

type jsonConfig struct{ strict bool }

// Strict makes [JSON] reject objects with fields that T does not have, and
// data with anything but white space after the JSON value
// ([ErrTrailingData]). Both are permanent. Optional; by default unknown
// fields are ignored (encoding/json's rule). Strict decoding is slower.
func Strict() JSONOption {
	return func(c *jsonConfig) { c.strict = true }
}

// JSON returns the codec for T encoded as JSON (encoding/json). Every decode
// error is marked permanent: the bytes will never become valid JSON. The
// decoded value never aliases data.
func JSON[T any](opts ...JSONOption) Codec[T] {
	var cfg jsonConfig
	for _, o := range opts {
		o(&cfg)
	}
	if cfg.strict {
		return strictJSON[T]{}
	}
	return jsonCodec[T]{}
}

type jsonCodec[T any] struct{}

func (jsonCodec[T]) Name() string { return "json" }

func (jsonCodec[T]) Deserialize(_ context.Context, m Meta, data []byte) (T, error) {
	var v T
	if err := json.Unmarshal(data, &v); err != nil {
		var zero T
		return zero, permanent("json", m.Part, err)
	}
	return v, nil
}

func (jsonCodec[T]) Serialize(_ context.Context, m *Meta, v T) ([]byte, error) {
	return marshalJSON(m, v)
}

type strictJSON[T any] struct{}

func (strictJSON[T]) Name() string { return "json" }

func (strictJSON[T]) Deserialize(_ context.Context, m Meta, data []byte) (T, error) {
	var v T
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		if err == io.EOF { // empty input: not a JSON value
			err = io.ErrUnexpectedEOF
		}
		var zero T
		return zero, permanent("json", m.Part, err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		var zero T
		return zero, permanent("json", m.Part, ErrTrailingData)
	}
	return v, nil
}

func (strictJSON[T]) Serialize(_ context.Context, m *Meta, v T) ([]byte, error) {
	return marshalJSON(m, v)
}

func marshalJSON[T any](m *Meta, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, permanent("json", m.Part, err)
	}
	return b, nil
}
