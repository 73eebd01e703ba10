package run

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// hostileRecord is a record whose key and headers hold every kind of byte
// that must not reach an HTTP header as it is.
func hostileRecord() *consumer.Record[[]byte, []byte] {
	raw := &kgo.Record{
		Topic: "orders", Partition: 3, Offset: 1234,
		Timestamp: time.Date(2026, 12, 1, 10, 11, 12, 345e6, time.FixedZone("X", 3600)),
		Key:       []byte("k\r\nX-Injected: 1\x00\xff é"),
		Value:     []byte(`{"id":1}`),
		Headers: []kgo.RecordHeader{
			{Key: "trace=id", Value: []byte("a,b c\r\n")},
			{Key: "null-value", Value: nil},
			{Key: "bin", Value: []byte{0, 1, 0xfe}},
		},
	}
	return &consumer.Record[[]byte, []byte]{Raw: raw, Key: raw.Key, Value: raw.Value, Attempt: 2}
}

func newTestSink(t *testing.T, h http.Handler, cfg runHTTP) *httpSink {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	if cfg.URL == "" {
		cfg.URL = srv.URL + "/records"
	}
	s, err := newHTTPSink(&cfg, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

// TestHTTPSinkHeaders: the record's place and metadata arrive as the
// documented headers, the hostile bytes percent-encoded, and decode back
// to the exact bytes; nothing is injected.
func TestHTTPSinkHeaders(t *testing.T) {
	var got *http.Request
	var body []byte
	s := newTestSink(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got = r
		body, _ = io.ReadAll(r.Body)
	}), runHTTP{Headers: map[string]string{"Authorization": "Bearer t0k"}})
	r := hostileRecord()
	if err := s.handle(context.Background(), r); err != nil {
		t.Fatalf("handle: %v", err)
	}
	if got.Method != http.MethodPost || got.URL.Path != "/records" || string(body) != `{"id":1}` {
		t.Fatalf("got %s %s %q", got.Method, got.URL.Path, body)
	}
	want := map[string]string{
		"Content-Type":       "application/json",
		"Antidote-Topic":     "orders",
		"Antidote-Partition": "3",
		"Antidote-Offset":    "1234",
		"Antidote-Timestamp": "2026-12-01T09:11:12.345Z",
		"Antidote-Attempt":   "2",
		"Authorization":      "Bearer t0k",
	}
	for k, v := range want {
		if g := got.Header.Get(k); g != v {
			t.Errorf("%s = %q, want %q", k, g, v)
		}
	}
	if got.Header.Get("X-Injected") != "" {
		t.Fatal("a record key injected a header")
	}
	key, err := url.PathUnescape(got.Header.Get("Antidote-Key"))
	if err != nil || key != string(r.Raw.Key) {
		t.Fatalf("Antidote-Key %q decodes to %q (%v), want %q", got.Header.Get("Antidote-Key"), key, err, r.Raw.Key)
	}
	hs := got.Header.Values("Antidote-Header")
	if len(hs) != len(r.Raw.Headers) {
		t.Fatalf("Antidote-Header = %q, want %d values", hs, len(r.Raw.Headers))
	}
	for i, h := range hs {
		name, value, hasValue := strings.Cut(h, "=")
		n, _ := url.PathUnescape(name)
		v, _ := url.PathUnescape(value)
		rh := r.Raw.Headers[i]
		if n != rh.Key || v != string(rh.Value) || hasValue != (rh.Value != nil) {
			t.Errorf("header %d: %q decodes to %q=%q (value %v), want %q=%q", i, h, n, v, hasValue, rh.Key, rh.Value)
		}
	}
	// A null key sends no Antidote-Key.
	r.Raw.Key, r.Key = nil, nil
	if err := s.handle(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if _, ok := got.Header["Antidote-Key"]; ok {
		t.Fatal("a null key sent Antidote-Key")
	}
}

// TestHTTPSinkOutcomes: every status class and the Antidote-Outcome
// header settle the record as documented.
func TestHTTPSinkOutcomes(t *testing.T) {
	date := time.Now().Add(90 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name       string
		status     int
		headers    map[string]string
		body       string
		class      failure.Class // ClassUnclassified: processed
		after      time.Duration // the Retry-After hint, -1: none
		afterRange bool          // after is a lower bound (an HTTP date)
		msg        string
	}{
		{name: "200", status: 200, after: -1},
		{name: "204", status: 204, after: -1},
		{name: "400", status: 400, body: "missing field \x1b[31mid", class: failure.ClassPermanent, after: -1, msg: `HTTP 400 Bad Request: missing field \x1b[31mid`},
		{name: "404", status: 404, class: failure.ClassPermanent, after: -1},
		{name: "422", status: 422, class: failure.ClassPermanent, after: -1},
		{name: "301 not followed", status: 301, headers: map[string]string{"Location": "/elsewhere"}, class: failure.ClassPermanent, after: -1, msg: "HTTP 301"},
		{name: "408", status: 408, class: failure.ClassTransient, after: -1},
		{name: "429 seconds", status: 429, headers: map[string]string{"Retry-After": "7"}, class: failure.ClassTransient, after: 7 * time.Second},
		{name: "503 date", status: 503, headers: map[string]string{"Retry-After": date}, class: failure.ClassTransient, after: 80 * time.Second, afterRange: true},
		{name: "503 huge", status: 503, headers: map[string]string{"Retry-After": "99999999999"}, class: failure.ClassTransient, after: maxRetryAfter},
		{name: "500 bad retry-after", status: 500, headers: map[string]string{"Retry-After": "soon"}, class: failure.ClassTransient, after: -1},
		{name: "200 verdict permanent", status: 200, headers: map[string]string{"Antidote-Outcome": "permanent"}, class: failure.ClassPermanent, after: -1, msg: "Antidote-Outcome: permanent"},
		{name: "200 verdict transient", status: 200, headers: map[string]string{"Antidote-Outcome": "Transient", "Retry-After": "2"}, class: failure.ClassTransient, after: 2 * time.Second},
		{name: "500 verdict processed", status: 500, headers: map[string]string{"Antidote-Outcome": "processed"}, after: -1},
		{name: "422 unknown verdict", status: 422, headers: map[string]string{"Antidote-Outcome": "maybe\u00e9\"x"}, class: failure.ClassPermanent, after: -1, msg: `Antidote-Outcome "maybeé\"x" ignored`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newTestSink(t, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				for k, v := range tc.headers {
					w.Header().Set(k, v)
				}
				w.WriteHeader(tc.status)
				_, _ = io.WriteString(w, tc.body)
			}), runHTTP{})
			err := s.handle(context.Background(), hostileRecord())
			if tc.class == failure.ClassUnclassified {
				if err != nil {
					t.Fatalf("want processed, got %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("want an error, got processed")
			}
			if c, ok := failure.MarkOf(err); !ok || c != tc.class {
				t.Fatalf("class %v (marked %v), want %v: %v", c, ok, tc.class, err)
			}
			d, hinted := failure.RetryAfterOf(err)
			switch {
			case tc.after < 0 && hinted:
				t.Fatalf("unexpected Retry-After hint %v", d)
			case tc.after >= 0 && !hinted:
				t.Fatalf("no Retry-After hint, want %v", tc.after)
			case tc.after >= 0 && !tc.afterRange && d != tc.after:
				t.Fatalf("hint %v, want %v", d, tc.after)
			case tc.afterRange && (d < tc.after || d > 90*time.Second):
				t.Fatalf("hint %v, want about 90s", d)
			}
			if tc.msg != "" && !strings.Contains(err.Error(), tc.msg) {
				t.Fatalf("error %q does not hold %q", err, tc.msg)
			}
			// The dead letter names what failed, not *errors.errorString.
			if typ := deadletter.ErrorType(err); typ != "*run.HTTPStatusError" {
				t.Errorf("error type %q, want *run.HTTPStatusError", typ)
			}
		})
	}
}

