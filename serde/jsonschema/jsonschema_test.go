package jsonschema_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
	"github.com/antidote-kafka/antidote/serde/jsonschema"
	"github.com/antidote-kafka/antidote/serde/registry"
)

const orderSchema = `{
	"$schema": "http://json-schema.org/draft-07/schema#",
	"title": "Order",
	"type": "object",
	"properties": {
		"id": {"type": "string"},
		"amount": {"type": "integer", "minimum": 0},
		"items": {"type": "array", "items": {
			"type": "object",
			"properties": {"sku": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
			"required": ["sku", "qty"]}}
	},
	"required": ["id", "amount"]
}`

type Item struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

type Order struct {
	ID     string `json:"id"`
	Amount int64  `json:"amount"`
	Items  []Item `json:"items,omitempty"`
}

var meta = serde.Meta{Topic: "orders", Part: serde.Value}

// quietLogger drops the logs of the code under test unless
// ANTIDOTE_TEST_LOGS=1 (srtest.Logger).
func quietLogger() *slog.Logger { return srtest.Logger() }

func newRegistry(t testing.TB, sreg *srtest.Registry, opts ...registry.Opt) *registry.Registry {
	t.Helper()
	r, err := registry.New(sreg.URL(), append([]registry.Opt{registry.Logger(quietLogger())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func subject(prefix string) string { return kafkatest.UniqueName(prefix) + "-value" }

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func frame(id int, json string) []byte { return append(jsonschema.AppendWire(nil, id), json...) }

func TestRoundTrip(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	sub := subject("orders")
	ser := must(jsonschema.NewSerializer[Order](reg, orderSchema, func(*serde.Meta) string { return sub }))
	d := must(jsonschema.NewDeserializer[Order](reg))
	m := meta
	want := Order{ID: "o-1", Amount: 42, Items: []Item{{"a", 1}, {"b", 2}}}
	data, err := ser.Serialize(context.Background(), &m, want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := d.Deserialize(context.Background(), meta, data)
	if err != nil || got.ID != want.ID || got.Amount != 42 || len(got.Items) != 2 || got.Items[1] != want.Items[1] {
		t.Fatalf("got %+v, %v", got, err)
	}
	// The serializer validates too: nothing invalid is written.
	_, err = ser.Serialize(context.Background(), &m, Order{ID: "o-2", Amount: -1})
	if ve, ok := errors.AsType[*jsonschema.ValidationError](err); !ok || ve.Path != "/amount" || !failure.IsPermanent(err) {
		t.Fatalf("invalid value: %v", err)
	}
}

// TestPermanentErrors: each kind of poison is a permanent, classified
// error of stage jsonschema, naming what is wrong.
func TestPermanentErrors(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	id := sreg.RegisterSchema(t, subject("orders"), sr.Schema{Schema: orderSchema, Type: sr.TypeJSON})
	avroID := sreg.Register(t, subject("avro"), `{"type":"record","name":"A","fields":[{"name":"a","type":"long"}]}`)
	refID := sreg.RegisterSchema(t, subject("ref"), sr.Schema{Type: sr.TypeJSON,
		Schema: `{"type":"object","properties":{"x":{"$ref":"file:///etc/passwd"}}}`})
	d := must(jsonschema.NewDeserializer[Order](reg))

	for _, c := range []struct {
		name  string
		data  []byte
		check func(error) bool
	}{
		{"a string from a console producer", []byte(`{"id":"x"}`), func(err error) bool {
			return errors.Is(err, jsonschema.ErrNotFramed)
		}},
		{"too short", []byte{0, 0, 1}, func(err error) bool { return errors.Is(err, jsonschema.ErrNotFramed) }},
		{"unknown schema id", frame(987654, `{}`), func(err error) bool {
			e, ok := errors.AsType[*jsonschema.UnknownSchemaError](err)
			return ok && e.ID == 987654 && errors.Is(err, jsonschema.ErrUnknownSchema)
		}},
		{"not JSON", frame(id, `{"id":`), func(err error) bool {
			_, ok := errors.AsType[*jsonschema.DecodeError](err)
			return ok
		}},
		{"trailing garbage", frame(id, `{"id":"a","amount":1} x`), func(err error) bool {
			_, ok := errors.AsType[*jsonschema.DecodeError](err)
			return ok
		}},
		{"missing required field", frame(id, `{"id":"a"}`), func(err error) bool {
			e, ok := errors.AsType[*jsonschema.ValidationError](err)
			return ok && e.Path == "" && strings.Contains(e.Reason, "amount") && errors.Is(err, jsonschema.ErrInvalid)
		}},
		{"a nested value out of range", frame(id, `{"id":"a","amount":1,"items":[{"sku":"a","qty":1},{"sku":"b","qty":0}]}`), func(err error) bool {
			e, ok := errors.AsType[*jsonschema.ValidationError](err)
			return ok && e.Path == "/items/1/qty" && strings.Contains(e.Keyword, "minimum") && e.ID == id
		}},
		{"the wrong type", frame(id, `{"id":7,"amount":1}`), func(err error) bool {
			e, ok := errors.AsType[*jsonschema.ValidationError](err)
			return ok && e.Path == "/id" && strings.Contains(e.Reason, "string")
		}},
		{"valid JSON that does not fit the Go type", frame(id, `{"id":"a","amount":1.5e400}`), func(err error) bool {
			_, ok := errors.AsType[*jsonschema.DecodeError](err)
			_, invalid := errors.AsType[*jsonschema.ValidationError](err)
			return ok || invalid
		}},
		{"an Avro schema id", frame(avroID, `{}`), func(err error) bool {
			e, ok := errors.AsType[*jsonschema.SchemaError](err)
			return ok && strings.Contains(e.Reason, "AVRO")
		}},
		{"a schema with a $ref to a file", frame(refID, `{"x":1}`), func(err error) bool {
			e, ok := errors.AsType[*jsonschema.SchemaError](err)
			return ok && strings.Contains(e.Reason, "not followed")
		}},
	} {
		_, err := d.Deserialize(context.Background(), meta, c.data)
		stage, _ := serde.StageOf(err)
		if err == nil || !failure.IsPermanent(err) || stage != "jsonschema" || !c.check(err) {
			t.Errorf("%s: %v (stage %q, class %v)", c.name, err, stage, failure.Classify(err))
		} else {
			t.Logf("%s: %v", c.name, err)
		}
	}
}

// TestHostilePath: a failing path built from the record's keys is bounded
// and printable.
func TestHostilePath(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	id := sreg.RegisterSchema(t, subject("strict"), sr.Schema{Type: sr.TypeJSON,
		Schema: `{"type":"object","additionalProperties":{"type":"integer"}}`})
	d := must(jsonschema.NewDeserializer[map[string]int](reg))
	key := "\x1b[31m" + strings.Repeat("k", 5000)
	_, err := d.Deserialize(context.Background(), meta, frame(id, `{"\u001b[31m`+strings.Repeat("k", 5000)+`":"x"}`))
	e, ok := errors.AsType[*jsonschema.ValidationError](err)
	if !ok {
		t.Fatalf("%v", err)
	}
	if len(e.Path) > 260 || strings.ContainsRune(e.Path, 0x1b) || !strings.HasPrefix(e.Path, "/\uFFFD[31mkkk") {
		t.Errorf("path %q (%d bytes) from key of %d bytes", e.Path[:min(len(e.Path), 40)], len(e.Path), len(key))
	}
}

// TestRegistryDown: registry failures are transient, none permanent, and
// go through the shared breaker.
func TestRegistryDown(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	id := sreg.RegisterSchema(t, subject("orders"), sr.Schema{Schema: orderSchema, Type: sr.TypeJSON})
	reg := newRegistry(t, sreg, registry.CircuitBreaker(registry.BreakerConfig{Failures: 1}))
	d := must(jsonschema.NewDeserializer[Order](reg))
	sreg.Stop()
	data := frame(id, `{"id":"a","amount":1}`)
	_, err := d.Deserialize(context.Background(), meta, data)
	if _, ok := errors.AsType[*registry.RegistryError](err); !ok || !failure.IsTransient(err) {
		t.Fatalf("registry down: %v", err)
	}
	if _, ok := failure.RetryAfterOf(err); !ok || reg.Breaker().State() != registry.Open {
		t.Fatalf("breaker %v, error %v: want open, with the time until the probe", reg.Breaker().State(), err)
	}
	_, err = d.Deserialize(context.Background(), meta, data)
	if !registry.IsBreakerOpen(err) || !failure.IsTransient(err) {
		t.Fatalf("while open: %v", err)
	}
}

// classified reports whether err carries an explicit class mark.
func classified(err error) bool {
	_, ok := failure.MarkOf(err)
	return ok
}

// TestSharedBreaker: an avro.Registry's Registry field gives JSON Schema
// the same cache and breaker: an outage seen by Avro lookups makes JSON
// Schema lookups fail fast, without a request.
func TestSharedBreaker(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	avroID := sreg.Register(t, subject("avro"), `{"type":"record","name":"A","fields":[{"name":"a","type":"long"}]}`)
	jsonID := sreg.RegisterSchema(t, subject("orders"), sr.Schema{Schema: orderSchema, Type: sr.TypeJSON})
	hc, calls := srtest.CountingClient()
	areg, err := avro.NewRegistry(sreg.URL(), avro.HTTPClient(hc), avro.Logger(quietLogger()),
		avro.CircuitBreaker(avro.BreakerConfig{Failures: 1}))
	if err != nil {
		t.Fatal(err)
	}
	ad := must(avro.NewDeserializer[struct {
		A int64 `avro:"a"`
	}](areg, `{"type":"record","name":"A","fields":[{"name":"a","type":"long"}]}`))
	jd := must(jsonschema.NewDeserializer[Order](areg.Registry))
	sreg.Stop()
	if _, err := ad.Deserialize(context.Background(), meta, append(avro.AppendWire(nil, avroID), 2)); !failure.IsTransient(err) {
		t.Fatalf("avro, registry down: %v", err)
	}
	before := calls.Load()
	_, err = jd.Deserialize(context.Background(), meta, frame(jsonID, `{"id":"a","amount":1}`))
	if !registry.IsBreakerOpen(err) || !failure.IsTransient(err) || calls.Load() != before {
		t.Fatalf("jsonschema after the Avro failure: %v (%d requests)", err, calls.Load()-before)
	}
}
