package failure

import "strconv"

// HTTPStatus is implemented by errors that carry the status of an HTTP
// response (a schema registry, a key service, an HTTP sink). The defaults
// classify such an error with [StatusClass].
type HTTPStatus interface {
	HTTPStatus() int
}

// HTTPError is a ready-made error that implements [HTTPStatus].
type HTTPError struct {
	// StatusCode is the HTTP response status, e.g. 503.
	StatusCode int
	// Err is the underlying error, if any. Optional.
	Err error
}

// Error returns "http status 503" or "http status 503: <Err>".
func (e *HTTPError) Error() string {
	s := "http status " + strconv.Itoa(e.StatusCode)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

// HTTPStatus returns e.StatusCode.
func (e *HTTPError) HTTPStatus() int { return e.StatusCode }

// Unwrap returns e.Err.
func (e *HTTPError) Unwrap() error { return e.Err }

// ValidationError reports a decoded value that is well-formed but invalid
// (a missing required field, a value out of range). It is permanent by
// default: the same record will always fail the same way.
type ValidationError struct {
	// Field names what is invalid, e.g. "order.amount". Optional.
	Field string
	// Reason says why, e.g. "must be positive".
	Reason string
}

// Error returns "invalid order.amount: must be positive".
func (e *ValidationError) Error() string {
	if e.Field == "" {
		return "invalid: " + e.Reason
	}
	return "invalid " + e.Field + ": " + e.Reason
}

// IsTransient reports whether the default classifier ([Classify]) calls err
// transient.
func IsTransient(err error) bool { return Classify(err) == ClassTransient }

// IsPermanent reports whether the default classifier ([Classify]) calls err
// permanent.
func IsPermanent(err error) bool { return Classify(err) == ClassPermanent }

var (
	_ HTTPStatus = (*HTTPError)(nil)
	_ error      = (*HTTPError)(nil)
	_ error      = (*ValidationError)(nil)
)
