package registry

import (
	"errors"
	"strconv"
)

var (
	// ErrUnknownSchema matches (errors.Is) an [*UnknownSchemaError]: the
	// registry answered that it has no schema with the record's id.
	// Permanent.
	ErrUnknownSchema = errors.New("schema registry: unknown schema id")

	// ErrBreakerOpen is the cause of the transient error returned, without
	// asking the registry, while the circuit breaker is open. The error
	// carries a failure.RetryAfter hint: the time until the next probe.
	ErrBreakerOpen = errors.New("schema registry circuit breaker open")
)

// UnknownSchemaError reports a schema id the registry does not know (HTTP
// 404, error code 40403). It matches [ErrUnknownSchema]. It is a root
// cause: the format packages report it as their own type (for example
// *avro.UnknownSchemaError), so that a dead letter's error type names the
// format.
type UnknownSchemaError struct {
	// ID is the schema id read from the record, or 0 for a reference.
	ID int
	// Subject and Version name the schema a reference points to, for a
	// reference ([Registry.Reference]).
	Subject string
	Version int
}

// Error returns "schema registry: unknown schema id 42", or for a
// reference "schema registry: unknown schema id: subject acme/money.proto version 3".
func (e *UnknownSchemaError) Error() string {
	if e.Subject != "" {
		return ErrUnknownSchema.Error() + ": subject " + e.Subject + " version " + strconv.Itoa(e.Version)
	}
	return ErrUnknownSchema.Error() + " " + strconv.Itoa(e.ID)
}

// Is reports whether target is [ErrUnknownSchema].
func (e *UnknownSchemaError) Is(target error) bool { return target == ErrUnknownSchema }

// RegistryError reports a failed registry call that may succeed later: the
// registry is unreachable, timed out, answered 5xx or 429 (or any error
// other than "schema not found"), or the circuit breaker is open
// (Err is [ErrBreakerOpen]). It is returned marked transient, with
// failure.RetryAfter when the registry or the breaker gave a hint; a
// registration the registry refused (409, 422) is marked permanent.
type RegistryError struct {
	// ID is the schema id looked up, or 0 for a registration.
	ID int
	// Subject is the subject registered to, or the subject of a
	// reference looked up; "" for a lookup by id.
	Subject string
	// Version is the version of a reference looked up, 0 otherwise.
	Version int
	// Err is the cause: a network error, a *failure.HTTPError carrying the
	// status, a *serde.PanicError, or ErrBreakerOpen.
	Err error
}

// Error returns e.g. "schema registry: looking up schema id 7: <Err>".
func (e *RegistryError) Error() string {
	if e.Version != 0 {
		return "schema registry: looking up subject " + e.Subject + " version " + strconv.Itoa(e.Version) + ": " + e.Err.Error()
	}
	if e.Subject != "" {
		return "schema registry: registering to subject " + e.Subject + ": " + e.Err.Error()
	}
	return "schema registry: looking up schema id " + strconv.Itoa(e.ID) + ": " + e.Err.Error()
}

// Unwrap returns e.Err.
func (e *RegistryError) Unwrap() error { return e.Err }

// IsBreakerOpen reports whether err was returned, without a registry call,
// because the circuit breaker is open.
func IsBreakerOpen(err error) bool { return errors.Is(err, ErrBreakerOpen) }

var (
	_ error = (*UnknownSchemaError)(nil)
	_ error = (*RegistryError)(nil)
)