// TestHTTPSinkTransport: a timeout and a refused connection are transient;
// a canceled context (the consumer stopping) is returned as it is, so the
// record stays unsettled.
func TestHTTPSinkTransport(t *testing.T) {
	release := make(chan struct{})
	s := newTestSink(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}), runHTTP{Timeout: 200 * time.Millisecond})
	t.Cleanup(func() { close(release) }) // before the server's Close, which waits for its handlers
	err := s.handle(context.Background(), hostileRecord())
	if c, _ := failure.MarkOf(err); c != failure.ClassTransient || !strings.Contains(err.Error(), "no response within 200ms") || deadletter.ErrorType(err) != "*run.HTTPTimeoutError" {
		t.Fatalf("timeout: %v (class %v)", err, c)
	}

	ctx, cancel := context.WithCancel(context.Background())
	go func() { time.Sleep(50 * time.Millisecond); cancel() }()
	s.timeout = time.Minute
	err = s.handle(ctx, hostileRecord())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("canceled: %v", err)
	}
	if _, marked := failure.MarkOf(err); marked {
		t.Fatalf("a cancellation is marked: %v", err)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close() // nothing listens there now
	refused, err := newHTTPSink(&runHTTP{URL: "http://" + addr + "/"}, "text/plain")
	if err != nil {
		t.Fatal(err)
	}
	err = refused.handle(context.Background(), hostileRecord())
	if c, _ := failure.MarkOf(err); c != failure.ClassTransient {
		t.Fatalf("refused: %v (class %v)", err, c)
	}
}

