package avro

import (
	"context"
	"errors"
	"fmt"
	"io"
	"reflect"
	"sync"

	"github.com/hamba/avro/v2"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// api is the Avro configuration of the [Serializer]: the library's
// defaults, with the decoder's largest limits.
var api = avro.Config{MaxByteSliceSize: maxAlloc, MaxSliceAllocSize: maxAlloc}.Freeze()

// maxAlloc is the most elements an array, or bytes a string or bytes
// value, may claim in any record.
const maxAlloc = 8 << 20

// A length prefix is read before the data it counts, and the Avro library
// allocates what it claims before reading it: a 4-byte array count of
// eight million strings is a 128 MiB allocation, however short the record.
// So the limits scale with the record: a record of n bytes is decoded with
// the first size class whose limit is at least n, and no array in it may
// claim more elements, nor any string or bytes value more bytes, than that
// limit. An element or a byte of data takes at least one byte on the wire,
// so no valid record is refused; a writer schema with an array of elements
// that take no bytes (nulls, empty records), whose blocks could claim any
// number of them, is refused itself (emptyItems).
var classes = func() []sizeClass {
	var cs []sizeClass
	for _, limit := range []int{4 << 10, 64 << 10, 1 << 20, maxAlloc} {
		cfg := avro.Config{MaxByteSliceSize: limit, MaxSliceAllocSize: limit}.Freeze()
		cs = append(cs, sizeClass{limit: limit, readers: &sync.Pool{New: func() any {
			return avro.NewReader(nil, 0, avro.WithReaderConfig(cfg))
		}}})
	}
	return cs
}()

type sizeClass struct {
	limit   int
	readers *sync.Pool // *avro.Reader with the class's limits
}

// readerFor returns the reader pool of a payload of n bytes.
func readerFor(n int) *sync.Pool {
	for _, c := range classes[:len(classes)-1] {
		if n <= c.limit {
			return c.readers
		}
	}
	return classes[len(classes)-1].readers
}

// errTruncated is the reason of a DecodeError for data that ends inside
// the record.
var errTruncated = errors.New("truncated: the data ends inside the record")

// errEmptyItems is why a writer schema with an array of items that take no
// bytes is refused (see emptyItems).
var errEmptyItems = errors.New("an array of items that take no bytes on the wire, of which a short record could claim any number")

// unmarshal decodes data into v. Unlike the library's Unmarshal, data that
// ends inside the record is an error: Unmarshal reads io.EOF as success, so
// a record cut at a field boundary would decode silently into zero values.
func unmarshal(s avro.Schema, data []byte, v any) error {
	pool := readerFor(len(data))
	r := pool.Get().(*avro.Reader)
	r.Reset(data)
	r.Error = nil
	r.ReadVal(s, v)
	err := r.Error
	r.Reset(nil)
	r.Error = nil
	pool.Put(r)
	if errors.Is(err, io.EOF) {
		return errTruncated
	}
	return err
}

// Deserializer decodes Avro records in the wire format into a T, resolving
// each writer schema to a reader schema: the schema T was written for. It
// implements serde.Deserializer[T] and is safe for concurrent use.
//
// T is decoded by the Avro library (hamba/avro v2): a struct with `avro`
// field tags, a map[string]any, or a primitive matching the schema. The
// decoded value does not alias the input bytes.
type Deserializer[T any] struct {
	r *resolver
}

// NewDeserializer returns a deserializer of records whose writer schema is
// the type of readerSchema (by full name, or one of its aliases), decoded
// into a T. It fails if readerSchema is not valid Avro.
func NewDeserializer[T any](reg *Registry, readerSchema string) (*Deserializer[T], error) {
	t := Record[T](readerSchema)
	r, err := newResolver(reg, t)
	if err != nil {
		return nil, err
	}
	return &Deserializer[T]{r: r}, nil
}

// Name returns "avro", the stage name in errors and dead-letter headers.
func (*Deserializer[T]) Name() string { return stage }

// Deserialize decodes data. See the package documentation for its errors.
func (d *Deserializer[T]) Deserialize(ctx context.Context, m serde.Meta, data []byte) (T, error) {
	var v T
	p, payload, err := d.r.plan(ctx, data)
	if err != nil {
		return v, wrap(m, err)
	}
	if err := unmarshal(p.schema, payload, &v); err != nil {
		var zero T
		return zero, wrap(m, failure.Permanent(&DecodeError{ID: p.id, Reason: err.Error()}))
	}
	return v, nil
}

// Type is one Go type of a [Multi] deserializer, made by [Record].
type Type struct {
	rt  *readerType
	err error
}

// Record returns the [Type] that decodes records of readerSchema's type
// (its full name and aliases) into a T. [NewMulti] reports an invalid
// schema.
func Record[T any](readerSchema string) Type {
	s, err := avro.ParseWithCache(readerSchema, "", &avro.SchemaCache{})
	if err != nil {
		return Type{err: fmt.Errorf("avro: reader schema of %v: %w", reflect.TypeFor[T](), err)}
	}
	rt := &readerType{
		name:   nameOf(s),
		schema: s,
		gotype: reflect.TypeFor[T](),
		decode: func(s avro.Schema, data []byte) (any, error) {
			var v T
			err := unmarshal(s, data, &v)
			return v, err
		},
	}
	if n, ok := s.(avro.NamedSchema); ok {
		rt.aliases = n.Aliases()
	}
	return Type{rt: rt}
}

// Multi decodes a topic that carries several record types, each into the
// Go type registered for it with [Record]. The value is an any holding a T
// (not a *T) of the matching [Record]: switch on its type. A writer type
// with no registered Go type fails with an [*UnknownTypeError]. It
// implements serde.Deserializer[any] and is safe for concurrent use.
type Multi struct {
	r *resolver
}

// NewMulti returns a deserializer for the given types. It fails if a reader
// schema is invalid or two types claim the same name.
func NewMulti(reg *Registry, types ...Type) (*Multi, error) {
	if len(types) == 0 {
		return nil, errors.New("avro: NewMulti: no types")
	}
	r, err := newResolver(reg, types...)
	if err != nil {
		return nil, err
	}
	return &Multi{r: r}, nil
}

// Name returns "avro".
func (*Multi) Name() string { return stage }

// Deserialize decodes data into the registered Go type of its writer
// schema's full name.
func (d *Multi) Deserialize(ctx context.Context, m serde.Meta, data []byte) (any, error) {
	p, payload, err := d.r.plan(ctx, data)
	if err != nil {
		return nil, wrap(m, err)
	}
	v, err := p.t.decode(p.schema, payload)
	if err != nil {
		return nil, wrap(m, failure.Permanent(&DecodeError{ID: p.id, Reason: err.Error()}))
	}
	return v, nil
}

// readerType is a Go type and the reader schema it was written for.
type readerType struct {
	name    string
	aliases []string
	schema  avro.Schema
	gotype  reflect.Type
	decode  func(avro.Schema, []byte) (any, error)
}

// resolver maps writer schema ids to plans: which reader type, and the
// resolved schema to decode with. Plans are computed once per id.
type resolver struct {
	reg    *Registry
	byName map[string]*readerType
	compat *avro.SchemaCompatibility
	plans  sync.Map // int → *plan
}

// plan is how to decode the records of one writer schema id. A permanent
// failure (unknown type, unresolvable) is a plan too: computed once.
type plan struct {
	id     int
	t      *readerType
	schema avro.Schema
	err    error
}

func newResolver(reg *Registry, types ...Type) (*resolver, error) {
	if reg == nil {
		return nil, errors.New("avro: nil *Registry")
	}
	r := &resolver{reg: reg, byName: make(map[string]*readerType), compat: avro.NewSchemaCompatibility()}
	for _, t := range types {
		if t.err != nil {
			return nil, t.err
		}
		if t.rt == nil {
			return nil, errors.New("avro: zero Type (use Record)")
		}
		for _, n := range append([]string{t.rt.name}, t.rt.aliases...) {
			if prev, dup := r.byName[n]; dup {
				return nil, fmt.Errorf("avro: %s is claimed by both %v and %v", n, prev.gotype, t.rt.gotype)
			}
			r.byName[n] = t.rt
		}
	}
	return r, nil
}

// plan parses the wire format and returns the plan of its schema id and
// the Avro payload.
func (r *resolver) plan(ctx context.Context, data []byte) (*plan, []byte, error) {
	id, payload, err := ParseWire(data)
	if err != nil {
		return nil, nil, failure.Permanent(err)
	}
	if p, ok := r.plans.Load(id); ok {
		p := p.(*plan)
		return p, payload, p.err
	}
	w, err := r.reg.lookup(ctx, id)
	if err != nil {
		return nil, nil, err
	}
	p, _ := r.plans.LoadOrStore(id, r.build(w))
	return p.(*plan), payload, p.(*plan).err
}

// build computes the plan of writer schema w.
func (r *resolver) build(w *writer) *plan {
	p := &plan{id: w.id}
	t, ok := r.byName[w.name]
	if !ok {
		p.err = failure.Permanent(&UnknownTypeError{ID: w.id, Name: w.name})
		return p
	}
	p.t = t
	if t.schema.Fingerprint() == w.schema.Fingerprint() {
		p.schema = t.schema
		return p
	}
	s, err := r.compat.Resolve(t.schema, w.schema)
	if err != nil {
		p.err = failure.Permanent(&ResolveError{ID: w.id, Name: w.name, Reason: err.Error()})
		return p
	}
	p.schema = s
	return p
}

// wrap names the stage of err, for serde.StageOf and dead-letter headers.
func wrap(m serde.Meta, err error) error {
	return &serde.Error{Stage: stage, Part: m.Part, Err: err}
}

var (
	_ serde.Deserializer[struct{}] = (*Deserializer[struct{}])(nil)
	_ serde.Deserializer[any]      = (*Multi)(nil)
)
