// Package srtest gives tests a Confluent-compatible schema registry: by
// default franz-go's in-process srfake registry behind a listener this
// package controls, so that tests can inject faults (stop/start for
// "connection refused", 5xx, 429 with Retry-After, latency) and count the
// requests.
//
// When ANTIDOTE_SCHEMA_REGISTRY_URL names a real registry (for example one
// started by scripts/registry.sh), [New] uses it instead; fault injection
// is then unavailable and tests that need it call [Registry.RequireFaults],
// which skips them. A real registry started by scripts/registry.sh can be
// killed (SIGKILL) and revived ([Registry.Kill], [Registry.Revive]; tests
// call [Registry.RequireKill]). [Python] and [Registry.NewProducer] give
// tests a foreign producer: Python's confluent-kafka and its serializers.
//
// [Start] starts the in-process registry whatever [EnvURL] says. (antidote
// demo does not use this package, which imports testing: its registry is
// cmd/antidote/internal/sreg.)
package srtest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"
	"github.com/twmb/franz-go/pkg/sr/srfake"
)

// EnvURL names a real registry for the tests, e.g. http://127.0.0.1:18081.
const EnvURL = "ANTIDOTE_SCHEMA_REGISTRY_URL"

// Fault is injected into every request while set.
type Fault struct {
	// Status, if not 0, answers every request with this HTTP status and a
	// registry error body.
	Status int
	// RetryAfter, if positive, is sent as a Retry-After header (seconds,
	// rounded up) with Status.
	RetryAfter time.Duration
	// Latency delays every request, faulty or not.
	Latency time.Duration
}

// Registry is a schema registry for tests.
type Registry struct {
	url  string
	real bool

	fake     *srfake.Registry
	addr     string
	mu       sync.Mutex
	srv      *http.Server
	fault    Fault
	requests atomic.Int64
}

// New starts an in-process registry, or uses the real one named by [EnvURL].
// It is stopped at the end of the test.
func New(t testing.TB) *Registry {
	t.Helper()
	if u := strings.TrimSpace(os.Getenv(EnvURL)); u != "" {
		t.Logf("srtest: real schema registry at %s", u)
		return &Registry{url: strings.TrimRight(u, "/"), real: true}
	}
	r, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// Start starts an in-process registry, whatever [EnvURL] says. Faults,
// [Registry.Stop] and [Registry.Restart] work as with [New]; the caller
// stops it with [Registry.Stop].
func Start() (*Registry, error) {
	r := &Registry{fake: srfake.NewRegistry()}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("srtest: listen: %w", err)
	}
	r.addr = ln.Addr().String()
	r.url = "http://" + r.addr
	r.serve(ln)
	return r, nil
}

// URL returns the registry's base URL.
func (r *Registry) URL() string { return r.url }

// Real reports whether this is a real registry from [EnvURL].
func (r *Registry) Real() bool { return r.real }

// RequireFaults skips the test when the registry is a real one, which
// cannot be stopped or made to fail.
func (r *Registry) RequireFaults(t testing.TB) {
	t.Helper()
	if r.real {
		t.Skip("srtest: fault injection needs the in-process registry (unset " + EnvURL + ")")
	}
}

// Register registers schema (Avro) under subject and returns its id.
func (r *Registry) Register(t testing.TB, subject, schema string) int {
	t.Helper()
	return r.RegisterSchema(t, subject, sr.Schema{Schema: schema, Type: sr.TypeAvro})
}

// Requests returns the number of requests the in-process registry has
// received (answered or faulted). Requests refused while stopped never
// reach it: count those on the client side (see [CountingClient]).
func (r *Registry) Requests() int64 { return r.requests.Load() }

// SetFault injects f into every request until it is replaced; the zero
// Fault clears it.
func (r *Registry) SetFault(f Fault) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.fault = f
}

// Stop closes the listener and every connection: clients get "connection
// refused" until [Registry.Start]. Stopping twice is harmless.
func (r *Registry) Stop() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// Start listens again on the same address, keeping the registered schemas.
func (r *Registry) Start(t testing.TB) {
	t.Helper()
	if err := r.Restart(); err != nil {
		t.Fatal(err)
	}
}

// Restart is [Registry.Start] for code that is not a test: it listens
// again on the same address, keeping the registered schemas, or returns
// why it cannot.
func (r *Registry) Restart() error {
	var ln net.Listener
	var err error
	for i := 0; i < 50; i++ { // the port may linger briefly after Stop
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("srtest: re-listen on %s: %w", r.addr, err)
	}
	r.serve(ln)
	return nil
}

func (r *Registry) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle), ReadHeaderTimeout: 5 * time.Second}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

func (r *Registry) handle(w http.ResponseWriter, req *http.Request) {
	r.requests.Add(1)
	r.mu.Lock()
	f := r.fault
	r.mu.Unlock()
	if f.Latency > 0 {
		select {
		case <-time.After(f.Latency):
		case <-req.Context().Done():
			return
		}
	}
	if f.Status != 0 {
		if f.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(int((f.RetryAfter+time.Second-1)/time.Second)))
		}
		w.Header().Set("Content-Type", "application/vnd.schemaregistry.v1+json")
		w.WriteHeader(f.Status)
		fmt.Fprintf(w, `{"error_code":%d,"message":"srtest: injected fault"}`, f.Status*100+1)
		return
	}
	r.fake.Handler().ServeHTTP(w, req)
}

// CountingClient returns an HTTP client that counts the requests it
// attempts, including those refused at connect time. Pass it to the code
// under test to count registry calls during an outage.
func CountingClient() (*http.Client, *atomic.Int64) {
	n := new(atomic.Int64)
	tr := http.DefaultTransport.(*http.Transport).Clone()
	return &http.Client{Transport: countingTransport{tr, n}}, n
}

type countingTransport struct {
	next http.RoundTripper
	n    *atomic.Int64
}

func (t countingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.n.Add(1)
	return t.next.RoundTrip(req)
}

// RegisterSchema registers s (any schema type) under subject and returns
// its id.
func (r *Registry) RegisterSchema(t testing.TB, subject string, s sr.Schema) int {
	t.Helper()
	cl, err := sr.NewClient(sr.URLs(r.url))
	if err != nil {
		t.Fatalf("srtest: %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	id, err := cl.RegisterSchema(ctx, subject, s, -1, -1)
	if err != nil {
		t.Fatalf("srtest: register %s: %v", subject, err)
	}
	return id
}

// EnvLogs names the environment variable that, set to 1, sends the logs of
// the code under test to stderr.
const EnvLogs = "ANTIDOTE_TEST_LOGS"

// Logger returns the logger for the code under test (consumers, registry
// clients): it discards everything unless [EnvLogs] is 1, so that the
// test logs (timings, request counts) stay readable with -v, as the test
// command runs the schema-registry pass.
func Logger() *slog.Logger {
	if os.Getenv(EnvLogs) != "1" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, nil))
}
