package registry

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// An Opt configures a [Registry].
type Opt func(*config)

type config struct {
	user, pass  string
	tls         *tls.Config
	caFile      string
	httpClient  *http.Client
	timeout     time.Duration
	breaker     BreakerConfig
	log         *slog.Logger
	notFoundTTL time.Duration
}

// BasicAuth authenticates every request with HTTP basic auth (a managed
// registry's API key and secret). Default: no authentication.
func BasicAuth(user, pass string) Opt {
	return func(c *config) { c.user, c.pass = user, pass }
}

// TLSConfig sets the TLS configuration of the registry connections (client
// certificates, a private CA). Default: the system roots.
func TLSConfig(t *tls.Config) Opt {
	return func(c *config) { c.tls = t }
}

// CAFile trusts the PEM certificates in path, in addition to the TLS
// configuration's roots (or instead of the system roots if it has none).
// [New] fails if the file cannot be read. Default: none.
func CAFile(path string) Opt {
	return func(c *config) { c.caFile = path }
}

// HTTPClient sets the HTTP client. Its Transport is used as is (wrapped to
// read Retry-After headers), except that [TLSConfig] and [CAFile] require it
// to be nil or an *http.Transport. Default: a client on a clone of
// http.DefaultTransport.
func HTTPClient(hc *http.Client) Opt {
	return func(c *config) { c.httpClient = hc }
}

// Timeout bounds one registry request. Default: 5s.
func Timeout(d time.Duration) Opt {
	return func(c *config) { c.timeout = d }
}

// CircuitBreaker configures the circuit breaker around the registry.
// Default: the zero [BreakerConfig].
func CircuitBreaker(b BreakerConfig) Opt {
	return func(c *config) { c.breaker = b }
}

// Logger receives the breaker's state changes. Default: slog.Default().
func Logger(l *slog.Logger) Opt {
	return func(c *config) { c.log = l }
}

// NotFoundTTL is how long "schema id not found" is remembered, so that a
// storm of records with an unknown id does not become a storm of requests.
// Default: 30s. A negative value disables it.
func NotFoundTTL(d time.Duration) Opt {
	return func(c *config) { c.notFoundTTL = d }
}

// Registry is a client of a Confluent-compatible schema registry, with a
// cache of schemas by id, request deduplication and a circuit breaker
// ([Breaker]). Create one per registry and share it between all
// deserializers and serializers of the process, whatever their format: the
// cache and the breaker are its. It is safe for concurrent use.
//
// A schema id is immutable, so a schema is fetched once per process: later
// lookups are answered from memory (a lock-free map read) and concurrent
// lookups of one id share one request.
type Registry struct {
	cl      *sr.Client
	timeout time.Duration
	br      *Breaker
	ttl     time.Duration

	schemas  sync.Map // int → sr.Schema
	ids      sync.Map // regKey → int
	lookups  flight[int, sr.Schema]
	registry flight[regKey, int]

	refs       sync.Map // refKey → sr.Schema
	refLookups flight[refKey, sr.Schema]

	mu      sync.Mutex
	missing map[int]time.Time // ids not found, until when
}

type regKey struct {
	subject string
	typ     sr.SchemaType
	schema  string
	refs    string
}

// New returns a client of the registry at url (several URLs, separated by
// commas, are tried in order on network errors).
func New(url string, opts ...Opt) (*Registry, error) {
	var c config
	for _, o := range opts {
		o(&c)
	}
	if strings.TrimSpace(url) == "" {
		return nil, errors.New("registry: New: empty registry URL")
	}
	if c.timeout <= 0 {
		c.timeout = 5 * time.Second
	}
	if c.log == nil {
		c.log = slog.Default()
	}
	if c.notFoundTTL == 0 {
		c.notFoundTTL = 30 * time.Second
	}
	hc, err := c.client()
	if err != nil {
		return nil, err
	}
	srOpts := []sr.ClientOpt{sr.URLs(strings.Split(url, ",")...), sr.HTTPClient(hc), sr.UserAgent("antidote")}
	if c.user != "" || c.pass != "" {
		srOpts = append(srOpts, sr.BasicAuth(c.user, c.pass))
	}
	cl, err := sr.NewClient(srOpts...)
	if err != nil {
		return nil, fmt.Errorf("registry: New: %w", err)
	}
	return &Registry{
		cl:      cl,
		timeout: c.timeout,
		br:      newBreaker(c.breaker, c.log.With("registry", url)),
		ttl:     c.notFoundTTL,
		missing: make(map[int]time.Time),
	}, nil
}

