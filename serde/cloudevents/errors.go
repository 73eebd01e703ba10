package cloudevents

import (
	"errors"
	"fmt"
)

var (
	// ErrNotCloudEvent matches (errors.Is) a [*MissingAttributeError] and a
	// [*FormatError]: the record is not a valid CloudEvent. Permanent.
	ErrNotCloudEvent = errors.New("cloudevents: not a valid CloudEvent")
)

// stage is the name of this package's codec in serde errors and dead-letter
// headers.
const stage = "cloudevents"

// MissingAttributeError reports a CloudEvent without one of its required
// attributes: specversion, id, source or type. Permanent. It matches
// [ErrNotCloudEvent].
type MissingAttributeError struct {
	// Name is the attribute, e.g. "source".
	Name string
	// Mode is the content mode the record was read in.
	Mode Mode
}

// Error returns e.g. "cloudevents: required attribute source missing (binary mode)".
func (e *MissingAttributeError) Error() string {
	return fmt.Sprintf("cloudevents: required attribute %s missing (%v mode)", e.Name, e.Mode)
}

// Is reports whether target is [ErrNotCloudEvent].
func (e *MissingAttributeError) Is(target error) bool { return target == ErrNotCloudEvent }

// FormatError reports a CloudEvent that cannot be read: a structured event
// that is not a JSON object, an attribute of the wrong type or form (a
// time that is not RFC 3339, data_base64 that is not base64), or a
// specversion other than 1.0. Permanent. It matches [ErrNotCloudEvent].
type FormatError struct {
	// Attribute is the attribute at fault, "" for the whole event.
	Attribute string
	// Reason says what is wrong; it is printable and at most 256 bytes.
	Reason string
	// Mode is the content mode the record was read in.
	Mode Mode
}

// Error returns e.g. "cloudevents: attribute time: not RFC 3339 (structured mode)".
func (e *FormatError) Error() string {
	if e.Attribute == "" {
		return fmt.Sprintf("cloudevents: %s (%v mode)", e.Reason, e.Mode)
	}
	return fmt.Sprintf("cloudevents: attribute %s: %s (%v mode)", e.Attribute, e.Reason, e.Mode)
}

// Is reports whether target is [ErrNotCloudEvent].
func (e *FormatError) Is(target error) bool { return target == ErrNotCloudEvent }

var (
	_ error = (*MissingAttributeError)(nil)
	_ error = (*FormatError)(nil)
)
