package registry

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/sr"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde"
)

// clock is a test's clock for the breaker.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// pacedRegistry returns a registry client of sreg whose breaker opens at
// the first failure, probes every 10s and runs on clk.
func pacedRegistry(t *testing.T, sreg *srtest.Registry, hc *http.Client) (*Registry, *clock) {
	t.Helper()
	reg, err := New(sreg.URL(), HTTPClient(hc), Logger(slog.New(slog.DiscardHandler)),
		CircuitBreaker(BreakerConfig{Failures: 1, Probe: backoff.Fixed(10 * time.Second)}))
	if err != nil {
		t.Fatal(err)
	}
	clk := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	reg.br.now = clk.now
	return reg, clk
}

const pacingSchema = `{"type":"record","name":"P","fields":[{"name":"a","type":"long"}]}`

// retryAfter returns err's hint, failing t if there is none.
func retryAfter(t *testing.T, what string, err error) time.Duration {
	t.Helper()
	d, ok := failure.RetryAfterOf(err)
	if !ok || !failure.IsTransient(err) {
		t.Fatalf("%s: %v: want a transient error with a RetryAfter hint", what, err)
	}
	return d
}

// TestBreakerPacesWaits: every error given while the breaker is open, and
// the failures that open it again, carry failure.RetryAfter(time until the
// next probe), so that a record waits for the probe rather than its own
// backoff; the registry's own Retry-After lengthens it; the state hook
// fires when a probe succeeds and the breaker closes.
func TestBreakerPacesWaits(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireFaults(t)
	id := sreg.Register(t, "pacing-value", pacingSchema)
	hc, calls := srtest.CountingClient()
	reg, clk := pacedRegistry(t, sreg, hc)
	var closes atomic.Int32
	reg.Breaker().OnStateChange(func(from, to State) {
		if to == Closed {
			closes.Add(1)
		}
	})
	ctx := context.Background()
	step := func(what string, advance, want time.Duration, requests int64, breakerOpen bool) {
		t.Helper()
		clk.advance(advance)
		_, err := reg.Schema(ctx, id)
		if got := retryAfter(t, what, err); got != want {
			t.Errorf("%s: RetryAfter %v, want %v", what, got, want)
		}
		if IsBreakerOpen(err) != breakerOpen {
			t.Errorf("%s: IsBreakerOpen %v, want %v: %v", what, IsBreakerOpen(err), breakerOpen, err)
		}
		if n := calls.Load(); n != requests {
			t.Errorf("%s: %d registry requests, want %d", what, n, requests)
		}
		if s := reg.Breaker().State(); s != Open {
			t.Errorf("%s: breaker %v, want open", what, s)
		}
	}

	sreg.SetFault(srtest.Fault{Status: http.StatusServiceUnavailable})
	step("the failure that opens the breaker", 0, 10*time.Second, 1, false)
	step("3s later, failing fast", 3*time.Second, 7*time.Second, 1, true)
	step("9.5s later, failing fast", 6500*time.Millisecond, 500*time.Millisecond, 1, true)
	step("the failed probe", 500*time.Millisecond, 10*time.Second, 2, false)
	step("1ms later, failing fast", time.Millisecond, 10*time.Second-time.Millisecond, 2, true)

	sreg.SetFault(srtest.Fault{Status: http.StatusServiceUnavailable, RetryAfter: 20 * time.Second})
	step("a failed probe answered Retry-After: 20", 10*time.Second, 20*time.Second, 3, false)
	step("5s later, failing fast", 5*time.Second, 15*time.Second, 3, true)
	if n := closes.Load(); n != 0 {
		t.Fatalf("closed hook fired %d times while open", n)
	}

	sreg.SetFault(srtest.Fault{})
	clk.advance(15 * time.Second)
	if _, err := reg.Schema(ctx, id); err != nil {
		t.Fatalf("the probe after recovery: %v", err)
	}
	if s := reg.Breaker().State(); s != Closed {
		t.Fatalf("breaker %v after a successful probe", s)
	}
	if n := closes.Load(); n != 1 {
		t.Fatalf("closed hook fired %d times, want 1 (it wakes the waiting records)", n)
	}
	select {
	case <-reg.Breaker().Closed():
	default:
		t.Fatal("Closed() not closed after the breaker closed")
	}
}

// panicky is a transport that panics while on is set.
type panicky struct {
	on   atomic.Bool
	next http.RoundTripper
}

func (p *panicky) RoundTrip(r *http.Request) (*http.Response, error) {
	if p.on.Load() {
		panic("transport bug")
	}
	return p.next.RoundTrip(r)
}

// TestLookupPanic: a panic in the registry call (a transport, the HTTP
// client) becomes a transient *RegistryError holding a *serde.PanicError
// for every caller waiting on that lookup; the process goes on, and the
// breaker counts it as a failure, so that a panicking probe leaves it open,
// never half-open.
func TestLookupPanic(t *testing.T) {
	sreg := srtest.New(t)
	id := sreg.Register(t, "panic-value", pacingSchema)
	tr := &panicky{next: http.DefaultTransport}
	tr.on.Store(true)
	reg, clk := pacedRegistry(t, sreg, &http.Client{Transport: tr})
	ctx := context.Background()

	check := func(what string, err error) {
		t.Helper()
		var re *RegistryError
		var pe *serde.PanicError
		if !errors.As(err, &re) || !errors.As(err, &pe) || !failure.IsTransient(err) || !serde.IsPanic(err) {
			t.Fatalf("%s: %v: want a transient *RegistryError holding a *serde.PanicError", what, err)
		}
		if pe.Value != "transport bug" || len(pe.Stack) == 0 {
			t.Errorf("%s: panic value %v, %d bytes of stack", what, pe.Value, len(pe.Stack))
		}
		if d := retryAfter(t, what, err); d != 10*time.Second {
			t.Errorf("%s: RetryAfter %v, want the probe interval", what, d)
		}
		if s := reg.Breaker().State(); s != Open {
			t.Fatalf("%s: breaker %v, want open", what, s)
		}
	}

	// Callers waiting on one lookup all get the error.
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { _, errs[i] = reg.Schema(ctx, id) })
	}
	wg.Wait()
	for i, err := range errs {
		if IsBreakerOpen(err) {
			continue // came after the breaker opened: failed fast
		}
		check("caller "+string(rune('0'+i)), err)
	}

	clk.advance(10 * time.Second)
	_, err := reg.Schema(ctx, id)
	check("a panicking probe", err)

	_, err = reg.Register(ctx, "panic-value", sr.Schema{Schema: pacingSchema})
	if !IsBreakerOpen(err) {
		t.Fatalf("Register while open: %v", err)
	}

	tr.on.Store(false)
	clk.advance(10 * time.Second)
	if _, err := reg.Schema(ctx, id); err != nil {
		t.Fatalf("after the transport recovered: %v", err)
	}
	if s := reg.Breaker().State(); s != Closed {
		t.Fatalf("breaker %v after a successful probe", s)
	}

	tr.on.Store(true)
	_, err = reg.Register(ctx, "panic-value", sr.Schema{Schema: pacingSchema})
	var pe *serde.PanicError
	if !errors.As(err, &pe) || !failure.IsTransient(err) {
		t.Fatalf("Register with a panicking transport: %v", err)
	}
}
