package serde_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

var (
	ctx  = context.Background()
	meta = serde.Meta{Topic: "orders", Part: serde.Value}
	fast = backoff.Fixed(time.Microsecond) // very short waits: tests never assert wall time
)

// flaky fails with err n times, then returns "ok".
type flaky struct {
	n     int32
	calls atomic.Int32
	err   error
}

func (f *flaky) Deserialize(_ context.Context, _ serde.Meta, _ []byte) (string, error) {
	if f.calls.Add(1) <= f.n {
		return "", f.err
	}
	return "ok", nil
}

func TestRetryTransientUntilSuccess(t *testing.T) {
	f := &flaky{n: 5, err: fmt.Errorf("registry: %w", syscall.ECONNREFUSED)}
	var notified int
	d := serde.Retry[string](f, fast, serde.RetryNotify(func(_ context.Context, _ serde.Meta, attempt int, _ time.Duration, _ error) {
		notified = attempt
	}))
	v, err := d.Deserialize(ctx, meta, nil)
	if err != nil || v != "ok" || f.calls.Load() != 6 || notified != 5 {
		t.Fatalf("v=%q err=%v calls=%d notified=%d", v, err, f.calls.Load(), notified)
	}
}

func TestRetryPermanentNotRetried(t *testing.T) {
	for _, cause := range []error{failure.Permanent(errors.New("bad")), errors.New("unclassified")} {
		f := &flaky{n: 100, err: cause}
		_, err := serde.Retry[string](f, fast).Deserialize(ctx, meta, nil)
		re, ok := errors.AsType[*serde.RetryError](err)
		if !ok || re.Attempts != 1 || re.Reason != serde.StopNotRetryable || f.calls.Load() != 1 {
			t.Fatalf("err=%v calls=%d", err, f.calls.Load())
		}
		if !errors.Is(err, cause) {
			t.Fatal("last error lost")
		}
	}
}

func TestRetryExhausted(t *testing.T) {
	cause := failure.Transient(errors.New("down"))
	f := &flaky{n: 100, err: cause}
	_, err := serde.Retry[string](f, backoff.MaxAttempts(fast, 4)).Deserialize(ctx, meta, nil)
	re, ok := errors.AsType[*serde.RetryError](err)
	if !ok || re.Attempts != 4 || re.Reason != serde.StopMaxAttempts || f.calls.Load() != 4 {
		t.Fatalf("err=%v calls=%d", err, f.calls.Load())
	}
	if !failure.IsTransient(err) {
		t.Fatalf("exhausted transient error became %v", failure.Classify(err))
	}
	if !strings.Contains(err.Error(), "4 attempts (max attempts)") {
		t.Fatal(err)
	}

	f = &flaky{n: 100, err: cause}
	_, err = serde.Retry[string](f, backoff.MaxElapsed(fast, 0)).Deserialize(ctx, meta, nil)
	if re, ok := errors.AsType[*serde.RetryError](err); !ok || re.Reason != serde.StopMaxElapsed {
		t.Fatalf("err=%v", err)
	}
}

func TestRetryHonoursRetryAfterAndClassifier(t *testing.T) {
	errOdd := errors.New("odd")
	f := &flaky{n: 2, err: errOdd}
	var waits []time.Duration
	d := serde.Retry[string](f, fast,
		serde.RetryClassifier(failure.NewClassifier(failure.Sentinel(errOdd, failure.ClassTransient))),
		serde.RetryNotify(func(_ context.Context, _ serde.Meta, _ int, w time.Duration, _ error) { waits = append(waits, w) }))
	if v, err := d.Deserialize(ctx, meta, nil); err != nil || v != "ok" {
		t.Fatal(v, err)
	}
	f = &flaky{n: 1, err: failure.RetryAfter(2*time.Millisecond, errOdd)}
	waits = nil
	d = serde.Retry[string](f, fast, serde.RetryNotify(func(_ context.Context, _ serde.Meta, _ int, w time.Duration, _ error) { waits = append(waits, w) }))
	if _, err := d.Deserialize(ctx, meta, nil); err != nil || len(waits) != 1 || waits[0] != 2*time.Millisecond {
		t.Fatal(err, waits)
	}
}

