package avro

import (
	"fmt"

	"github.com/hamba/avro/v2"
)

// emptyItems returns the path of the first array in s whose items take no
// bytes on the wire (null, a fixed of size 0, a record of only such
// fields), or "". Its blocks claim elements that cost nothing to send, so
// the size classes, which bound what a record of n bytes may claim by n,
// bound nothing: a few hundred bytes of nested arrays of nulls are
// millions of elements. A writer schema with one is refused.
func emptyItems(s avro.Schema) string {
	seen := map[avro.Schema]bool{}
	var walk func(s avro.Schema, path string) string
	walk = func(s avro.Schema, path string) string {
		if r, ok := s.(*avro.RefSchema); ok {
			s = r.Schema()
		}
		if seen[s] {
			return ""
		}
		seen[s] = true
		switch t := s.(type) {
		case *avro.ArraySchema:
			if takesNoBytes(t.Items(), map[avro.Schema]bool{}) {
				return path
			}
			return walk(t.Items(), path+"[]")
		case *avro.MapSchema:
			return walk(t.Values(), path+"{}")
		case *avro.UnionSchema:
			for i, u := range t.Types() {
				if p := walk(u, fmt.Sprintf("%s|%d", path, i)); p != "" {
					return p
				}
			}
		case *avro.RecordSchema:
			for _, f := range t.Fields() {
				if p := walk(f.Type(), path+"."+f.Name()); p != "" {
					return p
				}
			}
		}
		return ""
	}
	return walk(s, nameOf(s))
}

// takesNoBytes reports whether a value of s is encoded in zero bytes.
func takesNoBytes(s avro.Schema, visiting map[avro.Schema]bool) bool {
	if r, ok := s.(*avro.RefSchema); ok {
		s = r.Schema()
	}
	switch t := s.(type) {
	case *avro.NullSchema:
		return true
	case *avro.FixedSchema:
		return t.Size() == 0
	case *avro.RecordSchema:
		if visiting[s] {
			return false // a record inside itself: not through fields alone
		}
		visiting[s] = true
		defer delete(visiting, s)
		for _, f := range t.Fields() {
			if !takesNoBytes(f.Type(), visiting) {
				return false
			}
		}
		return true
	}
	return s.Type() == avro.Null
}

// DecodeGeneric decodes payload, an Avro record without the wire format's
// header, with its writer schema alone, into the Avro library's generic
// values (map[string]any for a record, []any for an array, and so on): for
// tools that show records of any type. It has the [Deserializer]'s bounds:
// the memory it allocates is bounded by the payload's size (see the
// package documentation), a payload that ends inside the record is an
// error, and a schema with an array of items that take no bytes is refused.
func DecodeGeneric(writerSchema string, payload []byte) (any, error) {
	s, err := avro.ParseWithCache(writerSchema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, err
	}
	if p := emptyItems(s); p != "" {
		return nil, fmt.Errorf("%s: %w", p, errEmptyItems)
	}
	var v any
	if err := unmarshal(s, payload, &v); err != nil {
		return nil, err
	}
	return v, nil
}
