package deadletter

import (
	"errors"
	"fmt"
)

// ErrUnknownDialect is returned by [Parse] for a record that carries no
// failure headers of any dialect it knows: it is not a dead letter, or one
// written by a system Antidote cannot read.
var ErrUnknownDialect = errors.New("deadletter: no known dead-letter headers")

// ErrUnknownTopic is returned by [Scan] and [Redrive] when the dead-letter
// topic does not exist. The error wrapping it names the topic.
var ErrUnknownTopic = errors.New("deadletter: topic does not exist")

// ErrStop may be returned by the callback of [Scan] to end the scan early
// without an error.
var ErrStop = errors.New("deadletter: stop scan")

// HeaderError reports a malformed header value: a Spring int of the wrong
// length, a non-numeric partition, an unparsable time.
type HeaderError struct {
	Key   string // the header name
	Value []byte // the value, as found
	Err   error  // what is wrong with it
}

func (e *HeaderError) Error() string {
	return fmt.Sprintf("deadletter: header %s: bad value %s: %v", e.Key, quoteValue(e.Value), e.Err)
}

func (e *HeaderError) Unwrap() error { return e.Err }

// quoteValue quotes a header value for an error message, bounded in size.
func quoteValue(v []byte) string {
	if v == nil {
		return "null"
	}
	return fmt.Sprintf("%q", Truncate(string(v), 64))
}

// ErrStalled is returned by [Scan] (and [Redrive]) when no record came for
// the idle timeout while records were still due: the broker stalled, or
// the client cannot see the transaction markers at the end (see
// [ScanOpts]). The error wrapping it names each unfinished partition's
// position and end offset. Nothing is taken for the end.
var ErrStalled = errors.New("deadletter: scan stalled")

// ErrNoProgress is returned by [RedrivenPrefix] when the redrive's group
// has committed no progress on the dead-letter topic: no redrive ran with
// that configuration, so none of its letters is known to be redriven. The
// error wrapping it names the group and the topic.
var ErrNoProgress = errors.New("deadletter: the redrive group has no progress on the topic")
