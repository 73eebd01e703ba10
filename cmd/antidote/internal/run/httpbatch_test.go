package run

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/clitest"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// batchReq is a batch request as a service reads it.
type batchReq struct {
	Records []struct {
		Topic     string  `json:"topic"`
		Partition int32   `json:"partition"`
		Offset    int64   `json:"offset"`
		Timestamp string  `json:"timestamp"`
		Attempt   int     `json:"attempt"`
		Key       *string `json:"key_base64"`
		Headers   []struct {
			Name  string  `json:"name"`
			Value *string `json:"value_base64"`
		} `json:"headers"`
		Value       json.RawMessage `json:"value"`
		ValueBase64 *string         `json:"value_base64"`
	} `json:"records"`
}

// fakeBatchService records each request and answers with answer.
type fakeBatchService struct {
	mu     sync.Mutex
	reqs   []batchReq
	ctypes []string
	answer func(req batchReq, w http.ResponseWriter)
}

func (f *fakeBatchService) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	b, _ := io.ReadAll(r.Body)
	var req batchReq
	if err := json.Unmarshal(b, &req); err != nil {
		http.Error(w, "not the batch JSON: "+err.Error(), http.StatusBadRequest)
		return
	}
	f.mu.Lock()
	f.reqs = append(f.reqs, req)
	f.ctypes = append(f.ctypes, r.Header.Get("Content-Type"))
	f.mu.Unlock()
	if f.answer != nil {
		f.answer(req, w)
	}
}

func newTestBatchSink(t *testing.T, f *fakeBatchService, cfg runHTTP, contentType string) *httpBatchSink {
	t.Helper()
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	cfg.URL = srv.URL + "/batch"
	if cfg.Batch == nil {
		cfg.Batch = &runHTTPBatch{}
	}
	s, err := newHTTPBatchSink(&cfg, contentType)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.close)
	return s
}

func b64(s *string) string {
	if s == nil {
		return "<null>"
	}
	b, err := base64.StdEncoding.DecodeString(*s)
	if err != nil {
		return "<bad base64: " + err.Error() + ">"
	}
	return string(b)
}

// TestHTTPBatchSinkBody: the records of a batch arrive as the documented
// JSON, in order; hostile keys, header names and values come back byte for
// byte; a null key and a null header value are null; a JSON value is the
// document itself, and string or bytes values are base64.
func TestHTTPBatchSinkBody(t *testing.T) {
	f := &fakeBatchService{}
	s := newTestBatchSink(t, f, runHTTP{}, "application/json")
	hostile := hostileRecord()
	nullKey := &consumer.Record[[]byte, []byte]{Raw: &kgo.Record{Topic: "orders", Partition: 3, Offset: 1235, Value: []byte(" [1, 2]\n")}, Value: []byte(" [1, 2]\n")}
	if err := s.handleBatch(context.Background(), []*consumer.Record[[]byte, []byte]{hostile, nullKey}); err != nil {
		t.Fatalf("handleBatch: %v", err)
	}
	if len(f.reqs) != 1 || len(f.reqs[0].Records) != 2 || f.ctypes[0] != "application/json" {
		t.Fatalf("requests %+v, content types %v: want one request of 2 records, application/json", f.reqs, f.ctypes)
	}
	r0, r1 := f.reqs[0].Records[0], f.reqs[0].Records[1]
	if r0.Topic != "orders" || r0.Partition != 3 || r0.Offset != 1234 || r0.Timestamp != "2026-12-01T09:11:12.345Z" || r0.Attempt != 2 {
		t.Errorf("record 0's place: %+v", r0)
	}
	if got := b64(r0.Key); got != string(hostile.Raw.Key) {
		t.Errorf("key %q, want %q", got, hostile.Raw.Key)
	}
	if len(r0.Headers) != 3 {
		t.Fatalf("headers %+v", r0.Headers)
	}
	for i, h := range hostile.Raw.Headers {
		want := "<null>"
		if h.Value != nil {
			want = string(h.Value)
		}
		if r0.Headers[i].Name != h.Key || b64(r0.Headers[i].Value) != want {
			t.Errorf("header %d: %q=%q, want %q=%q", i, r0.Headers[i].Name, b64(r0.Headers[i].Value), h.Key, want)
		}
	}
	if string(r0.Value) != `{"id":1}` || r0.ValueBase64 != nil {
		t.Errorf("record 0's value %s (base64 %v): want the JSON document", r0.Value, r0.ValueBase64)
	}
	if r1.Key != nil || string(r1.Value) != "[1, 2]" || r1.Attempt != 1 {
		t.Errorf("record 1: key %v, value %s, attempt %d: want null, [1, 2], 1", r1.Key, r1.Value, r1.Attempt)
	}

	// The bytes format: base64 values, any bytes at all.
	f2 := &fakeBatchService{}
	s2 := newTestBatchSink(t, f2, runHTTP{}, "application/octet-stream")
	bin := &consumer.Record[[]byte, []byte]{Raw: &kgo.Record{Topic: "b", Value: []byte("\x00\xff\"}]")}, Value: []byte("\x00\xff\"}]")}
	tomb := &consumer.Record[[]byte, []byte]{Raw: &kgo.Record{Topic: "b"}, Value: nil}
	if err := s2.handleBatch(context.Background(), []*consumer.Record[[]byte, []byte]{bin, tomb}); err != nil {
		t.Fatal(err)
	}
	if v := f2.reqs[0].Records[1].ValueBase64; v != nil {
		t.Errorf("a tombstone's value_base64 is %q, want null", *v)
	}
	if rec := f2.reqs[0].Records[0]; b64(rec.ValueBase64) != string(bin.Value) || rec.Value != nil {
		t.Errorf("bytes value: base64 %q, value %s", b64(rec.ValueBase64), rec.Value)
	}
}

