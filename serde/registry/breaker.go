package registry

import (
	"context"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
)

// State is the state of a [Breaker].
type State uint8

const (
	// Closed: lookups go to the registry.
	Closed State = iota
	// Open: lookups of uncached ids fail at once, without a registry call,
	// until the next probe is due.
	Open
	// HalfOpen: one probe request is in flight; other lookups wait for its
	// outcome.
	HalfOpen
)

// String returns "closed", "open" or "half-open".
func (s State) String() string {
	switch s {
	case Closed:
		return "closed"
	case Open:
		return "open"
	case HalfOpen:
		return "half-open"
	}
	return "State(" + strconv.Itoa(int(s)) + ")"
}

// BreakerConfig configures the circuit breaker around the registry. The zero
// value is a valid default.
type BreakerConfig struct {
	// Failures is the number of consecutive transient registry failures
	// that open the breaker. Optional: 3.
	Failures int
	// Probe paces the probes while the breaker is open: attempt n waits
	// Probe.Next(n). A Retry-After from the registry lengthens the wait.
	// Optional: exponential from 500ms, x2, capped at 2s, equal jitter.
	// A policy that stops (MaxAttempts) keeps its last wait.
	Probe backoff.Policy
	// Disabled turns the breaker off: every lookup of an uncached id asks
	// the registry. Optional: false.
	Disabled bool
}

// defaultProbe probes soon after the first failure and then every 1 to 2
// seconds: the records waiting on the registry wake at each probe (their
// failures carry its time as a failure.RetryAfter hint), so the cap is also
// how long they can take to notice that the registry is back.
var defaultProbe = backoff.Exponential{Initial: 500 * time.Millisecond, Multiplier: 2, Max: 2 * time.Second, Jitter: backoff.JitterEqual}

// Breaker is the circuit breaker around one [Registry]'s lookups. Get it
// with [Registry.Breaker]. Its methods are safe for concurrent use.
//
// Closed, it lets every call through and counts consecutive transient
// failures. At [BreakerConfig.Failures] it opens: calls fail at once with
// [ErrBreakerOpen], marked failure.RetryAfter(time until the next probe).
// When the probe is due, the first call becomes the probe (half-open) and
// the others wait for its outcome; a success closes the breaker, a failure
// opens it again for the next, longer, interval. Cached schemas never go
// through the breaker.
type Breaker struct {
	cfg BreakerConfig
	log *slog.Logger
	now func() time.Time // time.Now; a test's clock

	mu        sync.Mutex
	state     State
	fails     int           // consecutive transient failures while closed
	attempt   int           // failed probes since opening, 1 after opening
	next      time.Time     // when the next probe is due (open)
	closedCh  chan struct{} // closed while the breaker is closed
	probeDone chan struct{} // closed when the half-open probe completes
	hooks     []func(from, to State)
}

func newBreaker(cfg BreakerConfig, log *slog.Logger) *Breaker {
	if cfg.Failures <= 0 {
		cfg.Failures = 3
	}
	if cfg.Probe == nil {
		cfg.Probe = defaultProbe
	}
	ch := make(chan struct{})
	close(ch)
	return &Breaker{cfg: cfg, log: log, now: time.Now, closedCh: ch}
}

// State returns the current state.
func (b *Breaker) State() State {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// OnStateChange registers fn, called after each state change by the
// goroutine that caused it. fn must be quick and must not block; it may call
// the Breaker's methods.
func (b *Breaker) OnStateChange(fn func(from, to State)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.hooks = append(b.hooks, fn)
}

// Closed returns a channel that is closed when the breaker is closed: at
// once if it is closed now, otherwise when it closes again. A consumer that
// paused partitions on registry failures can wait on it to resume them the
// moment the registry answers.
func (b *Breaker) Closed() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closedCh
}

