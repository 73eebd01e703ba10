package failure

import (
	"fmt"
	"strconv"
	"time"
)

// Class says whether retrying a failed operation can help.
type Class uint8

const (
	// ClassUnclassified means nothing is known about the error: the caller
	// decides. The deserialize stage treats it as permanent, the process stage
	// retries it a bounded number of times.
	ClassUnclassified Class = iota
	// ClassTransient means the same operation may succeed if tried again later:
	// a network failure, a timeout, an overloaded dependency.
	ClassTransient
	// ClassPermanent means the same operation will never succeed: malformed
	// bytes, an unknown schema, a validation error.
	ClassPermanent
)

// String returns "unclassified", "transient" or "permanent".
func (c Class) String() string {
	switch c {
	case ClassUnclassified:
		return "unclassified"
	case ClassTransient:
		return "transient"
	case ClassPermanent:
		return "permanent"
	default:
		return "Class(" + strconv.Itoa(int(c)) + ")"
	}
}

// MarshalText writes the class as its String, so that logs and JSON say
// "permanent" rather than 2.
func (c Class) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText reads a class written by MarshalText.
func (c *Class) UnmarshalText(b []byte) error {
	switch string(b) {
	case "unclassified":
		*c = ClassUnclassified
	case "transient":
		*c = ClassTransient
	case "permanent":
		*c = ClassPermanent
	default:
		return fmt.Errorf("failure: unknown class %q", b)
	}
	return nil
}

// markError is the wrapper returned by [Permanent], [Transient] and
// [RetryAfter]. It is transparent: Error returns the wrapped message and
// Unwrap returns the wrapped error.
type markError struct {
	class    Class
	hasAfter bool
	after    time.Duration
	err      error
}

func (e *markError) Error() string { return e.err.Error() }
func (e *markError) Unwrap() error { return e.err }

// Permanent marks err as permanent: retrying will not help. It returns nil if
// err is nil. The returned error unwraps to err and has the same message.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &markError{class: ClassPermanent, err: err}
}

// Transient marks err as transient: retrying later may help. It returns nil if
// err is nil. The returned error unwraps to err and has the same message.
func Transient(err error) error {
	if err == nil {
		return nil
	}
	return &markError{class: ClassTransient, err: err}
}

// RetryAfter marks err as transient and attaches a hint: do not try again
// before d has passed (an HTTP Retry-After header, a broker's throttle time).
// A negative d counts as 0. It returns nil if err is nil.
func RetryAfter(d time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &markError{class: ClassTransient, hasAfter: true, after: max(d, 0), err: err}
}

// RetryAfterOf returns the hint of the outermost [RetryAfter] mark in err's
// tree, if any.
func RetryAfterOf(err error) (time.Duration, bool) {
	var d time.Duration
	found := walk(err, func(e error) bool {
		if m, ok := e.(*markError); ok && m.hasAfter {
			d = m.after
			return true
		}
		return false
	})
	return d, found
}

// MarkOf returns the class of the outermost explicit mark ([Permanent],
// [Transient], [RetryAfter]) in err's tree. It reports false when err carries
// no mark, which lets code tell "marked transient" from "classified transient
// by a matcher".
func MarkOf(err error) (Class, bool) {
	var c Class
	found := walk(err, func(e error) bool {
		if m, ok := e.(*markError); ok {
			c = m.class
			return true
		}
		return false
	})
	return c, found
}

// walk visits err's tree depth first, in the order errors.As uses, and stops
// at the first error for which fn returns true.
func walk(err error, fn func(error) bool) bool {
	for err != nil {
		if fn(err) {
			return true
		}
		switch u := err.(type) {
		case interface{ Unwrap() error }:
			err = u.Unwrap()
		case interface{ Unwrap() []error }:
			for _, e := range u.Unwrap() {
				if walk(e, fn) {
					return true
				}
			}
			return false
		default:
			return false
		}
	}
	return false
}