// TestHTTPBatchSinkResults: each record is settled from its own result:
// processed, transient (with the service's retry delay, capped) and
// permanent, the error holding the service's words; a value that is not
// JSON is refused before the request, and the others still go.
func TestHTTPBatchSinkResults(t *testing.T) {
	f := &fakeBatchService{answer: func(req batchReq, w http.ResponseWriter) {
		var rs []map[string]any
		for _, r := range req.Records {
			switch r.Offset {
			case 13:
				rs = append(rs, map[string]any{"outcome": "processed"})
			case 14:
				rs = append(rs, map[string]any{"outcome": "transient", "error": "busy", "retry_after_ms": 1500})
			case 10:
				rs = append(rs, map[string]any{"outcome": "permanent", "error": "amount must be positive\x1b[2J"})
			default:
				rs = append(rs, map[string]any{"outcome": "transient", "retry_after_ms": int64(1) << 62})
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"results": rs})
	}}
	s := newTestBatchSink(t, f, runHTTP{}, "application/json")
	batch := docRecords(5) // offsets 10..14
	batch[2].Value = []byte("{not json")
	err := s.handleBatch(context.Background(), batch)
	var be *consumer.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("handleBatch: %v, want a *consumer.BatchError", err)
	}
	if n := len(f.reqs[0].Records); n != 4 {
		t.Fatalf("%d records sent, want 4 (the one that is not JSON stays out)", n)
	}
	// offset 10: permanent; 11: transient 1<<62 ms (capped); 12: not
	// JSON; 13: processed; 14: transient 1.5s.
	if e := be.Errs[0]; !failure.IsPermanent(e) || !strings.Contains(e.Error(), "amount must be positive") || strings.Contains(e.Error(), "\x1b") {
		t.Errorf("record 0: %v: want permanent with the service's words, escaped", e)
	}
	if d, ok := failure.RetryAfterOf(be.Errs[1]); !ok || d != maxRetryAfter {
		t.Errorf("record 1: %v (retry after %v, %v): want transient, capped at %v", be.Errs[1], d, ok, maxRetryAfter)
	}
	if e := be.Errs[2]; !failure.IsPermanent(e) || !strings.Contains(e.Error(), "not a JSON document") {
		t.Errorf("record 2: %v", e)
	}
	if e, ok := be.Errs[3]; ok {
		t.Errorf("record 3 processed, got %v", e)
	}
	if d, ok := failure.RetryAfterOf(be.Errs[4]); !ok || d != 1500*time.Millisecond || !strings.Contains(be.Errs[4].Error(), "busy") {
		t.Errorf("record 4: %v (retry after %v): want transient, 1.5s", be.Errs[4], d)
	}
	var se *HTTPStatusError
	if !errors.As(be.Errs[0], &se) || se.Status != 200 {
		t.Errorf("record 0's error %T: want *HTTPStatusError of status 200", be.Errs[0])
	}
}

