package jsonschema_test

import (
	"context"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
)

// FuzzDeserialize: validating and decoding arbitrary bytes with a known
// schema id must not panic, and a failure is always classified.
func FuzzDeserialize(f *testing.F) {
	sreg := srtest.New(f)
	id := sreg.RegisterSchema(f, subject("fuzz"), sr.Schema{Schema: orderSchema, Type: sr.TypeJSON})
	reg := newRegistry(f, sreg)
	d := must(jsonschema.NewDeserializer[Order](reg))
	hdr := jsonschema.AppendWire(nil, id)
	for _, s := range []string{
		`{"id":"a","amount":1,"items":[{"sku":"x","qty":2}]}`, `{"id":"a"}`, `{"id":1,"amount":-1}`,
		`[]`, `null`, `"x"`, `{"id":"a","amount":1e999}`, `{"id":"\u0000\ud800","amount":0}`,
		`{"items":[[[[[[[[[[[[[[[[[[[[[[[[[[[[]]]]]]]]]]]]]]]]]]]]]]]]]]]]}`, `{"id":"a","amount":1} {}`,
	} {
		f.Add(append(append([]byte{}, hdr...), s...))
	}
	f.Add([]byte(nil))
	f.Add([]byte("plain text"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) >= 5 && data[0] == 0 {
			data = append(append([]byte{}, hdr...), data[5:]...) // keep the id known
		}
		if _, err := d.Deserialize(context.Background(), meta, data); err != nil && !classified(err) {
			t.Fatalf("unclassified error: %v", err)
		}
	})
}
