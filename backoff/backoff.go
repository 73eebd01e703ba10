package backoff

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"time"

	"github.com/antidote-kafka/antidote/failure"
)

// A Policy decides how long to wait before the next try.
//
// attempt is the number of failures so far: 1 after the first failure.
// elapsed is the time since the first failure. Next returns the wait before
// the next try, or false when no tries remain.
//
// A Policy is stateless: everything it needs comes in its arguments, so the
// attempt count and first-failure time can travel in Kafka headers and
// survive a restart. Next must be safe for concurrent use by many goroutines
// and must not block. A negative wait counts as 0.
type Policy interface {
	Next(attempt int, elapsed time.Duration) (time.Duration, bool)
}

// PolicyFunc adapts a function to the [Policy] interface.
type PolicyFunc func(attempt int, elapsed time.Duration) (time.Duration, bool)

// Next returns f(attempt, elapsed).
func (f PolicyFunc) Next(attempt int, elapsed time.Duration) (time.Duration, bool) {
	return f(attempt, elapsed)
}

// None returns a policy that never retries.
func None() Policy { return none{} }

type none struct{}

func (none) Next(int, time.Duration) (time.Duration, bool) { return 0, false }
func (none) stopCause(int, time.Duration) error            { return ErrMaxAttempts }

// Fixed returns a policy that waits d between tries, forever. Wrap it with
// [MaxAttempts] or [MaxElapsed] to bound it. A negative d is rejected by
// [Validate] and counts as 0.
func Fixed(d time.Duration) Policy { return fixed{d} }

type fixed struct{ d time.Duration }

func (f fixed) Next(int, time.Duration) (time.Duration, bool) { return max(f.d, 0), true }

func (f fixed) Validate() error {
	if f.d < 0 {
		return fmt.Errorf("%w: Fixed: negative wait %v", ErrInvalid, f.d)
	}
	return nil
}

// JitterMode chooses how [Exponential] randomises its waits. Jitter spreads
// the retries of many consumers, so that a recovering dependency is not hit
// by all of them at once.
type JitterMode uint8

const (
	// JitterNone waits exactly the computed wait w.
	JitterNone JitterMode = iota
	// JitterFull waits a random duration in [0, w).
	JitterFull
	// JitterEqual waits a random duration in [w/2, w).
	JitterEqual
)

// String returns "none", "full" or "equal".
func (j JitterMode) String() string {
	switch j {
	case JitterNone:
		return "none"
	case JitterFull:
		return "full"
	case JitterEqual:
		return "equal"
	}
	return fmt.Sprintf("JitterMode(%d)", uint8(j))
}

// Default values of [Exponential]'s fields.
const (
	DefaultInitial    = 100 * time.Millisecond
	DefaultMultiplier = 2.0
	DefaultMax        = 30 * time.Second
)

// Exponential waits Initial after the first failure and multiplies the wait
// by Multiplier after each further failure, up to Max, forever. Wrap it with
// [MaxAttempts] or [MaxElapsed] to bound it.
//
// The zero value is usable: 100ms, 200ms, 400ms, ... capped at 30s, no
// jitter. Use [Exponential.Validate] (or [Validate]) at startup to reject a
// bad configuration; Next clamps invalid values to the defaults rather than
// fail.
type Exponential struct {
	// Initial is the wait after the first failure. Optional; default 100ms.
	Initial time.Duration
	// Multiplier is the growth factor, at least 1. Optional; default 2.
	Multiplier float64
	// Max caps the wait (before jitter). Optional; default 30s.
	Max time.Duration
	// Jitter randomises the wait. Optional; default JitterNone.
	Jitter JitterMode
}

func (e Exponential) params() (initial, maxWait time.Duration, mult float64) {
	initial, maxWait, mult = e.Initial, e.Max, e.Multiplier
	if initial <= 0 {
		initial = DefaultInitial
	}
	if maxWait <= 0 {
		maxWait = DefaultMax
	}
	if !(mult >= 1) || math.IsInf(mult, 0) { // also catches NaN
		mult = DefaultMultiplier
	}
	return initial, max(initial, maxWait), mult
}

// Next returns Initial×Multiplier^(attempt-1), capped at Max, then jittered.
// It always returns true.
func (e Exponential) Next(attempt int, _ time.Duration) (time.Duration, bool) {
	initial, maxWait, mult := e.params()
	attempt = max(attempt, 1)
	w := float64(initial) * math.Pow(mult, float64(attempt-1))
	d := maxWait
	if w < float64(maxWait) { // false for +Inf and NaN
		d = time.Duration(w)
	}
	switch e.Jitter {
	case JitterFull:
		d = rand.N(d) // d >= 1ns: Initial is positive
	case JitterEqual:
		d = d/2 + rand.N(d-d/2)
	}
	return d, true
}