func TestRetryStopsOnCancel(t *testing.T) {
	c, cancel := context.WithCancel(ctx)
	f := &flaky{n: 1 << 30, err: failure.Transient(errors.New("down"))}
	d := serde.Retry[string](f, backoff.Fixed(time.Hour), serde.RetryNotify(func(context.Context, serde.Meta, int, time.Duration, error) { cancel() }))
	_, err := d.Deserialize(c, meta, nil)
	re, ok := errors.AsType[*serde.RetryError](err)
	if !ok || re.Reason != serde.StopCanceled || f.calls.Load() != 1 {
		t.Fatalf("err=%v calls=%d", err, f.calls.Load())
	}
}

func TestPipeOrderAndStageErrors(t *testing.T) {
	var order []string
	stage := func(name string, fail error) serde.Stage {
		return stageFunc{name, func(data []byte) ([]byte, error) {
			order = append(order, name)
			if fail != nil {
				return nil, fail
			}
			return append([]byte(name+"("), append(data, ')')...), nil
		}}
	}
	d := serde.Pipe(serde.String(), stage("a", nil), stage("b", nil))
	v, err := d.Deserialize(ctx, meta, []byte("x"))
	if err != nil || v != "b(a(x))" || strings.Join(order, ",") != "a,b" {
		t.Fatal(v, err, order)
	}
	boom := errors.New("boom")
	_, err = serde.Pipe(serde.String(), stage("a", nil), stage("b", boom)).Deserialize(ctx, meta, []byte("x"))
	if s, ok := serde.StageOf(err); !ok || s != "b" || !errors.Is(err, boom) {
		t.Fatal(s, err)
	}
	if err.Error() != "serde: value: b: boom" {
		t.Fatal(err)
	}
	_, err = serde.Pipe(serde.JSON[int]()).Deserialize(ctx, meta, []byte("nope"))
	if s, _ := serde.StageOf(err); s != "json" || !failure.IsPermanent(err) {
		t.Fatal(s, err)
	}
}

type stageFunc struct {
	name string
	fn   func([]byte) ([]byte, error)
}

func (s stageFunc) Name() string { return s.name }
func (s stageFunc) Decode(_ context.Context, _ serde.Meta, data []byte) ([]byte, error) {
	return s.fn(data)
}

func TestPanicsAreRecovered(t *testing.T) {
	panicky := stageFunc{"evil", func([]byte) ([]byte, error) { panic("oops") }}
	_, err := serde.Pipe(serde.String(), panicky).Deserialize(ctx, meta, []byte("x"))
	pe, ok := errors.AsType[*serde.PanicError](err)
	if !ok || pe.Stage != "evil" || pe.Value != "oops" || len(pe.Stack) == 0 || len(pe.Stack) > 2048 {
		t.Fatalf("err=%v", err)
	}
	if !failure.IsPermanent(err) || !serde.IsPanic(err) {
		t.Fatal("panic not permanent")
	}
	if s, _ := serde.StageOf(err); s != "evil" {
		t.Fatal(s)
	}
	codecPanic := serde.DeserializerFunc[int](func(context.Context, serde.Meta, []byte) (int, error) {
		var m map[string]int
		//lint:ignore SA5000 the test needs a runtime error panic inside a codec
		m["x"] = 1
		return 0, nil
	})
	// Every decorator recovers, whatever the nesting.
	for name, d := range map[string]serde.Deserializer[int]{
		"pipe":     serde.Pipe[int](codecPanic),
		"retry":    serde.Retry[int](codecPanic, fast),
		"fallback": serde.Fallback[int](codecPanic, func(_ context.Context, _ serde.Meta, _ []byte, err error) (int, error) { return 0, err }),
	} {
		if _, err := d.Deserialize(ctx, meta, nil); !serde.IsPanic(err) || !failure.IsPermanent(err) {
			t.Errorf("%s: %v", name, err)
		}
	}
	r, err := serde.Handle[int](codecPanic).Deserialize(ctx, meta, []byte("raw"))
	if err != nil || r.OK() || !serde.IsPanic(r.Failure.Err) || r.Failure.Class != failure.ClassPermanent {
		t.Fatal(r, err)
	}
	// A panicking fallback fn.
	_, err = serde.Fallback(serde.JSON[int](), func(context.Context, serde.Meta, []byte, error) (int, error) { panic(42) }).
		Deserialize(ctx, meta, []byte("bad"))
	if s, _ := serde.StageOf(err); s != "fallback" || !serde.IsPanic(err) {
		t.Fatal(s, err)
	}
}

