package serde

import (
	"errors"
	"fmt"
	"runtime"
	"strings"

	"github.com/antidote-kafka/antidote/failure"
)

var (
	// ErrTooLarge is returned (marked permanent) when a decompression stage
	// would produce more than its size limit: a zip bomb, or a limit set
	// too low.
	ErrTooLarge = errors.New("serde: decoded data exceeds the size limit")

	// ErrTrailingData is returned (marked permanent) by a strict JSON codec
	// when data holds more than one JSON value.
	ErrTrailingData = errors.New("serde: trailing data after JSON value")

	// ErrInvalidUTF8 is returned (marked permanent) by a String codec that
	// requires valid UTF-8.
	ErrInvalidUTF8 = errors.New("serde: invalid UTF-8")

	// ErrMissingKeyID is returned (marked permanent) by [AESGCM] when the
	// record has no key-id header.
	ErrMissingKeyID = errors.New("serde: missing key-id header")

	// ErrUnknownKey is returned by a [KeySource] that does not know a key
	// id. [AESGCM] marks it permanent.
	ErrUnknownKey = errors.New("serde: unknown key id")

	// ErrCiphertext is returned (marked permanent) by [AESGCM] when the data
	// is too short to hold a nonce and a tag, or fails authentication (a
	// wrong key, or tampered bytes).
	ErrCiphertext = errors.New("serde: invalid ciphertext")
)

// Error is the error of a stage or a codec. It names the stage, so that a
// dead letter tells where a record broke. Its class is the class of Err.
type Error struct {
	// Stage is the name of the stage or codec that failed, e.g. "gzip".
	Stage string
	// Part is the record part being read or written (0 if unknown).
	Part Part
	// Err is what went wrong.
	Err error
}

// Error returns e.g. "serde: value: gzip: invalid header". When the wrapped
// message already starts with the stage name (encoding/json's "json: ...",
// compress/gzip's "gzip: ..."), the name is not repeated.
func (e *Error) Error() string {
	msg := e.Err.Error()
	prefix := "serde: "
	if e.Part != 0 {
		prefix += e.Part.String() + ": "
	}
	if strings.HasPrefix(msg, e.Stage+": ") {
		return prefix + msg
	}
	return prefix + e.Stage + ": " + msg
}

// Unwrap returns e.Err.
func (e *Error) Unwrap() error { return e.Err }

// StageOf returns the name of the stage or codec that produced err: the
// Stage of the outermost [*Error] in err's tree.
func StageOf(err error) (string, bool) {
	if e, ok := errors.AsType[*Error](err); ok {
		return e.Stage, true
	}
	if e, ok := errors.AsType[*PanicError](err); ok {
		return e.Stage, true
	}
	return "", false
}

// maxStack bounds PanicError.Stack, so that a dead letter's headers stay small.
const maxStack = 2 << 10

// PanicError is a panic recovered from a stage, a codec or a fallback
// function. It is always returned marked permanent and wrapped in an
// [*Error]: a panic never crashes the consumer.
type PanicError struct {
	// Stage is the name of the stage that panicked.
	Stage string
	// Value is the value passed to panic.
	Value any
	// Stack is the start of the panicking goroutine's stack, at most 2 KiB.
	Stack []byte
}

// Error returns "panic: <Value>".
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// IsPanic reports whether err's tree holds a [*PanicError].
func IsPanic(err error) bool {
	_, ok := errors.AsType[*PanicError](err)
	return ok
}

// StopReason tells why [Retry] stopped retrying.
type StopReason uint8

const (
	// StopNotRetryable: the error was not transient (permanent or
	// unclassified), so it was not retried.
	StopNotRetryable StopReason = iota + 1
	// StopMaxAttempts: the policy ran out of tries.
	StopMaxAttempts
	// StopMaxElapsed: the policy ran out of time.
	StopMaxElapsed
	// StopPolicy: the policy stopped without saying why.
	StopPolicy
	// StopCanceled: ctx was done (shutdown, or a deadline).
	StopCanceled
)

// String returns "not retryable", "max attempts", "max elapsed", "policy" or
// "canceled".
func (r StopReason) String() string {
	switch r {
	case StopNotRetryable:
		return "not retryable"
	case StopMaxAttempts:
		return "max attempts"
	case StopMaxElapsed:
		return "max elapsed"
	case StopPolicy:
		return "policy"
	case StopCanceled:
		return "canceled"
	}
	return fmt.Sprintf("StopReason(%d)", uint8(r))
}

// RetryError is returned by [Retry] when it gives up. It carries the last
// error and why it stopped. It adds no mark: its class is the class of Err,
// so an exhausted transient error stays transient.
type RetryError struct {
	// Attempts is the number of tries made, counting the first one.
	Attempts int
	// Reason says why Retry stopped.
	Reason StopReason
	// Err is the error of the last try.
	Err error
}

// Error returns e.g. "serde: gave up after 5 attempts (max attempts): <Err>".
func (e *RetryError) Error() string {
	return fmt.Sprintf("serde: gave up after %d attempts (%v): %v", e.Attempts, e.Reason, e.Err)
}

// Unwrap returns e.Err.
func (e *RetryError) Unwrap() error { return e.Err }

// newPanicError builds the error for a recovered panic.
func newPanicError(stage string, part Part, v any) error {
	buf := make([]byte, maxStack)
	buf = buf[:runtime.Stack(buf, false)]
	return &Error{Stage: stage, Part: part, Err: failure.Permanent(&PanicError{Stage: stage, Value: v, Stack: buf})}
}

// wrap names the stage of err, unless err already names one.
func wrap(stage string, part Part, err error) error {
	if _, ok := errors.AsType[*Error](err); ok {
		return err
	}
	return &Error{Stage: stage, Part: part, Err: err}
}

// permanent wraps err, marked permanent, in an [*Error] naming stage.
func permanent(stage string, part Part, err error) error {
	return &Error{Stage: stage, Part: part, Err: failure.Permanent(err)}
}

// nameOf returns x's Name() if it has one, def otherwise.
func nameOf(x any, def string) string {
	if n, ok := x.(interface{ Name() string }); ok {
		return n.Name()
	}
	return def
}