// Wait blocks until the breaker is closed or ctx is done, and returns
// ctx.Err() in the latter case.
func (b *Breaker) Wait(ctx context.Context) error {
	select {
	case <-b.Closed():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// allow asks whether a registry call may be made. It returns probe=true when
// the call is the half-open probe, which the caller must report with done.
// When it returns ok=false, wait is the time until the next probe is due.
func (b *Breaker) allow(ctx context.Context) (probe bool, wait time.Duration, ok bool) {
	if b.cfg.Disabled {
		return false, 0, true
	}
	for {
		b.mu.Lock()
		switch b.state {
		case Closed:
			b.mu.Unlock()
			return false, 0, true
		case Open:
			if w := b.next.Sub(b.now()); w > 0 {
				b.mu.Unlock()
				return false, w, false
			}
			b.probeDone = make(chan struct{})
			hooks := b.setLocked(HalfOpen)
			b.mu.Unlock()
			b.notify(Open, HalfOpen, hooks)
			return true, 0, true
		default: // HalfOpen: wait for the probe's outcome, then decide again.
			done := b.probeDone
			b.mu.Unlock()
			select {
			case <-done:
			case <-ctx.Done():
				return false, b.interval(b.attemptNow() + 1), false
			}
		}
	}
}

// done reports the outcome of a call let through by allow. failed is true
// for a transient failure (the registry did not answer usefully); hint is a
// Retry-After from the registry, 0 if none. When the breaker is open after
// it, done returns the time until the next probe, which the caller puts in
// its error (failure.RetryAfter): the record then waits for the probe, not
// for its own backoff.
func (b *Breaker) done(probe, failed bool, hint time.Duration) (untilProbe time.Duration, open bool) {
	if b.cfg.Disabled {
		return 0, false
	}
	b.mu.Lock()
	from := b.state
	var hooks []func(from, to State)
	switch {
	case !failed:
		// The registry answered: whoever asked, it is back.
		b.fails = 0
		if from != Closed {
			b.attempt = 0
			close(b.closedCh)
			hooks = b.setLocked(Closed)
		}
	case probe && from == HalfOpen:
		b.attempt++
		b.next = b.now().Add(max(b.interval(b.attempt), hint))
		hooks = b.setLocked(Open)
	case from == Closed:
		b.fails++
		if b.fails >= b.cfg.Failures {
			b.fails = 0
			b.attempt = 1
			b.next = b.now().Add(max(b.interval(1), hint))
			b.closedCh = make(chan struct{})
			hooks = b.setLocked(Open)
		}
	}
	// Otherwise: a call let through while closed failed after the breaker
	// opened; it says nothing new.
	to, next, attempt := b.state, b.next, b.attempt
	if to != HalfOpen && b.probeDone != nil {
		close(b.probeDone)
		b.probeDone = nil
	}
	now := b.now()
	b.mu.Unlock()
	if from != to {
		if to == Open {
			b.log.Warn("schema registry circuit breaker open", "from", from.String(), "failed_probes", attempt-1, "next_probe_in", next.Sub(now).Round(time.Millisecond))
		}
		b.notify(from, to, hooks)
	}
	if to == Open {
		return max(next.Sub(now), 0), true
	}
	return 0, false
}

// setLocked sets the state and returns the hooks to call.
func (b *Breaker) setLocked(to State) []func(from, to State) {
	b.state = to
	return b.hooks
}

func (b *Breaker) notify(from, to State, hooks []func(from, to State)) {
	switch to {
	case HalfOpen:
		b.log.Info("schema registry circuit breaker half-open: probing", "from", from.String())
	case Closed:
		b.log.Info("schema registry circuit breaker closed", "from", from.String())
	}
	for _, fn := range hooks {
		fn(from, to)
	}
}

func (b *Breaker) attemptNow() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.attempt
}

// interval is the wait before probe number attempt+1.
func (b *Breaker) interval(attempt int) time.Duration {
	if w, ok := b.cfg.Probe.Next(max(attempt, 1), 0); ok {
		return max(w, 0)
	}
	// A policy that stops: keep probing at its last wait.
	for a := attempt - 1; a >= 1; a-- {
		if w, ok := b.cfg.Probe.Next(a, 0); ok {
			return max(w, 0)
		}
	}
	return defaultProbe.Max
}

// openFor reports whether the breaker is open with the next probe not yet
// due, and the time until it is.
func (b *Breaker) openFor() (time.Duration, bool) {
	if b.cfg.Disabled {
		return 0, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != Open {
		return 0, false
	}
	w := b.next.Sub(b.now())
	return w, w > 0
}
