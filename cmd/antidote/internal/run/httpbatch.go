package run

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// With http.batch set, the HTTP sink POSTs the records of a partition in
// batches: one request carries many records, and the response settles each.
// The request body is JSON (Content-Type: application/json):
//
//	{"records": [
//	  {"topic": "orders", "partition": 0, "offset": 42,
//	   "timestamp": "2026-12-05T10:00:00.000Z", "attempt": 1,
//	   "key_base64": "b3JkZXItMQ==",            (null for a null key)
//	   "headers": [{"name": "trace", "value_base64": "..."}],
//	   "value": {...}}                          (json, json-schema, avro, protobuf)
//	   "value_base64": "..."                    (string, bytes; null for a
//	                                            tombstone)
//	]}
//
// Record bytes are hostile input: the key, the header values and the
// values of the string and bytes formats are base64 (standard, padded),
// header names are JSON strings, and a value of the JSON formats is the
// decoded JSON document itself. The response settles the records:
//
//	2xx with {"results": [...]}  one result per record, in the request's
//	                             order: {"outcome": "processed"},
//	                             {"outcome": "transient", "error": "...",
//	                             "retry_after_ms": 500}, or
//	                             {"outcome": "permanent", "error": "..."}
//	2xx without results          every record processed
//	408, 429, 5xx                the whole request transient (retried;
//	                             Retry-After honoured)
//	any other status             the whole request refused: each record is
//	                             sent again alone, so that a record the
//	                             service cannot read is found and settled by
//	                             itself
//
// A response header Antidote-Outcome overrides the status for the whole
// request, as with one record per request. A 2xx answer whose results do not
// match the request (another count, an unknown outcome, no JSON) refuses
// the whole request too. A batch larger than http.batch.bytes goes in
// several requests.

// runHTTPBatch sizes the requests of the batching HTTP sink.
type runHTTPBatch = runBulkBatch

// Defaults of the batching HTTP sink.
const (
	defaultHTTPBatchSize  = 500
	defaultHTTPBatchBytes = 4 << 20
)

// maxBatchResponse is the most bytes of a batch response read.
const maxBatchResponse = 16 << 20

// httpBatchSink is the HTTP sink of a pipeline with http.batch.
type httpBatchSink struct {
	*httpSink
	size   int
	bytes  int
	linger time.Duration
	b64    bool // the values are base64 (string, bytes), not JSON
}

func newHTTPBatchSink(c *runHTTP, contentType string) (*httpBatchSink, error) {
	s, err := newHTTPSink(c, "application/json")
	if err != nil {
		return nil, err
	}
	return &httpBatchSink{
		httpSink: s,
		size:     int(cmpInt(int64(c.Batch.Size), defaultHTTPBatchSize)),
		bytes:    int(cmpInt(c.Batch.Bytes, defaultHTTPBatchBytes)),
		linger:   cmpDur(c.Batch.Linger, defaultBulkLinger),
		b64:      contentType != "application/json",
	}, nil
}

func (s *httpBatchSink) describe() string {
	return fmt.Sprintf("http POST %s in batches of at most %d records or %d bytes, linger %v (timeout %v, at most %d requests at once)",
		s.shownURL, s.size, s.bytes, s.linger, s.timeout, cap(s.sem))
}

func (s *httpBatchSink) batching() consumer.Batching {
	return consumer.Batching{Size: s.size, Linger: s.linger}
}

// handle sends one record: a batch of one.
func (s *httpBatchSink) handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error {
	return oneOfBatch(s.handleBatch(ctx, []*consumer.Record[[]byte, []byte]{r}))
}

// oneOfBatch is the failure of a batch of one.
func oneOfBatch(err error) error {
	var be *consumer.BatchError
	if errors.As(err, &be) {
		return be.Errs[0]
	}
	return err
}

// handleBatch sends the records of one partition: one request, or several
// when the body would pass the byte limit.
func (s *httpBatchSink) handleBatch(ctx context.Context, batch []*consumer.Record[[]byte, []byte]) error {
	errs := map[int]error{}
	var body []byte
	var idx []int
	send := func() error {
		if len(idx) == 0 {
			return nil
		}
		body = append(body, "]}"...)
		err := s.post(ctx, body, idx, errs)
		body, idx = nil, nil // a body is never reused: the transport may still read it
		return err
	}
	for i, r := range batch {
		entry, err := s.appendRecord(nil, r)
		if err != nil {
			errs[i] = err
			continue
		}
		if len(idx) > 0 && len(body)+1+len(entry)+2 > s.bytes {
			if err := send(); err != nil {
				return err
			}
		}
		if len(idx) == 0 {
			body = append(make([]byte, 0, min(s.bytes, 64<<10)), `{"records":[`...)
		} else {
			body = append(body, ',')
		}
		body = append(body, entry...)
		idx = append(idx, i)
	}
	if err := send(); err != nil {
		return err
	}
	if len(errs) > 0 {
		return &consumer.BatchError{Errs: errs}
	}
	return nil
}