// client builds the HTTP client: TLS settings applied, transport wrapped to
// capture Retry-After.
func (c *config) client() (*http.Client, error) {
	hc := &http.Client{}
	if c.httpClient != nil {
		*hc = *c.httpClient
	}
	hc.Timeout = 0 // each request is bounded by its context
	tr := hc.Transport
	if c.tls != nil || c.caFile != "" {
		var base *http.Transport
		switch t := tr.(type) {
		case nil:
			base = http.DefaultTransport.(*http.Transport).Clone()
		case *http.Transport:
			base = t.Clone()
		default:
			return nil, errors.New("registry: New: TLSConfig and CAFile need an HTTPClient whose Transport is nil or an *http.Transport")
		}
		tc := &tls.Config{MinVersion: tls.VersionTLS12}
		if c.tls != nil {
			tc = c.tls.Clone()
		}
		if c.caFile != "" {
			pem, err := os.ReadFile(c.caFile)
			if err != nil {
				return nil, fmt.Errorf("registry: New: CAFile: %w", err)
			}
			if tc.RootCAs == nil {
				tc.RootCAs = x509.NewCertPool()
			}
			if !tc.RootCAs.AppendCertsFromPEM(pem) {
				return nil, fmt.Errorf("registry: New: CAFile: no PEM certificate in %s", c.caFile)
			}
		}
		base.TLSClientConfig = tc
		tr = base
	}
	if tr == nil {
		tr = http.DefaultTransport.(*http.Transport).Clone()
	}
	hc.Transport = hintTransport{tr}
	return hc, nil
}

// Breaker returns the circuit breaker around the registry.
func (r *Registry) Breaker() *Breaker { return r.br }

// Client returns the franz-go registry client, for calls this package does
// not make (compatibility checks, subjects). They bypass the cache and the
// breaker.
func (r *Registry) Client() *sr.Client { return r.cl }

// Schema returns schema id, from the cache or from the registry. Errors:
// a permanent [*UnknownSchemaError] when the registry has no such id, a
// transient [*RegistryError] otherwise (with failure.RetryAfter when the
// registry or the breaker gave a hint).
func (r *Registry) Schema(ctx context.Context, id int) (sr.Schema, error) {
	if s, ok := r.schemas.Load(id); ok {
		return s.(sr.Schema), nil
	}
	return r.lookupSlow(ctx, id)
}

func (r *Registry) lookupSlow(ctx context.Context, id int) (sr.Schema, error) {
	r.mu.Lock()
	until, ok := r.missing[id]
	if ok && time.Now().After(until) {
		delete(r.missing, id)
		ok = false
	}
	r.mu.Unlock()
	if ok {
		return sr.Schema{}, failure.Permanent(&UnknownSchemaError{ID: id})
	}
	if w, open := r.br.openFor(); open {
		return sr.Schema{}, failure.RetryAfter(w, &RegistryError{ID: id, Err: ErrBreakerOpen})
	}
	return r.lookups.do(ctx, id, func() (sr.Schema, error) { return r.fetch(ctx, id) })
}

// fetch asks the registry for schema id. It runs in its own goroutine, on
// a context that is not canceled with the caller's.
func (r *Registry) fetch(ctx context.Context, id int) (sr.Schema, error) {
	s, err := r.get(ctx, &RegistryError{ID: id},
		func(ctx context.Context) (sr.Schema, error) { return r.cl.SchemaByID(ctx, id) },
		[]int{sr.ErrSchemaNotFound.Code},
		func() error {
			if r.ttl > 0 {
				r.mu.Lock()
				r.missing[id] = time.Now().Add(r.ttl)
				r.mu.Unlock()
			}
			return failure.Permanent(&UnknownSchemaError{ID: id})
		})
	if err == nil {
		r.schemas.Store(id, s)
	}
	return s, err
}

