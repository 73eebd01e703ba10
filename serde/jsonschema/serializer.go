package jsonschema

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// Serializer encodes a T as JSON in the wire format, after validating it
// against its schema, registering the schema under the record's subject on
// first use. It implements serde.Serializer[T] and is safe for concurrent
// use.
type Serializer[T any] struct {
	reg     *registry.Registry
	text    string
	schema  *js.Schema
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

// NewSerializer returns a serializer of T with schema (a JSON Schema).
// subject names the registry subject of a record; nil means
// [TopicNameStrategy]. It fails if schema does not compile.
func NewSerializer[T any](reg *registry.Registry, schema string, subject func(m *serde.Meta) string) (*Serializer[T], error) {
	if reg == nil {
		return nil, errors.New("jsonschema: nil *registry.Registry")
	}
	c := compile(0, sr.Schema{Schema: schema, Type: sr.TypeJSON})
	if c.err != nil {
		return nil, fmt.Errorf("jsonschema: NewSerializer: %w", c.err)
	}
	if subject == nil {
		subject = TopicNameStrategy
	}
	return &Serializer[T]{reg: reg, text: schema, schema: c.schema, subject: subject}, nil
}

// Name returns "jsonschema".
func (*Serializer[T]) Name() string { return stage }

// Serialize encodes v: 0x00, the schema id (big endian), the JSON. A value
// that does not validate is a permanent [*ValidationError]; a registry
// failure is transient.
func (s *Serializer[T]) Serialize(ctx context.Context, m *serde.Meta, v T) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, wrap(*m, failure.Permanent(err))
	}
	inst, err := js.UnmarshalJSON(strings.NewReader(string(b)))
	if err != nil {
		return nil, wrap(*m, failure.Permanent(err))
	}
	if err := s.schema.Validate(inst); err != nil {
		return nil, wrap(*m, failure.Permanent(validationError(0, err)))
	}
	id, err := s.reg.Register(ctx, s.subject(m), sr.Schema{Schema: s.text, Type: sr.TypeJSON})
	if err != nil {
		return nil, wrap(*m, err)
	}
	out := make([]byte, 0, headerLen+len(b))
	return append(AppendWire(out, id), b...), nil
}

var _ serde.Serializer[struct{}] = (*Serializer[struct{}])(nil)
