package demo

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/poison"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/sreg"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// The Avro demo (--format avro): orders in the schema-registry wire format,
// an in-process schema registry, and the registry as the dependency that
// goes down midway.

// The demo's schemas. Version 2 of Order adds a field with a default: the
// producer moves to it when the registry goes down, so that records whose
// schema the consumer has never fetched arrive during the outage. The
// consumer reads both with version 1, the schema its Order type was written
// for. Refunds share the topic; the consumer has no Go type for them.
const (
	orderSchemaV1 = `{"type":"record","name":"Order","namespace":"com.example.shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"sku","type":"string"},
	{"name":"quantity","type":"int"},
	{"name":"amount_cents","type":"long"}]}`
	orderSchemaV2 = `{"type":"record","name":"Order","namespace":"com.example.shop","fields":[
	{"name":"id","type":"long"},
	{"name":"customer","type":"string"},
	{"name":"sku","type":"string"},
	{"name":"quantity","type":"int"},
	{"name":"amount_cents","type":"long"},
	{"name":"currency","type":"string","default":"EUR"}]}`
	refundSchema = `{"type":"record","name":"Refund","namespace":"com.example.shop","fields":[
	{"name":"order_id","type":"long"},
	{"name":"amount_cents","type":"long"}]}`

	// registryDependency names the registry in consumer.Config.Dependencies
	// and Stats.Dependencies.
	registryDependency = "schema-registry"
	// registryProbe is how often the circuit breaker lets a request through
	// while the registry is down.
	registryProbe = 500 * time.Millisecond
)

// refund is a record type of the demo's producer that the consumer does not
// handle.
type refund struct {
	OrderID     int   `avro:"order_id"`
	AmountCents int64 `avro:"amount_cents"`
}

var registryDep = depText{
	name:       "schema registry",
	short:      "registry",
	intro:      "the schema registry goes down for %v, as the producer moves to a new schema version",
	downEvent:  "records of the new schema version cannot be decoded; their partitions pause and retry",
	upEvent:    "the next probe closes the circuit breaker and wakes the waiting partitions",
	waited:     "held in their paused partitions until the registry answered, then processed in order",
	failed:     "failed lookups retried",
	failedNote: "connection refused, or the open breaker answered at once; retried in place, never dead-lettered",
}

// demoAvro is the Avro side of a demo run.
type demoAvro struct {
	topic string
	sreg  *sreg.Registry
	// reg is the consumer's client of the registry. Its requests go through
	// registryTransport, which counts them.
	reg      *avro.Registry
	dep      dependency
	requests atomic.Int64 // the consumer's registry requests
	// Registry requests when the outage began and ended.
	reqStart, reqEnd atomic.Int64

	// The producer's serializers, on a client of its own: it registers the
	// schemas up front and never needs the registry afterwards.
	v1, v2  *avro.Serializer[Order]
	refunds *avro.Serializer[refund]
	useV2   atomic.Bool
}

// newDemoAvro starts the in-process registry and registers the schemas.
func newDemoAvro(ctx context.Context, topic string, timeout time.Duration, logger *slog.Logger) (*demoAvro, error) {
	sreg, err := sreg.Start()
	if err != nil {
		return nil, fmt.Errorf("starting the in-process schema registry: %w", err)
	}
	a := &demoAvro{topic: topic, sreg: sreg, dep: dependency{depText: registryDep}}
	a.dep.takeDown, a.dep.bringUp = a.takeDown, a.bringUp
	if err := a.init(ctx, topic, timeout, logger); err != nil {
		sreg.Stop()
		return nil, err
	}
	return a, nil
}

