package avro

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/hamba/avro/v2"
	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// An Opt configures a [Registry]. It is a registry.Opt.
type Opt = registry.Opt

// BreakerConfig configures the circuit breaker around the registry
// (registry.BreakerConfig). The zero value is a valid default.
type BreakerConfig = registry.BreakerConfig

// Breaker is the circuit breaker around one [Registry]'s lookups
// (registry.Breaker).
type Breaker = registry.Breaker

// State is the state of a [Breaker] (registry.State).
type State = registry.State

// The states of a [Breaker].
const (
	Closed   = registry.Closed
	Open     = registry.Open
	HalfOpen = registry.HalfOpen
)

// BasicAuth authenticates every request with HTTP basic auth (a managed
// registry's API key and secret). Default: no authentication.
func BasicAuth(user, pass string) Opt { return registry.BasicAuth(user, pass) }

// TLSConfig sets the TLS configuration of the registry connections (client
// certificates, a private CA). Default: the system roots.
func TLSConfig(t *tls.Config) Opt { return registry.TLSConfig(t) }

// CAFile trusts the PEM certificates in path, in addition to the TLS
// configuration's roots (or instead of the system roots if it has none).
// [NewRegistry] fails if the file cannot be read. Default: none.
func CAFile(path string) Opt { return registry.CAFile(path) }

// HTTPClient sets the HTTP client. Its Transport is used as is (wrapped to
// read Retry-After headers), except that [TLSConfig] and [CAFile] require it
// to be nil or an *http.Transport. Default: a client on a clone of
// http.DefaultTransport.
func HTTPClient(hc *http.Client) Opt { return registry.HTTPClient(hc) }

// Timeout bounds one registry request. Default: 5s.
func Timeout(d time.Duration) Opt { return registry.Timeout(d) }

// CircuitBreaker configures the circuit breaker around the registry.
// Default: the zero [BreakerConfig].
func CircuitBreaker(b BreakerConfig) Opt { return registry.CircuitBreaker(b) }

// Logger receives the breaker's state changes. Default: slog.Default().
func Logger(l *slog.Logger) Opt { return registry.Logger(l) }

// NotFoundTTL is how long "schema id not found" is remembered, so that a
// storm of records with an unknown id does not become a storm of requests.
// Default: 30s. A negative value disables it.
func NotFoundTTL(d time.Duration) Opt { return registry.NotFoundTTL(d) }

// Registry is a client of a Confluent-compatible schema registry for Avro:
// the shared *registry.Registry (its cache of schemas by id, request
// deduplication and circuit breaker), plus a cache of parsed Avro writer
// schemas. Create one per registry and share it between all deserializers
// and serializers of the process; give its Registry field to the codecs of
// other formats (serde/jsonschema) to share the cache and the breaker. It
// is safe for concurrent use.
type Registry struct {
	*registry.Registry
	writers sync.Map // int → *writer
}

// writer is a writer schema from the registry.
type writer struct {
	id     int
	schema avro.Schema
	name   string // full name, or the type of an unnamed schema
}

// NewRegistry returns a client of the registry at url (several URLs,
// separated by commas, are tried in order on network errors).
func NewRegistry(url string, opts ...Opt) (*Registry, error) {
	r, err := registry.New(url, opts...)
	if err != nil {
		return nil, fmt.Errorf("avro: NewRegistry: %w", err)
	}
	return &Registry{Registry: r}, nil
}

// lookup returns the writer schema of id.
func (r *Registry) lookup(ctx context.Context, id int) (*writer, error) {
	if w, ok := r.writers.Load(id); ok {
		return w.(*writer), nil
	}
	s, err := r.Schema(ctx, id)
	if err != nil {
		if errors.Is(err, registry.ErrUnknownSchema) {
			return nil, failure.Permanent(&UnknownSchemaError{ID: id})
		}
		return nil, err
	}
	w, err := parseWriter(id, s)
	if err != nil {
		return nil, err
	}
	v, _ := r.writers.LoadOrStore(id, w)
	return v.(*writer), nil
}

// parseWriter parses a registry schema. Each schema gets its own name cache:
// two versions of com.acme.Order must not see each other. A panic of the
// Avro library on a hostile schema makes it unusable: permanent.
func parseWriter(id int, s sr.Schema) (w *writer, err error) {
	defer func() {
		if p := recover(); p != nil {
			w, err = nil, failure.Permanent(&SchemaError{ID: id, Reason: fmt.Sprintf("panic parsing it: %v", p)})
		}
	}()
	if s.Type != sr.TypeAvro {
		return nil, failure.Permanent(&SchemaError{ID: id, Reason: "schema type is " + s.Type.String() + ", not AVRO"})
	}
	if len(s.References) > 0 {
		return nil, failure.Permanent(&SchemaError{ID: id, Reason: "schema references are not supported"})
	}
	parsed, err := avro.ParseWithCache(s.Schema, "", &avro.SchemaCache{})
	if err != nil {
		return nil, failure.Permanent(&SchemaError{ID: id, Reason: err.Error()})
	}
	if p := emptyItems(parsed); p != "" {
		return nil, failure.Permanent(&SchemaError{ID: id, Reason: p + ": " + errEmptyItems.Error()})
	}
	return &writer{id: id, schema: parsed, name: nameOf(parsed)}, nil
}

// nameOf returns the full name of a named schema, or its type.
func nameOf(s avro.Schema) string {
	if n, ok := s.(avro.NamedSchema); ok {
		return n.FullName()
	}
	return string(s.Type())
}

// Register registers schema (Avro, in JSON) under subject, if it is not
// registered yet, and returns its id. The id is cached: one request per
// subject and schema per process. It goes through the circuit breaker.
func (r *Registry) Register(ctx context.Context, subject, schema string) (int, error) {
	return r.Registry.Register(ctx, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
}
