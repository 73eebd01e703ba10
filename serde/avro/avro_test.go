package avro_test

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	hamba "github.com/hamba/avro/v2"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
)

var meta = serde.Meta{Topic: "orders", Part: serde.Value}

// encode returns v in the wire format with schema id.
func encode(t testing.TB, id int, schema string, v any) []byte {
	t.Helper()
	b, err := hamba.Marshal(hamba.MustParse(schema), v)
	if err != nil {
		t.Fatal(err)
	}
	return append(avro.AppendWire(nil, id), b...)
}

func TestRoundTripAndEvolution(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	ctx := context.Background()

	// A v1 producer through the Serializer; a v2 reader gets the default.
	ser := must(avro.NewSerializer[orderV1T](reg, orderV1, func(*serde.Meta) string { return subject("orders") }))
	m := meta
	data, err := ser.Serialize(ctx, &m, orderV1T{ID: "o-1", Amount: 42, Note: "hi"})
	if err != nil {
		t.Fatal(err)
	}
	d := must(avro.NewDeserializer[Order](reg, orderV2))
	got, err := d.Deserialize(ctx, meta, data)
	if err != nil {
		t.Fatal(err)
	}
	if want := (Order{ID: "o-1", Amount: 42, Note: "hi", Currency: "EUR"}); got != want {
		t.Fatalf("got %+v, want %+v", got, want)
	}
}

func TestMulti(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	ctx := context.Background()
	sub := subject("mixed")
	// One topic, several record types: subjects by record name.
	oid := sreg.Register(t, sub+"-com.acme.Order", orderV1)
	rid := sreg.Register(t, sub+"-com.acme.Refund", refundSchema)
	aid := sreg.Register(t, sub+"-com.acme.Audit", auditSchema)

	d := must(avro.NewMulti(reg, avro.Record[Order](orderV2), avro.Record[Refund](refundSchema)))
	v, err := d.Deserialize(ctx, meta, encode(t, oid, orderV1, orderV1T{ID: "o", Amount: 1}))
	if o, ok := v.(Order); err != nil || !ok || o.Currency != "EUR" {
		t.Fatalf("order: %#v, %v", v, err)
	}
	v, err = d.Deserialize(ctx, meta, encode(t, rid, refundSchema, Refund{OrderID: "o", Amount: 1}))
	if r, ok := v.(Refund); err != nil || !ok || r.OrderID != "o" {
		t.Fatalf("refund: %#v, %v", v, err)
	}
	_, err = d.Deserialize(ctx, meta, encode(t, aid, auditSchema, audit{Who: "me"}))
	ute, ok := errors.AsType[*avro.UnknownTypeError](err)
	if !ok || ute.Name != "com.acme.Audit" || !avro.IsUnknownType(err) || !failure.IsPermanent(err) {
		t.Fatalf("audit: %v", err)
	}
	if _, err := avro.NewMulti(reg, avro.Record[Order](orderV2), avro.Record[orderV1T](orderV1)); err == nil {
		t.Fatal("two types for com.acme.Order: want an error")
	}
}

// TestBadBytes checks each poison pill's class, type and stage.
func TestBadBytes(t *testing.T) {
	sreg := srtest.New(t)
	reg := newRegistry(t, sreg)
	id := sreg.Register(t, subject("orders"), orderV1)
	aid := sreg.Register(t, subject("audit"), auditSchema)
	good := encode(t, id, orderV1, orderV1T{ID: "o-1", Amount: 42, Note: "a note long enough to truncate"})
	d := must(avro.NewDeserializer[Order](reg, orderV2))

	cases := []struct {
		name   string
		data   []byte
		target error
		check  func(error) bool
	}{
		{"kcat string", []byte("hello, not avro"), avro.ErrNotAvro, isType[*avro.WireError]},
		{"empty", nil, avro.ErrNotAvro, isType[*avro.WireError]},
		{"short", []byte{0, 0, 1}, avro.ErrNotAvro, isType[*avro.WireError]},
		{"unknown id", encode(t, 987654, orderV1, orderV1T{}), avro.ErrUnknownSchema, func(err error) bool {
			e, ok := errors.AsType[*avro.UnknownSchemaError](err)
			return ok && e.ID == 987654
		}},
		{"unknown type", encode(t, aid, auditSchema, audit{Who: "x"}), avro.ErrUnknownType, isType[*avro.UnknownTypeError]},
		{"truncated", good[:len(good)-10], nil, isType[*avro.DecodeError]},
		// The note is 30 bytes and a 1-byte length: cutting 31 bytes ends the
		// data exactly at a field boundary, which the library's Unmarshal
		// would read as a complete record.
		{"truncated at a field boundary", good[:len(good)-31], nil, isType[*avro.DecodeError]},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := d.Deserialize(context.Background(), meta, c.data)
			if err == nil {
				t.Fatal("no error")
			}
			if !failure.IsPermanent(err) {
				t.Errorf("class %v, want permanent: %v", failure.Classify(err), err)
			}
			if c.target != nil && !errors.Is(err, c.target) {
				t.Errorf("not %v: %v", c.target, err)
			}
			if !c.check(err) {
				t.Errorf("wrong error type: %T %v", err, err)
			}
			if s, ok := serde.StageOf(err); !ok || s != "avro" {
				t.Errorf("stage %q, want avro", s)
			}
		})
	}
}

