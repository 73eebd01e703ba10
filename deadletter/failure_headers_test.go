package deadletter_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/antidote-kafka/antidote/deadletter"
)

func sampleFailure() *deadletter.Failure {
	at := time.Date(2026, 11, 29, 12, 0, 0, 123_000_000, time.UTC)
	return &deadletter.Failure{
		Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent, Class: "permanent",
		ErrorType: "*json.SyntaxError", ErrorStage: "json", Message: "unexpected end of JSON input",
		Topic: "orders", Partition: 3, Offset: 42, Timestamp: at, OriginalHeaders: 1,
		Group: "billing", ClientID: "svc-1", Attempts: 2, First: at, Last: at.Add(time.Second),
	}
}

func TestHeadersRoundTrip(t *testing.T) {
	f := sampleFailure()
	hs := f.AppendHeaders([]deadletter.Header{{Key: "trace", Value: []byte{0, 1}}})
	if hs[0].Key != "trace" {
		t.Fatal("original header not first")
	}
	got, err := deadletter.ParseHeaders(hs)
	if err != nil {
		t.Fatal(err)
	}
	if *got != *f {
		t.Fatalf("round trip:\n got %+v\nwant %+v", got, f)
	}
	for _, h := range hs[1:] {
		if !utf8.Valid(h.Value) {
			t.Errorf("header %s is not UTF-8", h.Key)
		}
	}
}

func TestHeadersBounded(t *testing.T) {
	f := sampleFailure()
	f.Message = strings.Repeat("é", 10_000)
	f.ErrorType = strings.Repeat("x", 10_000) + "\xff"
	f.Group = strings.Repeat("g", 5000)
	size := 0
	for _, h := range f.AppendHeaders(nil) {
		size += len(h.Key) + len(h.Value)
		if !utf8.Valid(h.Value) {
			t.Errorf("header %s is not UTF-8 after truncation", h.Key)
		}
	}
	if size > 4096 {
		t.Fatalf("failure headers take %d bytes, want under 4 KiB", size)
	}
}

func TestParseHeadersErrors(t *testing.T) {
	base := sampleFailure().AppendHeaders(nil)
	set := func(k, v string) []deadletter.Header {
		out := append([]deadletter.Header(nil), base...)
		return append(out, deadletter.Header{Key: k, Value: []byte(v)}) // last wins
	}
	cases := map[string][]deadletter.Header{
		"not a dead letter": {{Key: "x", Value: []byte("y")}},
		"bad partition":     set(deadletter.HeaderOriginalPartition, "p3"),
		"bad offset":        set(deadletter.HeaderOriginalOffset, "1e3"),
		"negative attempts": set(deadletter.HeaderAttempts, "-1"),
		"bad time":          set(deadletter.HeaderFirstFailure, "yesterday"),
		"too many original": set(deadletter.HeaderOriginalHeaders, "99"),
	}
	for name, hs := range cases {
		if _, err := deadletter.ParseHeaders(hs); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	if _, err := deadletter.ParseHeaders(cases["not a dead letter"]); !errors.Is(err, deadletter.ErrMissingHeader) {
		t.Errorf("missing headers: %v, want ErrMissingHeader", err)
	}
}

type codeErr struct{ code int }

func (e *codeErr) Error() string { return fmt.Sprint("code ", e.code) }

func TestErrorType(t *testing.T) {
	var v any
	syn := json.Unmarshal([]byte("{"), &v)
	root := &codeErr{7}
	cases := []struct {
		err  error
		want string
	}{
		{fmt.Errorf("a: %w", fmt.Errorf("b: %w", root)), "*deadletter_test.codeErr"},
		{errors.Join(root, errors.New("other")), "*deadletter_test.codeErr"},
		{fmt.Errorf("decode: %w", syn), "*json.SyntaxError"},
		{errors.New("plain"), "*errors.errorString"},
		{nil, ""},
	}
	for _, c := range cases {
		if got := deadletter.ErrorType(c.err); got != c.want {
			t.Errorf("ErrorType(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

func TestTemplate(t *testing.T) {
	if got := deadletter.Template("").Name("orders", "g"); got != "orders.dlq" {
		t.Fatalf("default template gives %q", got)
	}
	if got := deadletter.Template("dlq.{group}.{topic}").Name("orders", "billing"); got != "dlq.billing.orders" {
		t.Fatalf("template gives %q", got)
	}
	for _, bad := range []string{"{topic}.{partition}", "{topic} dlq", "{topic}/dlq", strings.Repeat("x", 250)} {
		if err := deadletter.Template(bad).Validate(); !errors.Is(err, deadletter.ErrBadTemplate) {
			t.Errorf("Validate(%q) = %v, want ErrBadTemplate", bad, err)
		}
	}
	if err := deadletter.Template("all-dead-letters").Validate(); err != nil {
		t.Errorf("a fixed name is valid: %v", err)
	}
}

// FuzzParseHeaders: no input panics ParseHeaders or Truncate.
func FuzzParseHeaders(f *testing.F) {
	f.Add("antidote.original.partition", []byte("3"), "antidote.original.offset", []byte(""), 5)
	f.Add("antidote.original.headers", []byte("99999999999999999999"), "antidote.failure.first", []byte("\xff"), 0)
	f.Add("", []byte{}, "antidote.attempts", []byte("-0"), 1)
	f.Fuzz(func(t *testing.T, k1 string, v1 []byte, k2 string, v2 []byte, n int) {
		hs := sampleFailure().AppendHeaders(nil)
		hs = append(hs, deadletter.Header{Key: k1, Value: v1}, deadletter.Header{Key: k2, Value: v2})
		if f, err := deadletter.ParseHeaders(hs); err == nil && f.OriginalHeaders > len(hs) {
			t.Fatalf("OriginalHeaders %d beyond %d headers", f.OriginalHeaders, len(hs))
		}
		if n < 0 {
			n = -n
		}
		if s := deadletter.Truncate(string(v1), n%2048); !utf8.ValidString(s) || (len(v1) > 3 && len(s) > max(n%2048, 3)) {
			t.Fatalf("Truncate(%q, %d) = %q", v1, n%2048, s)
		}
	})
}