func (a *demoAvro) init(ctx context.Context, topic string, timeout time.Duration, logger *slog.Logger) error {
	prod, err := avro.NewRegistry(a.sreg.URL(), avro.Logger(logger), avro.Timeout(timeout))
	if err != nil {
		return err
	}
	refundSubject := func(m *serde.Meta) string { return m.Topic + "-com.example.shop.Refund" }
	if a.v1, err = avro.NewSerializer[Order](prod, orderSchemaV1, nil); err != nil {
		return err
	}
	if a.v2, err = avro.NewSerializer[Order](prod, orderSchemaV2, nil); err != nil {
		return err
	}
	if a.refunds, err = avro.NewSerializer[refund](prod, refundSchema, refundSubject); err != nil {
		return err
	}
	m := &serde.Meta{Topic: topic, Part: serde.Value}
	for _, s := range []struct{ subject, schema string }{
		{avro.TopicNameStrategy(m), orderSchemaV1},
		{avro.TopicNameStrategy(m), orderSchemaV2},
		{refundSubject(m), refundSchema},
	} {
		if _, err := prod.Register(ctx, s.subject, s.schema); err != nil {
			return fmt.Errorf("registering the demo's schemas: %w", err)
		}
	}
	a.reg, err = avro.NewRegistry(a.sreg.URL(),
		avro.HTTPClient(&http.Client{Transport: registryTransport{a, http.DefaultTransport.(*http.Transport).Clone()}}),
		avro.Timeout(timeout),
		avro.CircuitBreaker(avro.BreakerConfig{Probe: backoff.Fixed(registryProbe)}),
		avro.Logger(logger))
	return err
}

func (a *demoAvro) close() { a.sreg.Stop() }

func (a *demoAvro) takeDown() {
	a.reqStart.Store(a.requests.Load())
	a.sreg.Stop()
	a.useV2.Store(true)
}

func (a *demoAvro) bringUp() error {
	a.reqEnd.Store(a.requests.Load())
	return a.sreg.Restart()
}

// outageRequests is the number of registry requests during the outage.
func (a *demoAvro) outageRequests() int64 { return a.reqEnd.Load() - a.reqStart.Load() }

// breakerState is the registry's entry in consumer.Config.Dependencies.
func (a *demoAvro) breakerState() string { return a.reg.Breaker().State().String() }

// deserializer decodes orders with version 1 of their schema, counting the
// decodes that failed because of the registry.
func (a *demoAvro) deserializer() (serde.Deserializer[Order], error) {
	d, err := avro.NewDeserializer[Order](a.reg, orderSchemaV1)
	if err != nil {
		return nil, err
	}
	return serde.DeserializerFunc[Order](func(ctx context.Context, m serde.Meta, data []byte) (Order, error) {
		v, err := d.Deserialize(ctx, m, data)
		if _, ok := errors.AsType[*avro.RegistryError](err); ok {
			a.dep.failures.Add(1)
		}
		return v, err
	}), nil
}

// value is record i of the plan in the wire format.
func (a *demoAvro) value(ctx context.Context, p *demoPlan, i int) ([]byte, error) {
	m := &serde.Meta{Topic: a.topic, Part: serde.Value}
	o := p.order(i)
	orders := a.v1
	if a.useV2.Load() {
		orders = a.v2
	}
	switch p.kinds[i] {
	case kindGarbage, kindEmpty:
		return p.value(i), nil // as in JSON: what a console producer writes
	case kindNoMagic:
		return poison.AvroBody, nil // a producer that does not use the registry
	case kindUnknownSchema:
		return poison.ConfluentFrame(poison.UnknownSchemaID, poison.AvroBody), nil
	case kindUnknownType:
		return a.refunds.Serialize(ctx, m, refund{OrderID: o.ID, AmountCents: o.AmountCents})
	case kindRejected:
		o.AmountCents = -o.AmountCents
	}
	b, err := orders.Serialize(ctx, m, o)
	if err == nil && p.kinds[i] == kindTruncatedAvro {
		b = b[:len(b)/2] // inside the customer string
	}
	return b, err
}

// registryTransport counts the consumer's registry requests, and notes the
// first one answered after the outage: the registry's recovery.
type registryTransport struct {
	a    *demoAvro
	next http.RoundTripper
}

func (t registryTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.a.requests.Add(1)
	resp, err := t.next.RoundTrip(req)
	if err == nil {
		t.a.dep.succeeded()
	}
	return resp, err
}
