package backoff_test

import (
	"context"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/failure"
)

func TestExponentialGrowthAndCap(t *testing.T) {
	p := backoff.Exponential{Initial: 10 * time.Millisecond, Multiplier: 3, Max: time.Second}
	want := []time.Duration{10, 30, 90, 270, 810, 1000, 1000}
	for i, w := range want {
		got, ok := p.Next(i+1, 0)
		if !ok || got != w*time.Millisecond {
			t.Errorf("attempt %d: %v, %v; want %v", i+1, got, ok, w*time.Millisecond)
		}
	}
	if got, ok := p.Next(1_000_000, 0); !ok || got != time.Second {
		t.Errorf("huge attempt: %v, %v", got, ok)
	}
}

func TestExponentialZeroValue(t *testing.T) {
	var p backoff.Exponential
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	for i, w := range []time.Duration{100 * time.Millisecond, 200 * time.Millisecond, 400 * time.Millisecond} {
		if got, _ := p.Next(i+1, 0); got != w {
			t.Errorf("attempt %d: %v, want %v", i+1, got, w)
		}
	}
	if got, _ := p.Next(100, 0); got != 30*time.Second {
		t.Errorf("cap: %v", got)
	}
	if got, _ := p.Next(0, 0); got != 100*time.Millisecond {
		t.Errorf("attempt 0: %v", got)
	}
}

func TestJitterBounds(t *testing.T) {
	for _, tt := range []struct {
		mode   backoff.JitterMode
		lo, hi time.Duration // [lo, hi)
	}{
		{backoff.JitterFull, 0, 400 * time.Millisecond},
		{backoff.JitterEqual, 200 * time.Millisecond, 400 * time.Millisecond},
	} {
		p := backoff.Exponential{Jitter: tt.mode}
		seen := map[time.Duration]bool{}
		for range 1000 {
			got, ok := p.Next(3, 0) // 400ms before jitter
			if !ok || got < tt.lo || got >= tt.hi {
				t.Fatalf("%v: %v out of [%v, %v)", tt.mode, got, tt.lo, tt.hi)
			}
			seen[got] = true
		}
		if len(seen) < 10 {
			t.Errorf("%v: only %d distinct waits; not random", tt.mode, len(seen))
		}
	}
}

func TestFixedNone(t *testing.T) {
	if _, ok := backoff.None().Next(1, 0); ok {
		t.Error("None retried")
	}
	if d, ok := backoff.Fixed(time.Second).Next(1000, time.Hour); !ok || d != time.Second {
		t.Errorf("Fixed: %v, %v", d, ok)
	}
	if d, _ := backoff.Fixed(-time.Second).Next(1, 0); d != 0 {
		t.Errorf("negative Fixed: %v", d)
	}
}

func TestMaxAttempts(t *testing.T) {
	p := backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 3) // 3 tries: 2 retries
	for attempt, want := range map[int]bool{1: true, 2: true, 3: false, 4: false} {
		if _, ok := p.Next(attempt, 0); ok != want {
			t.Errorf("attempt %d: %v, want %v", attempt, ok, want)
		}
	}
	if _, ok := backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 1).Next(1, 0); ok {
		t.Error("MaxAttempts 1 retried")
	}
	if err := backoff.StopCause(p, 3, 0); !errors.Is(err, backoff.ErrMaxAttempts) {
		t.Errorf("StopCause = %v", err)
	}
}

func TestMaxElapsed(t *testing.T) {
	p := backoff.MaxElapsed(backoff.Fixed(time.Second), 10*time.Second)
	if d, ok := p.Next(1, 0); !ok || d != time.Second {
		t.Errorf("early: %v, %v", d, ok)
	}
	if d, ok := p.Next(5, 9500*time.Millisecond); !ok || d != 500*time.Millisecond {
		t.Errorf("clipped: %v, %v; want 500ms", d, ok)
	}
	if _, ok := p.Next(5, 10*time.Second); ok {
		t.Error("retried past MaxElapsed")
	}
	both := backoff.MaxAttempts(p, 100)
	if err := backoff.StopCause(both, 7, time.Minute); !errors.Is(err, backoff.ErrMaxElapsed) {
		t.Errorf("StopCause = %v", err)
	}
	custom := backoff.PolicyFunc(func(int, time.Duration) (time.Duration, bool) { return 0, false })
	if err := backoff.StopCause(custom, 1, 0); !errors.Is(err, backoff.ErrStopped) {
		t.Errorf("StopCause(custom) = %v", err)
	}
}

func TestNextHonoursRetryAfter(t *testing.T) {
	p := backoff.Fixed(time.Second)
	hint := failure.RetryAfter(5*time.Second, errors.New("throttled"))
	if d, ok := backoff.Next(p, 1, 0, hint); !ok || d != 5*time.Second {
		t.Errorf("longer hint: %v, %v", d, ok)
	}
	short := failure.RetryAfter(time.Millisecond, errors.New("throttled"))
	if d, _ := backoff.Next(p, 1, 0, short); d != time.Second {
		t.Errorf("shorter hint: %v", d)
	}
	if _, ok := backoff.Next(backoff.None(), 1, 0, hint); ok {
		t.Error("hint overrode a stop")
	}
	if d, _ := backoff.Next(p, 1, 0, nil); d != time.Second {
		t.Errorf("nil err: %v", d)
	}
}

func TestValidate(t *testing.T) {
	bad := []backoff.Policy{
		nil,
		backoff.Fixed(-1),
		backoff.Exponential{Initial: -1},
		backoff.Exponential{Max: -1},
		backoff.Exponential{Multiplier: math.NaN()},
		backoff.Exponential{Multiplier: math.Inf(1)},
		backoff.Exponential{Multiplier: 0.5},
		backoff.Exponential{Initial: time.Minute, Max: time.Second},
		backoff.Exponential{Jitter: 7},
		backoff.MaxAttempts(backoff.Fixed(1), 0),
		backoff.MaxElapsed(backoff.Fixed(1), -1),
		backoff.MaxAttempts(backoff.Exponential{Initial: -1}, 3),
	}
	for i, p := range bad {
		if err := backoff.Validate(p); !errors.Is(err, backoff.ErrInvalid) {
			t.Errorf("%d: Validate(%#v) = %v", i, p, err)
		}
	}
	good := []backoff.Policy{
		backoff.None(), backoff.Fixed(0), backoff.Exponential{},
		backoff.MaxElapsed(backoff.MaxAttempts(backoff.Exponential{Multiplier: 1.5, Jitter: backoff.JitterEqual}, 5), time.Minute),
	}
	for i, p := range good {
		if err := backoff.Validate(p); err != nil {
			t.Errorf("%d: %v", i, err)
		}
	}
	// Invalid values are clamped, never a panic.
	if d, ok := (backoff.Exponential{Multiplier: math.NaN(), Initial: -5}).Next(2, 0); !ok || d != 200*time.Millisecond {
		t.Errorf("clamped: %v, %v", d, ok)
	}
}

func TestSleep(t *testing.T) {
	if err := backoff.Sleep(context.Background(), time.Microsecond); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := backoff.Sleep(ctx, time.Hour); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(canceled) = %v", err)
	}
	if err := backoff.Sleep(ctx, 0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep(canceled, 0) = %v", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- backoff.Sleep(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep after cancel = %v", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	p := backoff.MaxAttempts(backoff.Exponential{Jitter: backoff.JitterFull}, 10)
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for i := range 1000 {
				p.Next(i%12+1, 0)
			}
		}()
	}
	for range 8 {
		<-done
	}
}
