package jsonschema

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	js "github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/twmb/franz-go/pkg/sr"
	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// Magic is the first byte of the schema-registry wire format.
const Magic byte = 0

const headerLen = 5

// ParseWire splits data in the wire format into its schema id and its JSON
// payload, which aliases data. It returns a [*WireError] (not marked: this
// is a parser) when data is shorter than 5 bytes or does not start with
// [Magic].
func ParseWire(data []byte) (id int, payload []byte, err error) {
	if len(data) < headerLen || data[0] != Magic {
		e := &WireError{Len: len(data)}
		if len(data) > 0 {
			e.Magic = data[0]
		}
		return 0, nil, e
	}
	return int(binary.BigEndian.Uint32(data[1:headerLen])), data[headerLen:], nil
}

// AppendWire appends the wire-format header for schema id to dst.
func AppendWire(dst []byte, id int) []byte {
	return binary.BigEndian.AppendUint32(append(dst, Magic), uint32(id))
}

// Deserializer validates JSON records in the wire format against their
// registered JSON Schema, then decodes them into a T with encoding/json.
// It implements serde.Deserializer[T] and is safe for concurrent use.
type Deserializer[T any] struct {
	reg     *registry.Registry
	schemas sync.Map // int → *compiled
}

// compiled is the validator of one schema id, or why there is none.
type compiled struct {
	schema *js.Schema
	err    error
}

// NewDeserializer returns a deserializer that looks schemas up in reg (the
// shared client of package serde/registry; an avro.Registry's Registry
// field shares its cache and breaker).
func NewDeserializer[T any](reg *registry.Registry) (*Deserializer[T], error) {
	if reg == nil {
		return nil, errors.New("jsonschema: nil *registry.Registry")
	}
	return &Deserializer[T]{reg: reg}, nil
}

// Name returns "jsonschema", the stage name in errors and dead-letter headers.
func (*Deserializer[T]) Name() string { return stage }

// Deserialize validates and decodes data. See the package documentation
// for its errors.
func (d *Deserializer[T]) Deserialize(ctx context.Context, m serde.Meta, data []byte) (T, error) {
	var v T
	id, payload, err := ParseWire(data)
	if err != nil {
		return v, wrap(m, failure.Permanent(err))
	}
	sch, err := d.validator(ctx, id)
	if err != nil {
		return v, wrap(m, err)
	}
	inst, err := js.UnmarshalJSON(bytes.NewReader(payload))
	if err != nil {
		return v, wrap(m, failure.Permanent(&DecodeError{ID: id, Reason: clean(err.Error(), 256)}))
	}
	if err := sch.Validate(inst); err != nil {
		return v, wrap(m, failure.Permanent(validationError(id, err)))
	}
	if err := json.Unmarshal(payload, &v); err != nil {
		var zero T
		return zero, wrap(m, failure.Permanent(&DecodeError{ID: id, Reason: clean(err.Error(), 256)}))
	}
	return v, nil
}

// validator returns the compiled schema of id, compiling it once.
func (d *Deserializer[T]) validator(ctx context.Context, id int) (*js.Schema, error) {
	if c, ok := d.schemas.Load(id); ok {
		c := c.(*compiled)
		return c.schema, c.err
	}
	s, err := d.reg.Schema(ctx, id)
	if err != nil {
		if errors.Is(err, registry.ErrUnknownSchema) {
			return nil, failure.Permanent(&UnknownSchemaError{ID: id})
		}
		return nil, err // transient, with the breaker's hint
	}
	c, _ := d.schemas.LoadOrStore(id, compile(id, s))
	return c.(*compiled).schema, c.(*compiled).err
}

// compile compiles a registry schema. It loads nothing: a $ref to anything
// but the schema itself is a SchemaError, never a file or network read.
func compile(id int, s sr.Schema) (c *compiled) {
	fail := func(reason string) *compiled {
		return &compiled{err: failure.Permanent(&SchemaError{ID: id, Reason: reason})}
	}
	defer func() {
		if p := recover(); p != nil {
			c = fail(fmt.Sprintf("panic compiling it: %v", p))
		}
	}()
	if s.Type != sr.TypeJSON {
		return fail("schema type is " + s.Type.String() + ", not JSON")
	}
	if len(s.References) > 0 {
		return fail("schema references are not supported")
	}
	doc, err := js.UnmarshalJSON(strings.NewReader(s.Schema))
	if err != nil {
		return fail("not JSON: " + err.Error())
	}
	cp := js.NewCompiler()
	cp.UseLoader(noLoader{})
	url := "urn:antidote:schema-registry:" + strconv.Itoa(id)
	if err := cp.AddResource(url, doc); err != nil {
		return fail(err.Error())
	}
	sch, err := cp.Compile(url)
	if err != nil {
		return fail(clean(err.Error(), 512))
	}
	return &compiled{schema: sch}
}

// noLoader refuses every URL: schemas come whole from the registry.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("loading %s: external references are not followed", url)
}

var printer = message.NewPrinter(language.English)

// validationError names the first failing location of a validation error.
func validationError(id int, err error) *ValidationError {
	ve, ok := errors.AsType[*js.ValidationError](err)
	if !ok {
		return &ValidationError{ID: id, Reason: clean(err.Error(), 512)}
	}
	for len(ve.Causes) > 0 {
		ve = ve.Causes[0]
	}
	e := &ValidationError{ID: id, Path: clean(pointer(ve.InstanceLocation), maxPath)}
	if i := strings.IndexByte(ve.SchemaURL, '#'); i >= 0 {
		e.Keyword = ve.SchemaURL[i+1:]
	}
	if ve.ErrorKind != nil {
		e.Keyword += pointer(ve.ErrorKind.KeywordPath())
		e.Reason = clean(ve.ErrorKind.LocalizedString(printer), 512)
	}
	e.Keyword = clean(e.Keyword, maxPath)
	return e
}

// pointer returns the JSON pointer of a path.
func pointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteByte('/')
		b.WriteString(strings.NewReplacer("~", "~0", "/", "~1").Replace(p))
	}
	return b.String()
}

// clean makes text from a record safe to log and to put in a dead-letter
// header: valid UTF-8, no control characters, at most n bytes.
func clean(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return '\uFFFD'
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) > n {
		cut := n
		for cut > 0 && !utf8.RuneStart(s[cut]) {
			cut--
		}
		s = s[:cut] + "…"
	}
	return s
}

// wrap names the stage of err, for serde.StageOf and dead-letter headers.
func wrap(m serde.Meta, err error) error {
	return &serde.Error{Stage: stage, Part: m.Part, Err: err}
}

var _ serde.Deserializer[struct{}] = (*Deserializer[struct{}])(nil)
