package serde

import (
	"context"
	"errors"
	"time"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/failure"
)

// A RetryOption configures [Retry].
type RetryOption func(*retryConfig)

type retryConfig struct {
	classifier failure.Classifier
	notify     func(ctx context.Context, m Meta, attempt int, wait time.Duration, err error)
}

// RetryClassifier sets the classifier that decides which errors are
// transient. Optional; default [failure.Default]. Only transient errors are
// retried: permanent and unclassified ones are returned at once (the
// deserialize-stage rule).
func RetryClassifier(c failure.Classifier) RetryOption {
	return func(cfg *retryConfig) { cfg.classifier = c }
}

// RetryNotify sets a function called before each wait, with the number of
// failures so far, the wait and the error: a place to log or count retries.
// It must not block. Optional; default none.
func RetryNotify(fn func(ctx context.Context, m Meta, attempt int, wait time.Duration, err error)) RetryOption {
	return func(cfg *retryConfig) { cfg.notify = fn }
}

// Retry returns a deserializer that retries d on transient errors, waiting
// between tries as policy p says (see package backoff), and honouring a
// [failure.RetryAfter] hint. It waits on a timer and stops as soon as ctx is
// done.
//
// When Retry gives up it returns a [*RetryError] with the number of tries,
// the [StopReason] and the last error. The RetryError adds no mark, so the
// returned error has the class of the last error: an exhausted transient
// error is still transient. A panic in d is recovered and returned as a
// permanent [*PanicError], never retried.
//
// On success Retry costs one indirect call: no allocation.
func Retry[T any](d Deserializer[T], p backoff.Policy, opts ...RetryOption) Deserializer[T] {
	r := &retry[T]{d: d, p: p, name: nameOf(d, "deserializer")}
	r.classifier = failure.Default()
	for _, o := range opts {
		o(&r.retryConfig)
	}
	return r
}

type retry[T any] struct {
	d    Deserializer[T]
	p    backoff.Policy
	name string
	retryConfig
}

func (r *retry[T]) Name() string { return r.name }

func (r *retry[T]) Deserialize(ctx context.Context, m Meta, data []byte) (T, error) {
	v, err := r.try(ctx, m, data)
	if err == nil {
		return v, nil
	}
	return r.again(ctx, m, data, err)
}

// try calls d once, turning a panic into an error.
func (r *retry[T]) try(ctx context.Context, m Meta, data []byte) (v T, err error) {
	defer func() {
		if rec := recover(); rec != nil {
			var zero T
			v, err = zero, newPanicError(r.name, m.Part, rec)
		}
	}()
	return r.d.Deserialize(ctx, m, data)
}

// again is the slow path, after the first failure.
func (r *retry[T]) again(ctx context.Context, m Meta, data []byte, err error) (T, error) {
	var zero T
	start := time.Now()
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return zero, &RetryError{Attempts: attempt, Reason: StopCanceled, Err: err}
		}
		if IsPanic(err) || r.classifier.Classify(err) != failure.ClassTransient {
			return zero, &RetryError{Attempts: attempt, Reason: StopNotRetryable, Err: err}
		}
		elapsed := time.Since(start)
		wait, ok := backoff.Next(r.p, attempt, elapsed, err)
		if !ok {
			return zero, &RetryError{Attempts: attempt, Reason: stopReason(r.p, attempt, elapsed), Err: err}
		}
		if r.notify != nil {
			r.notify(ctx, m, attempt, wait, err)
		}
		if backoff.Sleep(ctx, wait) != nil {
			return zero, &RetryError{Attempts: attempt, Reason: StopCanceled, Err: err}
		}
		var v T
		if v, err = r.try(ctx, m, data); err == nil {
			return v, nil
		}
	}
}

func stopReason(p backoff.Policy, attempt int, elapsed time.Duration) StopReason {
	switch cause := backoff.StopCause(p, attempt, elapsed); {
	case errors.Is(cause, backoff.ErrMaxAttempts):
		return StopMaxAttempts
	case errors.Is(cause, backoff.ErrMaxElapsed):
		return StopMaxElapsed
	}
	return StopPolicy
}
