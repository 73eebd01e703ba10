package failure_test

import (
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"regexp"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/antidote-kafka/antidote/failure"
)

var errBase = errors.New("base")

func jsonSyntaxErr() error {
	var v any
	return json.Unmarshal([]byte("{"), &v)
}

func jsonTypeErr() error {
	var v struct{ A int }
	return json.Unmarshal([]byte(`{"A":"x"}`), &v)
}

func TestClassify(t *testing.T) {
	_, b64 := base64.StdEncoding.DecodeString("!!!")
	_, hexErr := hex.DecodeString("zz")
	_, numErr := strconv.Atoi("x")
	tests := []struct {
		name string
		err  error
		want failure.Class
	}{
		{"nil", nil, failure.ClassUnclassified},
		{"plain", errBase, failure.ClassUnclassified},
		{"permanent mark", failure.Permanent(errBase), failure.ClassPermanent},
		{"transient mark", failure.Transient(errBase), failure.ClassTransient},
		{"retry after", failure.RetryAfter(time.Second, errBase), failure.ClassTransient},
		{"wrapped mark", fmt.Errorf("ctx: %w", failure.Permanent(errBase)), failure.ClassPermanent},
		{"outermost mark wins", failure.Permanent(failure.Transient(errBase)), failure.ClassPermanent},
		{"outermost mark wins 2", failure.Transient(fmt.Errorf("x: %w", failure.Permanent(errBase))), failure.ClassTransient},
		{"mark beats default", failure.Transient(jsonSyntaxErr()), failure.ClassTransient},
		{"joined mark", errors.Join(errBase, failure.Permanent(io.EOF)), failure.ClassPermanent},
		{"joined first wins", errors.Join(failure.Transient(errBase), failure.Permanent(io.EOF)), failure.ClassTransient},
		{"deadline", context.DeadlineExceeded, failure.ClassTransient},
		{"wrapped deadline", fmt.Errorf("registry: %w", context.DeadlineExceeded), failure.ClassTransient},
		{"canceled", context.Canceled, failure.ClassTransient},
		{"op error", &net.OpError{Op: "dial", Err: errBase}, failure.ClassTransient},
		{"dns error", &net.DNSError{Err: "no such host", Name: "x"}, failure.ClassTransient},
		{"econnrefused", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), failure.ClassTransient},
		{"econnreset", syscall.ECONNRESET, failure.ClassTransient},
		{"other errno", syscall.ENOENT, failure.ClassUnclassified},
		{"os deadline", os.ErrDeadlineExceeded, failure.ClassTransient},
		{"http 503", &failure.HTTPError{StatusCode: 503}, failure.ClassTransient},
		{"http 429", fmt.Errorf("x: %w", &failure.HTTPError{StatusCode: 429}), failure.ClassTransient},
		{"http 404", &failure.HTTPError{StatusCode: 404}, failure.ClassPermanent},
		{"http 401", &failure.HTTPError{StatusCode: 401}, failure.ClassUnclassified},
		{"json syntax", jsonSyntaxErr(), failure.ClassPermanent},
		{"json type", fmt.Errorf("decode: %w", jsonTypeErr()), failure.ClassPermanent},
		{"base64", b64, failure.ClassPermanent},
		{"hex", hexErr, failure.ClassPermanent},
		{"hex length", hex.ErrLength, failure.ClassPermanent},
		{"strconv", numErr, failure.ClassPermanent},
		{"gzip header", gzip.ErrHeader, failure.ClassPermanent},
		{"gzip checksum", fmt.Errorf("x: %w", gzip.ErrChecksum), failure.ClassPermanent},
		{"zstd magic", zstd.ErrMagicMismatch, failure.ClassPermanent},
		{"zstd crc", zstd.ErrCRCMismatch, failure.ClassPermanent},
		{"validation", &failure.ValidationError{Field: "a", Reason: "b"}, failure.ClassPermanent},
		{"unexpected EOF", io.ErrUnexpectedEOF, failure.ClassUnclassified},
		{"EOF", io.EOF, failure.ClassUnclassified},
		{"joined default", errors.Join(errBase, syscall.ECONNRESET), failure.ClassTransient},
		{"kafka retriable", fmt.Errorf("produce: %w", kerr.NotLeaderForPartition), failure.ClassTransient},
		{"kafka timeout", kerr.RequestTimedOut, failure.ClassTransient},
		{"kafka not retriable", kerr.TopicAuthorizationFailed, failure.ClassUnclassified},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := failure.Classify(tt.err); got != tt.want {
				t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
			}
			if got := failure.IsTransient(tt.err); got != (tt.want == failure.ClassTransient) {
				t.Errorf("IsTransient = %v", got)
			}
			if got := failure.IsPermanent(tt.err); got != (tt.want == failure.ClassPermanent) {
				t.Errorf("IsPermanent = %v", got)
			}
		})
	}
}

