package consumer

import (
	"errors"
	"fmt"
	"time"
)

// ErrConfig is wrapped by every configuration error returned by [New]. The
// message names the offending key and the reason.
var ErrConfig = errors.New("consumer: invalid config")

func configErr(key, reason string) error {
	return fmt.Errorf("%w: %s: %s", ErrConfig, key, reason)
}

// ErrNotAssigned is returned by [Consumer.Skip] for a partition this member
// does not own.
var ErrNotAssigned = errors.New("consumer: partition not assigned")

// ErrNotStuck is returned by [Consumer.Skip] and [Consumer.DeadLetter] when
// the partition is not stuck on the record.
var ErrNotStuck = errors.New("consumer: partition is not stuck on a record")

// ErrClosed is returned by [Consumer.Run] when it is called twice.
var ErrClosed = errors.New("consumer: already run")

// HaltError is returned by [Consumer.Run] when a failure's policy is Halt. It
// names the record; the offset was not committed past it. In the
// exactly-once mode it is also returned when this member can no longer write
// transactions: another one took its transactional id, it is not authorized,
// or a transaction ended with its outcome unknown (a restart reads the
// group's offsets from the broker). Topic is empty and Stage is
// "transaction".
type HaltError struct {
	Topic     string
	Partition int32
	Offset    int64
	Timestamp time.Time
	Stage     string
	Err       error
}

func (e *HaltError) Error() string {
	if e.Topic == "" { // not on a record: the transactions of ExactlyOnce
		return fmt.Sprintf("consumer: halted (%s): %v", e.Stage, e.Err)
	}
	return fmt.Sprintf("consumer: halted on %s/%d@%d (%s): %v", e.Topic, e.Partition, e.Offset, e.Stage, e.Err)
}

// Unwrap returns the failure that halted the consumer.
func (e *HaltError) Unwrap() error { return e.Err }

// IsHalt reports whether err is, or wraps, a *HaltError.
func IsHalt(err error) bool {
	var h *HaltError
	return errors.As(err, &h)
}

// ErrNotRetrying is returned by [Consumer.DeadLetter] when the partition is
// stuck on the record but not retrying it: its dead letter is on its way
// already, or the flood guard holds it.
var ErrNotRetrying = errors.New("consumer: the stuck record is not being retried")
