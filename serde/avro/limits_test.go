package avro_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

const listSchema = `{"type":"record","name":"List","namespace":"com.acme","fields":[
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"nums","type":{"type":"array","items":"long"}}]}`

type list struct {
	Tags []string `avro:"tags"`
	Nums []int64  `avro:"nums"`
}

// allocated returns the bytes allocated by fn, on average over runs.
func allocated(runs int, fn func()) uint64 {
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	for range runs {
		fn()
	}
	runtime.ReadMemStats(&m1)
	return (m1.TotalAlloc - m0.TotalAlloc) / uint64(runs)
}

// TestPoisonAllocationBounded: a 9-byte record whose array claims eight
// million strings, or whose string claims 8 MiB, is a permanent DecodeError
// and costs a few KiB, not the 128 MiB the claim would take; large valid
// records still decode.
func TestPoisonAllocationBounded(t *testing.T) {
	sreg := srtest.New(t)
	id := sreg.Register(t, subject("limits"), listSchema)
	reg := newRegistry(t, sreg)
	d := must(avro.NewDeserializer[list](reg, listSchema))
	ctx := context.Background()

	big := list{Tags: []string{"a"}, Nums: make([]int64, 100_000)}
	for i := range big.Nums {
		big.Nums[i] = int64(i)
	}
	data := encode(t, id, listSchema, big)
	v, err := d.Deserialize(ctx, meta, data)
	if err != nil || len(v.Nums) != len(big.Nums) || v.Nums[99_999] != 99_999 {
		t.Fatalf("a valid record of %d bytes: %d nums, %v", len(data), len(v.Nums), err)
	}

	hdr := avro.AppendWire(nil, id)
	for name, body := range map[string][]byte{
		"array of 8M strings": {0xfe, 0xff, 0xff, 0x07},
		"string of 8 MiB":     {0x02, 0xfe, 0xff, 0xff, 0x07},
		"array of 8M longs":   {0x00, 0xfe, 0xff, 0xff, 0x07},
	} {
		poison := append(append([]byte{}, hdr...), body...)
		n := allocated(20, func() {
			_, err = d.Deserialize(ctx, meta, poison)
		})
		if _, ok := errors.AsType[*avro.DecodeError](err); !ok || !failure.IsPermanent(err) {
			t.Errorf("%s: %v, want a permanent DecodeError", name, err)
		}
		t.Logf("%s (%d bytes): %d bytes allocated: %v", name, len(poison), n, err)
		if n > 64<<10 {
			t.Errorf("%s: a %d-byte record made the decoder allocate %d bytes", name, len(poison), n)
		}
	}
}

// TestEmptyItemsRefused: a writer schema with an array of items that take
// no bytes (nulls, an empty record, a fixed of size 0), at any depth, is
// refused as a permanent SchemaError before any record is decoded: in a
// few hundred bytes, blocks of such items nested in arrays claim millions
// of elements. Arrays of anything else are not.
func TestEmptyItemsRefused(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	ctx := context.Background()
	rec := func(field string) string {
		return `{"type":"record","name":"R","namespace":"com.acme","fields":[{"name":"f","type":` + field + `}]}`
	}
	for name, tc := range map[string]struct {
		field   string
		refused bool
	}{
		"array of nulls":              {`{"type":"array","items":"null"}`, true},
		"array of arrays of nulls":    {`{"type":"array","items":{"type":"array","items":"null"}}`, true},
		"array of empty records":      {`{"type":"array","items":{"type":"record","name":"E","fields":[]}}`, true},
		"array of fixed(0)":           {`{"type":"array","items":{"type":"fixed","name":"Z","size":0}}`, true},
		"map of arrays of nulls":      {`{"type":"map","values":{"type":"array","items":"null"}}`, true},
		"union with an array of null": {`["null",{"type":"array","items":"null"}]`, true},
		"array of unions with null":   {`{"type":"array","items":["null","long"]}`, false},
		"array of records of a null":  {`{"type":"array","items":{"type":"record","name":"N","fields":[{"name":"n","type":"null"},{"name":"b","type":"boolean"}]}}`, false},
		"map of nulls":                {`{"type":"map","values":"null"}`, false},
	} {
		t.Run(name, func(t *testing.T) {
			schema := rec(tc.field)
			id := sreg.Register(t, subject("empty-"+strings.ReplaceAll(name, " ", "-")), schema)
			d := must(avro.NewDeserializer[map[string]any](reg, schema))
			// An empty array or map, or a null: 0x00 decodes under every schema here.
			_, err := d.Deserialize(ctx, meta, append(avro.AppendWire(nil, id), 0x00))
			_, generic := avro.DecodeGeneric(schema, []byte{0x00})
			if !tc.refused {
				if err != nil || generic != nil {
					t.Errorf("refused: %v / %v", err, generic)
				}
				return
			}
			if se, ok := errors.AsType[*avro.SchemaError](err); !ok || !failure.IsPermanent(err) || !strings.Contains(se.Reason, "take no bytes") {
				t.Errorf("%v, want a permanent SchemaError", err)
			}
			if generic == nil || !strings.Contains(generic.Error(), "take no bytes") {
				t.Errorf("DecodeGeneric: %v, want the schema refused", generic)
			}
		})
	}
}

// TestDecodeGeneric: a payload decodes with its writer schema alone into
// generic values; one cut short is an error, not zero values; a claim
// beyond the payload's size class is refused without its allocation.
func TestDecodeGeneric(t *testing.T) {
	v, err := avro.DecodeGeneric(listSchema, []byte{0x02, 0x02, 'a', 0x00, 0x02, 0x54, 0x00})
	m, ok := v.(map[string]any)
	if err != nil || !ok || fmt.Sprint(m["tags"]) != "[a]" || fmt.Sprint(m["nums"]) != "[42]" {
		t.Fatalf("DecodeGeneric: %#v, %v", v, err)
	}
	if _, err := avro.DecodeGeneric(listSchema, []byte{0x02, 0x02, 'a', 0x00}); err == nil || !strings.Contains(err.Error(), "truncated") {
		t.Errorf("a payload cut short: %v, want truncated", err)
	}
	var claimErr error
	if n := allocated(20, func() { _, claimErr = avro.DecodeGeneric(listSchema, []byte{0xfe, 0xff, 0xff, 0x07}) }); n > 64<<10 || claimErr == nil {
		t.Errorf("an array claiming 8M strings: %v, %d bytes allocated", claimErr, n)
	}
	if _, err := avro.DecodeGeneric(`{"type":"nope"}`, nil); err == nil {
		t.Error("a bad schema decoded")
	}
}