func TestClassText(t *testing.T) {
	for _, c := range []failure.Class{failure.ClassUnclassified, failure.ClassTransient, failure.ClassPermanent} {
		b, err := c.MarshalText()
		var back failure.Class
		if err != nil || string(b) != c.String() || back.UnmarshalText(b) != nil || back != c {
			t.Errorf("%v: MarshalText %q %v, back %v", c, b, err, back)
		}
	}
	if err := new(failure.Class).UnmarshalText([]byte("maybe")); err == nil {
		t.Error("UnmarshalText accepted an unknown class")
	}
}

func TestMarks(t *testing.T) {
	if failure.Permanent(nil) != nil || failure.Transient(nil) != nil || failure.RetryAfter(time.Second, nil) != nil {
		t.Fatal("marking nil must return nil")
	}
	err := failure.Permanent(errBase)
	if !errors.Is(err, errBase) || err.Error() != "base" || errors.Unwrap(err) != errBase {
		t.Fatalf("mark not transparent: %v", err)
	}
	if _, ok := failure.RetryAfterOf(err); ok {
		t.Fatal("no hint expected")
	}
	d, ok := failure.RetryAfterOf(fmt.Errorf("x: %w", failure.RetryAfter(3*time.Second, errBase)))
	if !ok || d != 3*time.Second {
		t.Fatalf("RetryAfterOf = %v, %v", d, ok)
	}
	if d, _ := failure.RetryAfterOf(failure.RetryAfter(-time.Second, errBase)); d != 0 {
		t.Fatalf("negative hint = %v, want 0", d)
	}
	if c, ok := failure.MarkOf(jsonSyntaxErr()); ok {
		t.Fatalf("MarkOf(unmarked) = %v, true", c)
	}
	if c, ok := failure.MarkOf(errors.Join(errBase, failure.Transient(errBase))); !ok || c != failure.ClassTransient {
		t.Fatalf("MarkOf(joined) = %v, %v", c, ok)
	}
}

type myErr struct{}

func (myErr) Error() string { return "mine" }

func TestNewClassifier(t *testing.T) {
	sentinel := errors.New("sentinel")
	c := failure.NewClassifier(
		failure.Sentinel(sentinel, failure.ClassTransient),
		failure.AsType[myErr](failure.ClassPermanent),
		failure.MessageMatches(regexp.MustCompile(`too many connections`), failure.ClassTransient),
		failure.When(func(err error) bool { return errors.Is(err, io.ErrUnexpectedEOF) }, failure.ClassPermanent),
		failure.Sentinel(context.Canceled, failure.ClassUnclassified), // exempt from the defaults
		failure.Sentinel(errBase, failure.ClassTransient),
	)
	tests := []struct {
		err  error
		want failure.Class
	}{
		{fmt.Errorf("a: %w", sentinel), failure.ClassTransient},
		{fmt.Errorf("a: %w", myErr{}), failure.ClassPermanent},
		{errors.New("pq: too many connections"), failure.ClassTransient},
		{io.ErrUnexpectedEOF, failure.ClassPermanent},
		{context.Canceled, failure.ClassUnclassified},
		{context.DeadlineExceeded, failure.ClassTransient},   // defaults still apply
		{failure.Permanent(errBase), failure.ClassPermanent}, // marks beat matchers
		{errors.New("unknown"), failure.ClassUnclassified},
	}
	for _, tt := range tests {
		if got := c.Classify(tt.err); got != tt.want {
			t.Errorf("Classify(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
	if got := failure.Default().Classify(errBase); got != failure.ClassUnclassified {
		t.Errorf("user matchers leaked into Default: %v", got)
	}
	if c, ok := failure.Defaults().Match(syscall.ECONNREFUSED); !ok || c != failure.ClassTransient {
		t.Errorf("Defaults().Match = %v, %v", c, ok)
	}
	if _, ok := failure.OfClass(failure.ClassPermanent).Match(jsonSyntaxErr()); !ok {
		t.Error("OfClass did not match")
	}
}

func TestStrings(t *testing.T) {
	for c, want := range map[failure.Class]string{
		failure.ClassUnclassified: "unclassified", failure.ClassTransient: "transient",
		failure.ClassPermanent: "permanent", 9: "Class(9)",
	} {
		if c.String() != want {
			t.Errorf("%d.String() = %q", c, c.String())
		}
	}
	if s := (&failure.HTTPError{StatusCode: 503, Err: errBase}).Error(); s != "http status 503: base" {
		t.Error(s)
	}
	if s := (&failure.ValidationError{Reason: "empty"}).Error(); s != "invalid: empty" {
		t.Error(s)
	}
}

func TestStatusClass(t *testing.T) {
	for code, want := range map[int]failure.Class{
		200: failure.ClassUnclassified, 400: failure.ClassPermanent, 401: failure.ClassUnclassified,
		403: failure.ClassUnclassified, 404: failure.ClassPermanent, 408: failure.ClassTransient,
		422: failure.ClassPermanent, 425: failure.ClassTransient, 429: failure.ClassTransient,
		500: failure.ClassTransient, 503: failure.ClassTransient, 599: failure.ClassTransient,
	} {
		if got := failure.StatusClass(code); got != want {
			t.Errorf("StatusClass(%d) = %v, want %v", code, got, want)
		}
	}
}