// Reference returns the schema that a schema reference names (its subject
// and version), from the cache or from the registry: a version of a
// subject does not change. A subject or version the registry does not
// have is a permanent [*UnknownSchemaError]; other failures are transient,
// as for [Registry.Schema].
func (r *Registry) Reference(ctx context.Context, ref sr.SchemaReference) (sr.Schema, error) {
	k := refKey{ref.Subject, ref.Version}
	if s, ok := r.refs.Load(k); ok {
		return s.(sr.Schema), nil
	}
	e := &RegistryError{Subject: ref.Subject, Version: ref.Version}
	if w, open := r.br.openFor(); open {
		e.Err = ErrBreakerOpen
		return sr.Schema{}, failure.RetryAfter(w, e)
	}
	return r.refLookups.do(ctx, k, func() (sr.Schema, error) {
		s, err := r.get(ctx, e,
			func(ctx context.Context) (sr.Schema, error) {
				ss, err := r.cl.SchemaByVersion(ctx, ref.Subject, ref.Version)
				return ss.Schema, err
			},
			[]int{sr.ErrSubjectNotFound.Code, sr.ErrVersionNotFound.Code},
			func() error {
				return failure.Permanent(&UnknownSchemaError{Subject: ref.Subject, Version: ref.Version})
			})
		if err == nil {
			r.refs.Store(k, s)
		}
		return s, err
	})
}

type refKey struct {
	subject string
	version int
}

// get makes one lookup request, req, through the breaker, on a context
// that is not canceled with the caller's. A "not found" answer with one of
// the registry error codes notFound is a success for the breaker and the
// error of gone; e, with its Err set, is the error of any other failure.
func (r *Registry) get(ctx context.Context, e *RegistryError, req func(context.Context) (sr.Schema, error), notFound []int, gone func() error) (sr.Schema, error) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
	defer cancel()
	probe, wait, ok := r.br.allow(ctx)
	if !ok {
		e.Err = ErrBreakerOpen
		return sr.Schema{}, failure.RetryAfter(wait, e)
	}
	h := new(hint)
	s, err := guard(func() (sr.Schema, error) { return req(context.WithValue(ctx, hintKey{}, h)) })
	if err != nil {
		if re, ok := errors.AsType[*sr.ResponseError](err); ok && slices.Contains(notFound, re.ErrorCode) {
			r.br.done(probe, false, 0)
			return sr.Schema{}, gone()
		}
		e.Err = httpErr(err)
		return sr.Schema{}, r.failed(probe, e, h)
	}
	r.br.done(probe, false, 0)
	return s, nil
}

// failed reports a transient registry failure to the breaker and returns
// the caller's error, marked failure.RetryAfter with the longer of the
// registry's Retry-After and, when the breaker is open, the time until its
// next probe; marked transient otherwise. Every record that waits for the
// registry then wakes when the probe is due, not at its own backoff.
func (r *Registry) failed(probe bool, e *RegistryError, h *hint) error {
	w, open := r.br.done(probe, true, h.after)
	switch {
	case open:
		return failure.RetryAfter(max(w, h.after), e)
	case h.ok:
		return failure.RetryAfter(h.after, e)
	}
	return failure.Transient(e)
}

// guard runs fn, a registry request, and turns a panic in it (in the HTTP
// client, or in a transport given with [HTTPClient]) into a
// *serde.PanicError: the process must not crash, and the breaker must hear
// the outcome of every call it let through, or it would stay half-open.
func guard[V any](fn func() (V, error)) (v V, err error) {
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
	}()
	return fn()
}

// panicError is a recovered panic with the start of its stack.
func panicError(p any) error {
	buf := make([]byte, 2<<10)
	return &serde.PanicError{Stage: "schema-registry", Value: p, Stack: buf[:runtime.Stack(buf, false)]}
}