// appendRecord appends r's JSON object to b; an error is the record's.
func (s *httpBatchSink) appendRecord(b []byte, r *consumer.Record[[]byte, []byte]) ([]byte, error) {
	raw := r.Raw
	b = append(b, `{"topic":`...)
	b = appendJSONString(b, raw.Topic)
	b = append(b, `,"partition":`...)
	b = strconv.AppendInt(b, int64(raw.Partition), 10)
	b = append(b, `,"offset":`...)
	b = strconv.AppendInt(b, raw.Offset, 10)
	b = append(b, `,"timestamp":"`...)
	b = raw.Timestamp.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z07:00")
	b = append(b, `","attempt":`...)
	b = strconv.AppendInt(b, int64(max(r.Attempt, 1)), 10)
	b = append(b, `,"key_base64":`...)
	if r.Key == nil { // decoded with key.format, or as fetched
		b = append(b, "null"...)
	} else {
		b = appendBase64(b, r.Key)
	}
	b = append(b, `,"headers":[`...)
	for i, h := range raw.Headers {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"name":`...)
		b = appendJSONString(b, h.Key)
		b = append(b, `,"value_base64":`...)
		if h.Value == nil {
			b = append(b, "null"...)
		} else {
			b = appendBase64(b, h.Value)
		}
		b = append(b, '}')
	}
	b = append(b, ']')
	if s.b64 {
		b = append(b, `,"value_base64":`...)
		if r.Raw.Value == nil {
			b = append(b, "null"...) // a tombstone
		} else {
			b = appendBase64(b, r.Value)
		}
	} else {
		doc := bytes.TrimSpace(r.Value)
		if !json.Valid(doc) {
			return b, failure.Permanent(errors.New("the value is not a JSON document"))
		}
		b = append(b, `,"value":`...)
		b = append(b, doc...)
	}
	return append(b, '}'), nil
}

// truncate cuts s to at most n bytes on a character's boundary, marking
// the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func appendBase64(b, v []byte) []byte {
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, v)
	return append(b, '"')
}

// batchResult is one record's result in a batch response.
type batchResult struct {
	Outcome      string `json:"outcome"`
	Error        string `json:"error"`
	RetryAfterMS *int64 `json:"retry_after_ms"`
}

// post sends one request of the records idx (indexes into the batch) and
// records each record's failure in errs; an error is the request's,
// failing every record of the batch.
func (s *httpBatchSink) post(ctx context.Context, body []byte, idx []int, errs map[int]error) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return failure.Permanent(err)
	}
	req.Header["Content-Type"] = []string{"application/json"}
	for k, v := range s.static {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return failure.Transient(&HTTPTimeoutError{URL: s.shownURL, Timeout: s.timeout})
		}
		return failure.Transient(fmt.Errorf("POST %s: %w", s.shownURL, unwrapURLError(err)))
	}
	defer resp.Body.Close()
	rb, rerr := io.ReadAll(io.LimitReader(resp.Body, maxBatchResponse+1))
	now := time.Now()
	switch v := strings.ToLower(strings.TrimSpace(resp.Header.Get(hdrOutcome))); {
	case resp.StatusCode/100 != 2, v == "processed", v == "transient", v == "permanent":
		// The status, or the verdict, is the whole request's.
		head := rb[:min(len(rb), errorBodyBytes)]
		return httpOutcome(resp.StatusCode, resp.Header, head, s.shownURL, now)
	}
	if rerr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return failure.Transient(fmt.Errorf("POST %s: reading the response: %w", s.shownURL, rerr))
	}
	results, err := parseBatchResults(rb, len(idx))
	if err != nil {
		// The service answered something other than the contract: each
		// record goes again alone, and then is dead-lettered with this.
		return failure.Permanent(&HTTPStatusError{resp.StatusCode, fmt.Sprintf("POST %s: HTTP %d: %v", s.shownURL, resp.StatusCode, err)})
	}
	for k, res := range results {
		if e := res.failure(resp.StatusCode, s.shownURL); e != nil {
			errs[idx[k]] = e
		}
	}
	return nil
}

// parseBatchResults reads a 2xx response: nil results (every record
// processed) for an empty body or one without "results".
func parseBatchResults(b []byte, n int) ([]batchResult, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	if len(b) > maxBatchResponse {
		return nil, fmt.Errorf("the response has more than %d bytes", maxBatchResponse)
	}
	var resp struct {
		Results *[]batchResult `json:"results"`
	}
	if err := json.Unmarshal(b, &resp); err != nil {
		return nil, fmt.Errorf("the response is not the JSON of a batch answer: %v", err)
	}
	if resp.Results == nil {
		return nil, nil
	}
	rs := *resp.Results
	if len(rs) != n {
		return nil, fmt.Errorf("%d results for %d records", len(rs), n)
	}
	for i, r := range rs {
		switch r.Outcome {
		case "processed", "transient", "permanent":
		default:
			o := cli.Safe(r.Outcome)
			if len(o) > 40 {
				o = o[:40] + "..."
			}
			return nil, fmt.Errorf("result %d: outcome %q: want processed, transient or permanent", i, o)
		}
	}
	return rs, nil
}

// failure is the record's error for its result: nil when processed.
func (r batchResult) failure(status int, shownURL string) error {
	if r.Outcome == "processed" {
		return nil
	}
	msg := fmt.Sprintf("POST %s: HTTP %d: %s", shownURL, status, r.Outcome)
	if e := strings.TrimSpace(cli.Safe(r.Error)); e != "" {
		e = truncate(e, errorBodyBytes)
		msg += ": " + e
	}
	err := &HTTPStatusError{status, msg}
	if r.Outcome == "permanent" {
		return failure.Permanent(err)
	}
	if r.RetryAfterMS != nil && *r.RetryAfterMS >= 0 {
		ms := min(*r.RetryAfterMS, int64(maxRetryAfter/time.Millisecond))
		return failure.RetryAfter(time.Duration(ms)*time.Millisecond, err)
	}
	return failure.Transient(err)
}