func isType[E error](err error) bool { _, ok := errors.AsType[E](err); return ok }

// TestCache: one registry request per id, also under concurrency.
func TestCache(t *testing.T) {
	sreg := srtest.New(t)
	id := sreg.Register(t, subject("orders"), orderV1)
	hc, calls := srtest.CountingClient()
	// Latency keeps the first request in flight while the others arrive.
	sreg.SetFault(srtest.Fault{Latency: 50 * time.Millisecond})
	reg := newRegistry(t, sreg, avro.HTTPClient(hc))
	d := must(avro.NewDeserializer[Order](reg, orderV2))
	data := encode(t, id, orderV1, orderV1T{ID: "o"})

	var wg sync.WaitGroup
	for range 4 { // 4 partitions asking for the same id at once
		wg.Go(func() {
			for range 50 {
				if _, err := d.Deserialize(context.Background(), meta, data); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d registry requests for 200 decodes of one id, want 1", n)
	}
}

// TestTransient: 5xx, 429 with Retry-After and timeouts are transient.
func TestTransient(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	id := sreg.Register(t, subject("orders"), orderV1)
	data := encode(t, id, orderV1, orderV1T{ID: "o"})
	for _, c := range []struct {
		name  string
		fault srtest.Fault
		after time.Duration
	}{
		{"503", srtest.Fault{Status: http.StatusServiceUnavailable}, -1},
		{"500", srtest.Fault{Status: http.StatusInternalServerError}, -1},
		{"429", srtest.Fault{Status: http.StatusTooManyRequests, RetryAfter: 3 * time.Second}, 3 * time.Second},
		{"timeout", srtest.Fault{Latency: time.Second}, -1},
	} {
		t.Run(c.name, func(t *testing.T) {
			sreg.SetFault(c.fault)
			defer sreg.SetFault(srtest.Fault{})
			reg := newRegistry(t, sreg, avro.Timeout(100*time.Millisecond))
			d := must(avro.NewDeserializer[Order](reg, orderV2))
			_, err := d.Deserialize(context.Background(), meta, data)
			if !failure.IsTransient(err) || !isType[*avro.RegistryError](err) {
				t.Fatalf("want a transient *RegistryError, got %T %v", err, err)
			}
			after, ok := failure.RetryAfterOf(err)
			if c.after >= 0 && (!ok || after != c.after) {
				t.Fatalf("Retry-After %v %v, want %v", after, ok, c.after)
			}
			if s, _ := serde.StageOf(err); s != "avro" {
				t.Fatalf("stage %q", s)
			}
		})
	}
}

func TestOptions(t *testing.T) {
	if _, err := avro.NewRegistry(""); err == nil {
		t.Fatal("empty URL: want an error")
	}
	if _, err := avro.NewRegistry("http://x", avro.CAFile("/nonexistent.pem")); err == nil {
		t.Fatal("missing CA file: want an error")
	}
	if _, err := avro.NewDeserializer[Order](must(avro.NewRegistry("http://x")), "{not json"); err == nil {
		t.Fatal("bad reader schema: want an error")
	}
}

// TestBasicAuth: the registry sees the credentials.
func TestBasicAuth(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	id := sreg.Register(t, subject("orders"), orderV1)
	var user, pass string
	hc := &http.Client{Transport: roundTripFunc(func(req *http.Request) (*http.Response, error) {
		user, pass, _ = req.BasicAuth()
		return http.DefaultTransport.RoundTrip(req)
	})}
	reg := newRegistry(t, sreg, avro.BasicAuth("key", "secret"), avro.HTTPClient(hc))
	d := must(avro.NewDeserializer[Order](reg, orderV2))
	if _, err := d.Deserialize(context.Background(), meta, encode(t, id, orderV1, orderV1T{})); err != nil {
		t.Fatal(err)
	}
	if user != "key" || pass != "secret" {
		t.Fatalf("basic auth %q:%q", user, pass)
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