// TestHTTPSinkConcurrency: the sink never has more requests in flight than
// its limit, however many partitions call it at once, and reuses its
// connections.
func TestHTTPSinkConcurrency(t *testing.T) {
	var inFlight, peak atomic.Int64
	var conns sync.Map
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := inFlight.Add(1)
		for {
			p := peak.Load()
			if n <= p || peak.CompareAndSwap(p, n) {
				break
			}
		}
		time.Sleep(5 * time.Millisecond)
		inFlight.Add(-1)
		conns.Store(r.RemoteAddr, true)
	}))
	srv.Start()
	t.Cleanup(srv.Close)
	s, err := newHTTPSink(&runHTTP{URL: srv.URL, Concurrency: 3}, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				if err := s.handle(context.Background(), hostileRecord()); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	n := 0
	conns.Range(func(any, any) bool { n++; return true })
	t.Logf("peak in flight %d, connections %d for 120 requests", peak.Load(), n)
	if peak.Load() > 3 {
		t.Fatalf("peak in flight %d, limit 3", peak.Load())
	}
	if n > 3 {
		t.Fatalf("%d connections for a limit of 3: the pool does not reuse them", n)
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"0", 0, true}, {"  5 ", 5 * time.Second, true}, {"600", 10 * time.Minute, true}, {"601", maxRetryAfter, true},
		{"-1", 0, false}, {"1.5", 0, false}, {"", 0, false}, {"soon", 0, false},
		{"Tue, 01 Dec 2026 12:00:30 GMT", 30 * time.Second, true},
		{"Tue, 01 Dec 2026 11:00:00 GMT", 0, true}, // in the past: retry now
		{"Wed, 02 Dec 2026 12:00:00 GMT", maxRetryAfter, true},
	} {
		got, ok := parseRetryAfter(tc.in, now)
		if got != tc.want || ok != tc.ok {
			t.Errorf("parseRetryAfter(%q) = %v, %v; want %v, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

// FuzzPctEncode: any bytes encode to a valid header value of unreserved
// characters and %XX, that decodes back to the same bytes.
func FuzzPctEncode(f *testing.F) {
	for _, s := range []string{"", "plain", "a b", "\r\n", "\x00\xff", "é", "%41", "k=v,w", strconv.Itoa(1 << 30)} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		e := pctEncode(b)
		for i := 0; i < len(e); i++ {
			if c := e[i]; !unreserved(c) && c != '%' {
				t.Fatalf("pctEncode(%q) = %q holds %q", b, e, c)
			}
		}
		d, err := url.PathUnescape(e)
		if err != nil || d != string(b) {
			t.Fatalf("pctEncode(%q) = %q decodes to %q, %v", b, e, d, err)
		}
	})
}

// FuzzRetryAfter: any Retry-After value parses to a wait from 0 to the
// cap, or to none; it never panics.
func FuzzRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "120", "-5", "1e9", "Tue, 01 Dec 2026 12:00:30 GMT", "Monday, 02-Jan-06 15:04:05 MST", "Mon Jan  2 15:04:05 2006", "18446744073709551616"} {
		f.Add(s)
	}
	now := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseRetryAfter(s, now)
		if d < 0 || d > maxRetryAfter || (!ok && d != 0) {
			t.Fatalf("parseRetryAfter(%q) = %v, %v", s, d, ok)
		}
		h := http.Header{}
		h.Set("Retry-After", s)
		h.Set("Antidote-Outcome", s)
		_ = httpOutcome(503, h, []byte(s), "http://x/", now)
	})
}