// Validate rejects negative durations, a Multiplier below 1 (other than the
// zero value), NaN or infinite, Initial above Max, and unknown jitter modes.
func (e Exponential) Validate() error {
	switch {
	case e.Initial < 0:
		return fmt.Errorf("%w: Exponential.Initial is negative (%v)", ErrInvalid, e.Initial)
	case e.Max < 0:
		return fmt.Errorf("%w: Exponential.Max is negative (%v)", ErrInvalid, e.Max)
	case math.IsNaN(e.Multiplier) || math.IsInf(e.Multiplier, 0):
		return fmt.Errorf("%w: Exponential.Multiplier is %v", ErrInvalid, e.Multiplier)
	case e.Multiplier != 0 && e.Multiplier < 1:
		return fmt.Errorf("%w: Exponential.Multiplier is %v, want at least 1 (or 0 for the default)", ErrInvalid, e.Multiplier)
	case e.Initial > 0 && e.Max > 0 && e.Initial > e.Max:
		return fmt.Errorf("%w: Exponential.Initial (%v) is above Max (%v)", ErrInvalid, e.Initial, e.Max)
	case e.Jitter > JitterEqual:
		return fmt.Errorf("%w: unknown Exponential.Jitter %v", ErrInvalid, e.Jitter)
	}
	return nil
}

// MaxAttempts bounds p to n tries in total, counting the first one: after
// the n-th failure it stops. MaxAttempts(p, 1) never retries. An n below 1 is
// rejected by [Validate] and counts as 1.
func MaxAttempts(p Policy, n int) Policy { return maxAttempts{p, n} }

type maxAttempts struct {
	p Policy
	n int
}

func (m maxAttempts) Next(attempt int, elapsed time.Duration) (time.Duration, bool) {
	if attempt >= m.n {
		return 0, false
	}
	return m.p.Next(attempt, elapsed)
}

func (m maxAttempts) Validate() error {
	if m.n < 1 {
		return fmt.Errorf("%w: MaxAttempts: n is %d, want at least 1 (the first try counts)", ErrInvalid, m.n)
	}
	return Validate(m.p)
}

func (m maxAttempts) stopCause(attempt int, elapsed time.Duration) error {
	if attempt >= m.n {
		return ErrMaxAttempts
	}
	return StopCause(m.p, attempt, elapsed)
}

// MaxElapsed bounds p to d since the first failure. It stops once elapsed
// reaches d, and it shortens a wait that would end after d, so that the last
// try happens at d rather than not at all. A negative d is rejected by
// [Validate].
func MaxElapsed(p Policy, d time.Duration) Policy { return maxElapsed{p, d} }

type maxElapsed struct {
	p Policy
	d time.Duration
}

func (m maxElapsed) Next(attempt int, elapsed time.Duration) (time.Duration, bool) {
	if elapsed >= m.d {
		return 0, false
	}
	w, ok := m.p.Next(attempt, elapsed)
	if !ok {
		return 0, false
	}
	return min(w, m.d-elapsed), true
}

func (m maxElapsed) Validate() error {
	if m.d < 0 {
		return fmt.Errorf("%w: MaxElapsed: negative duration %v", ErrInvalid, m.d)
	}
	return Validate(m.p)
}

func (m maxElapsed) stopCause(attempt int, elapsed time.Duration) error {
	if elapsed >= m.d {
		return ErrMaxElapsed
	}
	return StopCause(m.p, attempt, elapsed)
}

// Validate checks p and the policies it wraps, for policies that have a
// Validate() error method (all of this package's do). Call it at startup so
// that a broken configuration fails with a clear message. A nil p is
// invalid.
func Validate(p Policy) error {
	if p == nil {
		return fmt.Errorf("%w: nil Policy", ErrInvalid)
	}
	if v, ok := p.(interface{ Validate() error }); ok {
		return v.Validate()
	}
	return nil
}

// StopCause tells why p stopped at (attempt, elapsed): [ErrMaxAttempts],
// [ErrMaxElapsed], or [ErrStopped] when p does not say (a [PolicyFunc], a
// policy of another package). Call it only after p.Next returned false.
func StopCause(p Policy, attempt int, elapsed time.Duration) error {
	if s, ok := p.(interface {
		stopCause(int, time.Duration) error
	}); ok {
		return s.stopCause(attempt, elapsed)
	}
	return ErrStopped
}

// Next is p.Next that also honours a [failure.RetryAfter] hint in err: the
// wait is the longer of the policy's wait and the hint. It still returns
// false when the policy says stop.
func Next(p Policy, attempt int, elapsed time.Duration, err error) (time.Duration, bool) {
	w, ok := p.Next(attempt, elapsed)
	if !ok {
		return 0, false
	}
	w = max(w, 0)
	if h, ok := failure.RetryAfterOf(err); ok && h > w {
		w = h
	}
	return w, true
}

// Sleep waits for d or until ctx is done, whichever comes first. It returns
// ctx.Err() if ctx is done (even when d is 0 or negative), nil otherwise. It
// uses a timer: the goroutine sleeps, it never spins.
func Sleep(ctx context.Context, d time.Duration) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
