package consumer

import (
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// Hooks receives the consumer's events, for metrics and alerting. The
// consumer imports no metrics library: package metrics/prom turns these events
// into Prometheus metrics. Embed [NopHooks] to implement only some methods
// (and to keep compiling when methods are added).
//
// Methods are called synchronously from the partition workers (several at
// once) and from the poll and group goroutines: they must be safe for
// concurrent use, must not block, and must not call back into the consumer.
// Event values are copies; their strings are the consumer's own, never record
// contents.
type Hooks interface {
	// RecordSettled: a record is settled, once per record: processed,
	// dead-lettered, skipped or halted; or forwarded to a retry tier, and
	// then settled again when read from it.
	RecordSettled(SettledEvent)
	// RecordRetried: a failed record is about to wait for another try in
	// place.
	RecordRetried(RetryEvent)
	// HandlerDone: one call of the handler returned, with its duration and
	// error (nil on success).
	HandlerDone(HandlerEvent)
	// DeadLetterWritten: one dead-letter write attempt ended, acknowledged
	// (Err nil) or failed.
	DeadLetterWritten(WriteEvent)
	// PartitionStuck and PartitionUnstuck: a partition cannot move past a
	// record, and then can again (see [Stuck]).
	PartitionStuck(StuckEvent)
	PartitionUnstuck(PartitionEvent)
	// PartitionPaused and PartitionResumed: fetching of a partition is
	// paused (a retry in place, a full buffer, an operator) and resumed.
	PartitionPaused(PauseEvent)
	PartitionResumed(PauseEvent)
	// PartitionsAssigned and PartitionsRevoked: the group gave this member
	// partitions or took them (revoked or lost).
	PartitionsAssigned(map[string][]int32)
	PartitionsRevoked(map[string][]int32)
	// FloodGuardTripped and FloodGuardResumed: the flood guard stopped the
	// consumer (see [FloodGuard]), and an operator resumed it.
	FloodGuardTripped(Flood)
	FloodGuardResumed(Flood)
	// RecordAcquired: a share-group member acquired a record (see
	// [Config.ShareGroup]), with the delivery count the broker gave it.
	RecordAcquired(AcquiredEvent)
	// RecordAcknowledged: a share-group member acknowledged a record:
	// ACCEPT, RELEASE, or RENEW of a record still being handled.
	RecordAcknowledged(AckEvent)
	// TransactionEnded: a transaction of the exactly-once mode (see
	// [ExactlyOnce]) ended, committed or not. It follows the
	// DeadLetterWritten of every letter written in it, unless the consumer
	// stopped or halted before the cluster confirmed its abort.
	TransactionEnded(TransactionEvent)
}

// NopHooks implements [Hooks] with methods that do nothing. Embed it.
type NopHooks struct{}

var _ Hooks = NopHooks{}

func (NopHooks) RecordSettled(SettledEvent)            {}
func (NopHooks) RecordRetried(RetryEvent)              {}
func (NopHooks) HandlerDone(HandlerEvent)              {}
func (NopHooks) DeadLetterWritten(WriteEvent)          {}
func (NopHooks) PartitionStuck(StuckEvent)             {}
func (NopHooks) PartitionUnstuck(PartitionEvent)       {}
func (NopHooks) PartitionPaused(PauseEvent)            {}
func (NopHooks) PartitionResumed(PauseEvent)           {}
func (NopHooks) PartitionsAssigned(map[string][]int32) {}
func (NopHooks) PartitionsRevoked(map[string][]int32)  {}
func (NopHooks) FloodGuardTripped(Flood)               {}
func (NopHooks) FloodGuardResumed(Flood)               {}
func (NopHooks) RecordAcquired(AcquiredEvent)          {}
func (NopHooks) RecordAcknowledged(AckEvent)           {}
func (NopHooks) TransactionEnded(TransactionEvent)     {}

// Outcome is how a record was settled ([SettledEvent.Outcome],
// [OutcomeKey.Outcome]).
type Outcome string

// Outcomes of a settled record.
const (
	OutcomeProcessed    Outcome = "processed"
	OutcomeRetried      Outcome = "retried"
	OutcomeDeadLettered Outcome = "dead-lettered"
	OutcomeSkipped      Outcome = "skipped"
	OutcomeHalted       Outcome = "halted"
	// OutcomeForwarded: the record failed and was forwarded to a retry
	// tier (see [RetryTopics]); its partition is done with it, and it is
	// settled again when read from the tier.
	OutcomeForwarded Outcome = "forwarded"
)

// PartitionEvent names a partition.
type PartitionEvent struct {
	Topic     string
	Partition int32
}

// SettledEvent is a settled record. Stage and Class are empty and
// unclassified for a processed record.
type SettledEvent struct {
	PartitionEvent
	Offset  int64
	Outcome Outcome
	Stage   deadletter.Stage
	Class   failure.Class
}

// RetryEvent is a record about to wait before its next try.
type RetryEvent struct {
	PartitionEvent
	Offset  int64
	Stage   deadletter.Stage
	Class   failure.Class
	Attempt int
	Wait    time.Duration
}

// HandlerEvent is one handler call.
type HandlerEvent struct {
	PartitionEvent
	Duration time.Duration
	Err      error
}

// WriteEvent is one dead-letter write attempt.
type WriteEvent struct {
	PartitionEvent  // of the source record
	DeadLetterTopic string
	Latency         time.Duration
	Err             error
}

// StuckEvent is a partition stuck on a record.
type StuckEvent struct {
	PartitionEvent
	Offset int64
	Reason StuckReason
	Since  time.Time
}

// PauseEvent is a partition whose fetching is paused or resumed.
type PauseEvent struct {
	PartitionEvent
	// Reason is why it is (or was) paused.
	Reason PauseReason
}

// PauseReason is why a partition's fetching is paused ([PauseEvent.Reason],
// [Partition.Paused]).
type PauseReason string

// Why a partition's fetching is paused.
const (
	// PauseStuck: the partition is stuck on a record (retrying it,
	// waiting for its dead letter, or held by the flood guard).
	PauseStuck PauseReason = "stuck"
	// PauseFull: the partition holds its buffer bound (BufferLimits): its
	// fetching is paused, or the poll loop waits for it.
	PauseFull     PauseReason = "buffer-full"
	PauseOperator PauseReason = "operator"
	// PauseDue: a retry-tier partition waits until its head record is due.
	PauseDue PauseReason = "retry-due"
	// PauseParked: a source partition waits until its retry tiers hold
	// fewer than RetryTopics.MaxParked of its records (per-key order).
	PauseParked PauseReason = "retry-parked-full"
)

// AcquiredEvent is a record a share-group member acquired.
type AcquiredEvent struct {
	PartitionEvent
	Offset int64
	// DeliveryCount is the broker's count of the record's deliveries,
	// this one included: 1 on its first.
	DeliveryCount int32
}

// AckEvent is an acknowledgement a share-group member sent.
type AckEvent struct {
	PartitionEvent
	Offset        int64
	Ack           Ack
	DeliveryCount int32
}

// Ack is a share group's acknowledgement of a record ([AckEvent.Ack]).
// REJECT is not among them: a share-group member never sends it.
type Ack string

// Acknowledgements of a share-group member.
const (
	// AckAccept: the record is settled (processed, dead-lettered or
	// skipped); the group never delivers it again.
	AckAccept Ack = "accept"
	// AckRelease: the record goes back to the group for another delivery.
	AckRelease Ack = "release"
	// AckRenew: the record's acquisition lock is extended while it is
	// retried in place.
	AckRenew Ack = "renew"
)

// TransactionEvent is the end of a transaction of the exactly-once mode.
type TransactionEvent struct {
	// Committed says the transaction committed. Otherwise it was aborted,
	// and its records are handled again from the group's committed
	// offsets; or, when Err says the cluster did not confirm the end of
	// the commit, it may have committed, and the consumer goes on from
	// the offsets the broker holds, which say which it was.
	Committed bool
	// Records is how many records were settled in it.
	Records int
	// Err is why it was not committed: a write in it failed, a partition
	// was revoked, or the cluster did not confirm its end. Nil when
	// committed.
	Err error
}
