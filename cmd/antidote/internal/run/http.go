package run

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// The HTTP sink POSTs each record to a URL: the decoded value is the body,
// and the record's place and metadata are request headers. Record bytes
// are hostile input: the key and the record headers are percent-encoded
// (every byte outside A-Z a-z 0-9 - . _ ~ becomes %XX), so that no record
// can add a header, split a request or smuggle a control character.
//
//	Content-Type        application/json (json, avro, json-schema),
//	                    text/plain; charset=utf-8 (string),
//	                    application/octet-stream (bytes)
//	Antidote-Topic      the record's topic
//	Antidote-Partition  its partition
//	Antidote-Offset     its offset
//	Antidote-Timestamp  its timestamp, RFC 3339 in UTC with milliseconds
//	Antidote-Key        its key, percent-encoded; absent for a null key
//	Antidote-Header     one per record header, in order: NAME=VALUE, both
//	                    percent-encoded (a null value is NAME alone)
//	Antidote-Attempt    1 on the first try, then 2, 3, ... on retries
//
// The response settles the record:
//
//	2xx                          processed
//	408, 429, 5xx                transient (retried; Retry-After honoured)
//	401, 403                     transient: the sink's credentials, not the
//	                             record, are wrong
//	any other status (3xx, 4xx)  permanent (dead-lettered); redirects are not followed
//	timeout, connection error    transient
//
// and a response header Antidote-Outcome (processed, transient or
// permanent) overrides the status: a service can answer 200 with
// Antidote-Outcome: permanent to reject a record it has read. Any other
// value of it is ignored (the status decides) and named in the error.

// Header names of the HTTP sink.
const (
	hdrTopic     = "Antidote-Topic"
	hdrPartition = "Antidote-Partition"
	hdrOffset    = "Antidote-Offset"
	hdrTimestamp = "Antidote-Timestamp"
	hdrKey       = "Antidote-Key"
	hdrHeader    = "Antidote-Header"
	hdrAttempt   = "Antidote-Attempt"
	hdrOutcome   = "Antidote-Outcome"
)

// maxRetryAfter caps a Retry-After: a service cannot park a partition for
// longer than this per try.
const maxRetryAfter = 10 * time.Minute

// errorBodyBytes is how much of an error response's body goes into the
// error (and so into the dead letter's message header).
const errorBodyBytes = 200

// drainBytes is how much of a response body is read, so that the
// connection can be reused; a longer body closes the connection.
const drainBytes = 64 << 10

// httpSink is the HTTP sink of one pipeline.
type httpSink struct {
	url         string
	shownURL    string // without the password of the URL
	client      *http.Client
	timeout     time.Duration
	sem         chan struct{}
	static      http.Header
	contentType string
}

// newHTTPSink builds the sink; contentType is the format's.
func newHTTPSink(c *runHTTP, contentType string) (*httpSink, error) {
	timeout := c.Timeout
	if timeout == 0 {
		timeout = defaultHTTPTimeout
	}
	n := c.Concurrency
	if n == 0 {
		n = defaultHTTPConcurrency
	}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: min(timeout, 30*time.Second), KeepAlive: 30 * time.Second}).DialContext,
		MaxIdleConns:          n,
		MaxIdleConnsPerHost:   n,
		MaxConnsPerHost:       n,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   min(timeout, 10*time.Second),
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     true,
	}
	if c.TLS != nil {
		cfg, err := c.TLS.Config()
		if err != nil {
			return nil, err
		}
		tr.TLSClientConfig = cfg
	}
	u, _ := url.Parse(c.URL)
	s := &httpSink{
		url:      c.URL,
		shownURL: u.Redacted(),
		client: &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // a redirect is the status it is: permanent
			},
		},
		timeout:     timeout,
		sem:         make(chan struct{}, n),
		static:      http.Header{},
		contentType: contentType,
	}
	for k, v := range c.Headers {
		s.static.Set(k, v)
	}
	return s, nil
}

func (s *httpSink) describe() string {
	return fmt.Sprintf("http POST %s (timeout %v, at most %d requests at once)", s.shownURL, s.timeout, cap(s.sem))
}

func (s *httpSink) close() { s.client.CloseIdleConnections() }

// handle POSTs one record and classifies the outcome.
func (s *httpSink) handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error {
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return ctx.Err()
	}
	defer func() { <-s.sem }()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.url, bytes.NewReader(r.Value))
	if err != nil {
		return failure.Permanent(err)
	}
	setRecordHeaders(req.Header, r, s.contentType)
	for k, v := range s.static {
		req.Header[k] = v
	}
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err() // stopping or revoked: the record stays unsettled
		}
		if errors.Is(err, context.DeadlineExceeded) {
			return failure.Transient(&HTTPTimeoutError{URL: s.shownURL, Timeout: s.timeout})
		}
		return failure.Transient(fmt.Errorf("POST %s: %w", s.shownURL, unwrapURLError(err)))
	}
	head := make([]byte, errorBodyBytes)
	n, _ := io.ReadFull(resp.Body, head)
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, drainBytes))
	_ = resp.Body.Close()
	return httpOutcome(resp.StatusCode, resp.Header, head[:n], s.shownURL, time.Now())
}