// Register registers schema under subject, if it is not registered yet,
// and returns its id. The id is cached: one request per subject and schema
// per process. It goes through the circuit breaker. An incompatible or
// invalid schema (HTTP 409, 422) is a permanent *RegistryError; other
// failures are transient.
func (r *Registry) Register(ctx context.Context, subject string, schema sr.Schema) (int, error) {
	k := regKey{subject: subject, typ: schema.Type, schema: schema.Schema}
	if len(schema.References) > 0 {
		k.refs = fmt.Sprint(schema.References)
	}
	if id, ok := r.ids.Load(k); ok {
		return id.(int), nil
	}
	if w, open := r.br.openFor(); open {
		return 0, failure.RetryAfter(w, &RegistryError{Subject: subject, Err: ErrBreakerOpen})
	}
	return r.registry.do(ctx, k, func() (int, error) {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), r.timeout)
		defer cancel()
		probe, wait, ok := r.br.allow(ctx)
		if !ok {
			return 0, failure.RetryAfter(wait, &RegistryError{Subject: subject, Err: ErrBreakerOpen})
		}
		h := new(hint)
		id, err := guard(func() (int, error) {
			return r.cl.RegisterSchema(context.WithValue(ctx, hintKey{}, h), subject, schema, -1, -1)
		})
		if err != nil {
			if re, ok := errors.AsType[*sr.ResponseError](err); ok && (re.StatusCode == http.StatusConflict || re.StatusCode == http.StatusUnprocessableEntity) {
				// Incompatible or invalid schema: the registry answered.
				r.br.done(probe, false, 0)
				return 0, failure.Permanent(&RegistryError{Subject: subject, Err: httpErr(err)})
			}
			return 0, r.failed(probe, &RegistryError{Subject: subject, Err: httpErr(err)}, h)
		}
		r.br.done(probe, false, 0)
		r.ids.Store(k, id)
		return id, nil
	})
}

// httpErr puts the status of a registry response in a *failure.HTTPError.
func httpErr(err error) error {
	if re, ok := errors.AsType[*sr.ResponseError](err); ok {
		return &failure.HTTPError{StatusCode: re.StatusCode, Err: err}
	}
	return err
}

// hint receives the Retry-After of a response, through the request context.
type hint struct {
	after time.Duration
	ok    bool
}

type hintKey struct{}

// hintTransport records the Retry-After header of 429 and 503 responses in
// the request context's *hint: sr.ResponseError does not carry headers.
type hintTransport struct{ next http.RoundTripper }

func (t hintTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.next.RoundTrip(req)
	if err != nil || (resp.StatusCode != http.StatusTooManyRequests && resp.StatusCode != http.StatusServiceUnavailable) {
		return resp, err
	}
	if h, ok := req.Context().Value(hintKey{}).(*hint); ok {
		h.after, h.ok = parseRetryAfter(resp.Header.Get("Retry-After"), time.Now())
	}
	return resp, err
}

// parseRetryAfter parses a Retry-After value: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.Atoi(v); err == nil {
		return time.Duration(max(s, 0)) * time.Second, true
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(t.Sub(now), 0), true
	}
	return 0, false
}

// flight deduplicates concurrent calls with the same key: one runs fn, in
// its own goroutine; every caller waits for it or for its own ctx.
type flight[K comparable, V any] struct {
	mu    sync.Mutex
	calls map[K]*call[V]
}

type call[V any] struct {
	done chan struct{}
	v    V
	err  error
}

func (f *flight[K, V]) do(ctx context.Context, k K, fn func() (V, error)) (V, error) {
	f.mu.Lock()
	c, ok := f.calls[k]
	if !ok {
		if f.calls == nil {
			f.calls = make(map[K]*call[V])
		}
		c = &call[V]{done: make(chan struct{})}
		f.calls[k] = c
		go func() {
			defer func() {
				if p := recover(); p != nil { // fetch and Register recover their own; a last guard
					var zero V
					c.v, c.err = zero, failure.Transient(panicError(p))
				}
				f.mu.Lock()
				delete(f.calls, k)
				f.mu.Unlock()
				close(c.done)
			}()
			c.v, c.err = fn()
		}()
	}
	f.mu.Unlock()
	select {
	case <-c.done:
		return c.v, c.err
	case <-ctx.Done():
		var zero V
		return zero, ctx.Err()
	}
}
