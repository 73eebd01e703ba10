package avro_test

import (
	"context"
	"errors"
	"runtime"
	"testing"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

const listSchema = `{"type":"record","name":"List","namespace":"com.acme","fields":[
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"nums","type":{"type":"array","items":"long"}},
	{"name":"nulls","type":{"type":"array","items":"null"}}]}`

type list struct {
	Tags  []string `avro:"tags"`
	Nums  []int64  `avro:"nums"`
	Nulls []any    `avro:"nulls"`
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

	big := list{Tags: []string{"a"}, Nums: make([]int64, 100_000), Nulls: make([]any, 3)}
	for i := range big.Nums {
		big.Nums[i] = int64(i)
	}
	data := encode(t, id, listSchema, big)
	v, err := d.Deserialize(ctx, meta, data)
	if err != nil || len(v.Nums) != len(big.Nums) || v.Nums[99_999] != 99_999 || len(v.Nulls) != 3 {
		t.Fatalf("a valid record of %d bytes: %d nums, %v", len(data), len(v.Nums), err)
	}

	hdr := avro.AppendWire(nil, id)
	for name, body := range map[string][]byte{
		"array of 8M strings": {0xfe, 0xff, 0xff, 0x07},
		"string of 8 MiB":     {0x02, 0xfe, 0xff, 0xff, 0x07},
		"array of 8M longs":   {0x00, 0xfe, 0xff, 0xff, 0x07},
		// Nulls take no bytes: a valid record, refused by the limit (see
		// the package documentation).
		"array of 8M nulls": {0x00, 0x00, 0xfe, 0xff, 0xff, 0x07, 0x00},
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