func TestHandle(t *testing.T) {
	d := serde.Handle(serde.Pipe(serde.JSON[map[string]int](), serde.Gzip()))
	data := []byte("not gzip at all")
	r, err := d.Deserialize(ctx, serde.Meta{Topic: "t", Part: serde.Key}, data)
	if err != nil || r.OK() {
		t.Fatal(r, err)
	}
	f := r.Failure
	if f.Topic != "t" || f.Part != serde.Key || f.Stage != "gzip" || f.Class != failure.ClassPermanent || !bytes.Equal(f.Data, data) {
		t.Fatalf("%+v", f)
	}
	data[0] = 'X'
	if f.Data[0] == 'X' {
		t.Fatal("Failure.Data aliases the caller's buffer")
	}
	if !errors.Is(f, f.Err) || f.Error() != f.Err.Error() {
		t.Fatal("Failure does not wrap Err")
	}

	// Unclassified errors are recorded as permanent.
	odd := serde.DeserializerFunc[int](func(context.Context, serde.Meta, []byte) (int, error) { return 0, errors.New("odd") })
	r2, _ := serde.Handle[int](odd).Deserialize(ctx, meta, nil)
	if r2.Failure.Class != failure.ClassPermanent || r2.Failure.Stage != "" {
		t.Fatalf("%+v", r2.Failure)
	}

	// HandleOnly lets other errors propagate.
	down := serde.DeserializerFunc[int](func(context.Context, serde.Meta, []byte) (int, error) { return 0, failure.Transient(io.EOF) })
	hd := serde.Handle[int](down, serde.HandleOnly(failure.OfClass(failure.ClassPermanent)))
	if r, err := hd.Deserialize(ctx, meta, nil); err == nil || !r.OK() {
		t.Fatal("transient error did not propagate", r, err)
	}
	// A transient error exhausted by Retry stays transient in the Failure.
	r3, _ := serde.Handle(serde.Retry[int](down, backoff.MaxAttempts(fast, 2))).Deserialize(ctx, meta, nil)
	if r3.Failure == nil || r3.Failure.Class != failure.ClassTransient {
		t.Fatalf("%+v", r3.Failure)
	}

	// Shutdown is not a poison pill.
	c, cancel := context.WithCancel(ctx)
	cancel()
	canceled := serde.DeserializerFunc[int](func(ctx context.Context, _ serde.Meta, _ []byte) (int, error) { return 0, ctx.Err() })
	if _, err := serde.Handle(serde.Retry[int](canceled, fast)).Deserialize(c, meta, nil); !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}

	// Success.
	ok, err := serde.Handle(serde.JSON[int]()).Deserialize(ctx, meta, []byte("7"))
	if err != nil || !ok.OK() || ok.Value != 7 {
		t.Fatal(ok, err)
	}
}

func TestFallback(t *testing.T) {
	d := serde.Fallback(serde.JSON[int](), func(_ context.Context, m serde.Meta, data []byte, err error) (int, error) {
		if !failure.IsPermanent(err) || m.Topic != "orders" {
			return 0, err
		}
		return -len(data), nil
	})
	if v, err := d.Deserialize(ctx, meta, []byte("5")); err != nil || v != 5 {
		t.Fatal(v, err)
	}
	if v, err := d.Deserialize(ctx, meta, []byte("oops")); err != nil || v != -4 {
		t.Fatal(v, err)
	}
}

func TestMetaHeader(t *testing.T) {
	m := serde.Meta{Headers: []serde.Header{{"a", []byte("1")}, {"b", []byte("2")}, {"a", []byte("3")}}}
	if v, ok := m.Header("a"); !ok || string(v) != "3" {
		t.Fatal(string(v), ok)
	}
	if _, ok := m.Header("zz"); ok {
		t.Fatal("found a missing header")
	}
	if serde.Key.String() != "key" || serde.Value.String() != "value" || serde.Part(9).String() != "Part(9)" {
		t.Fatal("Part.String")
	}
}
