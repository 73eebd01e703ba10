package avro

import (
	"context"
	"errors"

	"github.com/hamba/avro/v2"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// Serializer encodes a T in the wire format, registering its schema under
// the record's subject on first use (one request per subject per process).
// It implements serde.Serializer[T] and is safe for concurrent use.
type Serializer[T any] struct {
	reg     *Registry
	text    string
	schema  avro.Schema
	subject func(m *serde.Meta) string
}

// TopicNameStrategy is the default subject of a [Serializer]: the topic,
// then "-key" or "-value".
func TopicNameStrategy(m *serde.Meta) string {
	if m.Part == serde.Key {
		return m.Topic + "-key"
	}
	return m.Topic + "-value"
}

// NewSerializer returns a serializer of T with schema (Avro, in JSON).
// subject names the registry subject of a record; nil means
// [TopicNameStrategy]. It fails if schema is not valid Avro.
func NewSerializer[T any](reg *Registry, schema string, subject func(m *serde.Meta) string) (*Serializer[T], error) {
	if reg == nil {
		return nil, errors.New("avro: nil *Registry")
	}
	s, err := avro.ParseWithCache(schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	if subject == nil {
		subject = TopicNameStrategy
	}
	return &Serializer[T]{reg: reg, text: schema, schema: s, subject: subject}, nil
}

// Name returns "avro".
func (*Serializer[T]) Name() string { return stage }

// Serialize encodes v: 0x00, the schema id (big endian), the Avro binary.
// A value that does not fit the schema is a permanent error; a registry
// failure is transient, as for deserializing.
func (s *Serializer[T]) Serialize(ctx context.Context, m *serde.Meta, v T) ([]byte, error) {
	id, err := s.reg.Register(ctx, s.subject(m), s.text)
	if err != nil {
		return nil, wrap(*m, err)
	}
	b, err := api.Marshal(s.schema, v)
	if err != nil {
		return nil, wrap(*m, failure.Permanent(err))
	}
	out := make([]byte, 0, headerLen+len(b))
	return append(AppendWire(out, id), b...), nil
}

var _ serde.Serializer[struct{}] = (*Serializer[struct{}])(nil)