// TestHTTPBatchSinkWholeRequest: answers that are not per record settle
// the whole request: an empty 2xx processes every record; 5xx and 429 are
// transient (Retry-After kept); 4xx, an Antidote-Outcome of permanent, a
// result count that does not match and an unknown outcome are permanent,
// which makes the consumer try each record alone.
func TestHTTPBatchSinkWholeRequest(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(w http.ResponseWriter)
		check  func(error) bool
		want   string
	}{
		{"empty 2xx", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNoContent) }, func(err error) bool { return err == nil }, "nil"},
		{"no results", func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"ok":true}`) }, func(err error) bool { return err == nil }, "nil"},
		{"503", func(w http.ResponseWriter) { http.Error(w, "down", http.StatusServiceUnavailable) }, failure.IsTransient, "transient"},
		{"429", func(w http.ResponseWriter) {
			w.Header().Set("Retry-After", "3")
			w.WriteHeader(http.StatusTooManyRequests)
		},
			func(err error) bool { d, ok := failure.RetryAfterOf(err); return ok && d == 3*time.Second }, "retry after 3s"},
		{"400", func(w http.ResponseWriter) { http.Error(w, "bad", http.StatusBadRequest) }, failure.IsPermanent, "permanent"},
		{"401", func(w http.ResponseWriter) { http.Error(w, "token expired", http.StatusUnauthorized) }, func(err error) bool {
			return failure.IsTransient(err) && strings.Contains(err.Error(), "the sink's credentials")
		}, "transient: the credentials, not the records"},
		{"403", func(w http.ResponseWriter) { http.Error(w, "denied", http.StatusForbidden) }, failure.IsTransient, "transient"},
		{"verdict", func(w http.ResponseWriter) {
			w.Header().Set(hdrOutcome, "permanent")
			_, _ = io.WriteString(w, `{"results":[]}`)
		}, failure.IsPermanent, "permanent"},
		{"count", func(w http.ResponseWriter) { _, _ = io.WriteString(w, `{"results":[{"outcome":"processed"}]}`) },
			func(err error) bool {
				return failure.IsPermanent(err) && strings.Contains(err.Error(), "1 results for 3 records")
			}, "permanent, naming the count"},
		{"outcome", func(w http.ResponseWriter) {
			_, _ = io.WriteString(w, `{"results":[{"outcome":"processed"},{"outcome":"ok"},{"outcome":"processed"}]}`)
		}, func(err error) bool { return failure.IsPermanent(err) && strings.Contains(err.Error(), `outcome "ok"`) }, "permanent, naming the outcome"},
		{"not json", func(w http.ResponseWriter) { _, _ = io.WriteString(w, `<html>`) }, failure.IsPermanent, "permanent"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeBatchService{answer: func(_ batchReq, w http.ResponseWriter) { tc.answer(w) }}
			s := newTestBatchSink(t, f, runHTTP{}, "application/json")
			err := s.handleBatch(context.Background(), docRecords(3))
			var be *consumer.BatchError
			if errors.As(err, &be) || !tc.check(err) {
				t.Errorf("handleBatch: %v: want %s for the whole request", err, tc.want)
			}
		})
	}
}

// TestHTTPBatchSinkBytes: a batch larger than batch.bytes goes in several
// requests, each within the limit (unless one record alone is larger),
// every record in exactly one of them, in order.
func TestHTTPBatchSinkBytes(t *testing.T) {
	f := &fakeBatchService{}
	s := newTestBatchSink(t, f, runHTTP{Batch: &runHTTPBatch{Bytes: 1024}}, "application/json")
	batch := docRecords(20)
	for i, r := range batch {
		r.Value = fmt.Appendf(nil, `{"n":%d,"pad":"%s"}`, i, strings.Repeat("x", 150))
	}
	if err := s.handleBatch(context.Background(), batch); err != nil {
		t.Fatal(err)
	}
	if len(f.reqs) < 4 {
		t.Fatalf("%d requests: want the 20 records of ~300 bytes split under 1024 bytes", len(f.reqs))
	}
	next := int64(10)
	for _, req := range f.reqs {
		for _, r := range req.Records {
			if r.Offset != next {
				t.Fatalf("offset %d, want %d: records out of order or repeated", r.Offset, next)
			}
			next++
		}
	}
	if next != 30 {
		t.Fatalf("records sent up to offset %d, want 29", next-1)
	}
}

// TestHTTPBatchSinkConfig: the batch keys are checked, and --check says
// how the records go.
func TestHTTPBatchSinkConfig(t *testing.T) {
	const base = `kafka:
  brokers: [127.0.0.1:9092]
pipelines:
  - name: svc
    topics: [orders]
    group: svc
    value:
      format: json
    sink:
      http:
        url: http://127.0.0.1:8080/batch
`
	for _, tc := range []struct {
		name, yaml, want string
	}{
		{"bytes", base + "        batch: {bytes: 10}\n", "f.yaml:12: pipelines[0].sink.http.batch.bytes: 10: at least 1024"},
		{"size", base + "        batch: {size: -1}\n", "pipelines[0].sink.http.batch.size: negative"},
		{"typo", base + "        batch: {sise: 10}\n", "pipelines[0].sink.http.batch.sise: unknown key (did you mean size?)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseRunFile("f.yaml", []byte(tc.yaml), nil, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v\nwant it to hold %q", err, tc.want)
			}
		})
	}
	file := clitest.WriteFile(t, "batch.yaml", base+"        batch: {size: 200, linger: 20ms}\n")
	code, out, errOut := runCmd(t, "run", "--check", "-c", file)
	if code != 0 {
		t.Fatalf("--check: exit %d: %s", code, errOut)
	}
	want := "http POST http://127.0.0.1:8080/batch in batches of at most 200 records or 4194304 bytes, linger 20ms (timeout 10s, at most 64 requests at once)"
	if !strings.Contains(out, want) {
		t.Errorf("--check printed:\n%s\nwant the line %q", out, want)
	}
}