// unwrapURLError drops the *url.Error's method and URL, which the caller
// names once.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// setRecordHeaders sets the headers of the mapping above.
func setRecordHeaders(h http.Header, r *consumer.Record[[]byte, []byte], contentType string) {
	raw := r.Raw
	h["Content-Type"] = []string{contentType}
	h[hdrTopic] = []string{raw.Topic}
	h[hdrPartition] = []string{strconv.FormatInt(int64(raw.Partition), 10)}
	h[hdrOffset] = []string{strconv.FormatInt(raw.Offset, 10)}
	h[hdrTimestamp] = []string{raw.Timestamp.UTC().Format("2006-01-02T15:04:05.000Z07:00")}
	h[hdrAttempt] = []string{strconv.Itoa(max(r.Attempt, 1))}
	if r.Key != nil { // decoded with key.format, or as fetched
		h[hdrKey] = []string{pctEncode(r.Key)}
	}
	if len(raw.Headers) > 0 {
		vs := make([]string, len(raw.Headers))
		for i, rh := range raw.Headers {
			v := pctEncode([]byte(rh.Key))
			if rh.Value != nil {
				v += "=" + pctEncode(rh.Value)
			}
			vs[i] = v
		}
		h[hdrHeader] = vs
	}
}

// HTTPStatusError is the failure of a record the service answered with a
// status (or an Antidote-Outcome) that is not success. Its type names the
// dead letters of such records.
type HTTPStatusError struct {
	Status int // the HTTP status
	msg    string
}

func (e *HTTPStatusError) Error() string { return e.msg }

// HTTPTimeoutError is the failure of a record the service did not answer
// within the sink's timeout.
type HTTPTimeoutError struct {
	URL     string // as shown: without credentials
	Timeout time.Duration
}

func (e *HTTPTimeoutError) Error() string {
	return fmt.Sprintf("POST %s: no response within %v", e.URL, e.Timeout)
}

// httpOutcome classifies a response: nil for processed, else an error
// marked transient (with the Retry-After hint) or permanent.
func httpOutcome(status int, h http.Header, body []byte, shownURL string, now time.Time) error {
	msg := fmt.Sprintf("POST %s: HTTP %d", shownURL, status)
	if t := http.StatusText(status); t != "" {
		msg += " " + t
	}
	if b := strings.TrimSpace(cli.Safe(string(body))); b != "" {
		msg += ": " + b
	}
	verdict := strings.ToLower(strings.TrimSpace(h.Get(hdrOutcome)))
	switch verdict {
	case "processed":
		return nil
	case "transient":
		return retryAfter(h, now, &HTTPStatusError{status, fmt.Sprintf("%s (%s: transient)", msg, hdrOutcome)})
	case "permanent":
		return failure.Permanent(&HTTPStatusError{status, fmt.Sprintf("%s (%s: permanent)", msg, hdrOutcome)})
	case "":
	default:
		v := cli.Safe(h.Get(hdrOutcome))
		if len(v) > 40 {
			v = v[:40] + "..."
		}
		msg += fmt.Sprintf(" (%s %q ignored: processed, transient or permanent)", hdrOutcome, v)
	}
	switch {
	case status >= 200 && status <= 299:
		return nil
	case status == http.StatusRequestTimeout, status == http.StatusTooManyRequests, status >= 500 && status <= 599:
		return retryAfter(h, now, &HTTPStatusError{status, msg})
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		// The sink's credentials, not the record: a permanent failure
		// would dead-letter every record until someone fixes the token.
		// The partition waits, stuck and visible.
		return retryAfter(h, now, &HTTPStatusError{status, msg + " (the sink's credentials: retried until they are fixed)"})
	}
	return failure.Permanent(&HTTPStatusError{status, msg})
}

// retryAfter marks err transient, with the response's Retry-After as a hint.
func retryAfter(h http.Header, now time.Time, err error) error {
	if d, ok := parseRetryAfter(h.Get("Retry-After"), now); ok {
		return failure.RetryAfter(d, err)
	}
	return failure.Transient(err)
}

// parseRetryAfter reads a Retry-After value: seconds, or an HTTP date. It
// caps the wait at maxRetryAfter and reports false for anything else.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if n, err := strconv.ParseUint(v, 10, 64); err == nil {
		if n > uint64(maxRetryAfter/time.Second) {
			return maxRetryAfter, true
		}
		return time.Duration(n) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return min(max(t.Sub(now), 0), maxRetryAfter), true
}

// pctEncode percent-encodes every byte of b outside RFC 3986's unreserved
// characters (A-Z a-z 0-9 - . _ ~). Any language decodes it
// (urllib.parse.unquote_to_bytes, decodeURIComponent).
func pctEncode(b []byte) string {
	n := 0
	for _, c := range b {
		if !unreserved(c) {
			n++
		}
	}
	if n == 0 {
		return string(b)
	}
	const hex = "0123456789ABCDEF"
	out := make([]byte, 0, len(b)+2*n)
	for _, c := range b {
		if unreserved(c) {
			out = append(out, c)
			continue
		}
		out = append(out, '%', hex[c>>4], hex[c&15])
	}
	return string(out)
}

func unreserved(c byte) bool {
	return c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~'
}

// validHeaderName reports whether s is an HTTP header name (a token).
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(unreserved(c) || strings.IndexByte("!#$%&'*+^`|", c) >= 0) {
			return false
		}
	}
	return true
}

// validHeaderValue reports whether s holds no control character.
func validHeaderValue(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return true
}
