package consumer

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// Stats is a snapshot of a consumer's counters.
type Stats struct {
	// Consumed counts records taken from fetches (each once, however often
	// it is retried).
	Consumed uint64
	// Processed counts records the handler completed.
	Processed uint64
	// Retried counts retries in place (one per wait).
	Retried uint64
	// DeadLettered counts records written to a dead-letter topic.
	DeadLettered uint64
	// Skipped counts records skipped by policy or by an operator.
	Skipped uint64
	// Halted counts halts (0 or 1).
	Halted uint64
	// Forwarded counts records forwarded to a retry tier after failing,
	// once per tier; Parked counts records forwarded only to stay behind
	// an earlier record of their key (see [RetryTopics]); Held counts
	// records of a tier that waited behind an earlier record of their key
	// in memory instead (each time one starts to wait).
	Forwarded uint64
	Parked    uint64
	Held      uint64
	// DeadLetterWriteErrors counts failed dead-letter write attempts.
	DeadLetterWriteErrors uint64
	// TransactionsCommitted and TransactionsAborted count the transactions
	// of the exactly-once mode (see [ExactlyOnce]).
	TransactionsCommitted uint64 `json:",omitempty"`
	TransactionsAborted   uint64 `json:",omitempty"`
	// Outcomes breaks the failure counters down by stage and class.
	Outcomes map[OutcomeKey]uint64
	// RetryEnabled is the kill switch.
	RetryEnabled bool
	// Stuck lists the records that partitions cannot move past right now,
	// by partition and offset: at most one per partition, or, with
	// [Concurrency], one per record waiting to be retried or written.
	Stuck []Stuck
	// BufferedRecords and BufferedBytes are what the assigned partitions
	// hold (see [BufferLimits]).
	BufferedRecords int
	BufferedBytes   int64
	// Running: Run is running. Ready: Run is running, this member has
	// partitions, nothing halted it and the flood guard does not hold it
	// (what a readiness probe asks).
	Running bool
	Ready   bool
	// Partitions describes each partition this member works on, by topic
	// and partition.
	Partitions []Partition
	// Flood is the tripped flood guard, nil while it has not tripped (see
	// [FloodGuard]); FloodTrips counts how often it tripped.
	Flood      *Flood `json:",omitempty"`
	FloodTrips uint64
	// Topics are the source topics (consumer groups only), by name, with
	// their partition counts as the metadata gave them, read every 5 s
	// while Run runs: empty before the first read. More members of a group
	// than the partitions of a topic it reads leave some idle: an
	// autoscaler caps replicas with it (antidote_topic_partitions).
	Topics []Topic `json:",omitempty"`
	// DeadLetterTopics is what the consumer knows of each dead-letter
	// topic: checked (and created) when partitions are assigned.
	DeadLetterTopics []DeadLetterTopic
	// RetryTopics is the same for the retry tiers.
	RetryTopics []DeadLetterTopic `json:",omitempty"`
	// Brokers says whether the cluster answers.
	Brokers BrokerState
	// Dependencies is the state of each of [Config.Dependencies].
	Dependencies map[string]string
	// ShareGroup is the share group of a member made with
	// Config.ShareGroup, nil otherwise.
	ShareGroup *ShareGroupState `json:",omitempty"`
}

// Partition is the state of one assigned partition.
type Partition struct {
	Topic     string
	Partition int32
	// State is PartitionFlowing, PartitionPaused (paused by an operator, or
	// holding its buffer bound: its fetching paused, or the poll loop
	// waiting for it) or PartitionStuck (see Stats.Stuck).
	State PartitionState
	// Paused is why its fetching is paused, empty while it flows.
	Paused          PauseReason `json:",omitempty"`
	BufferedRecords int
	BufferedBytes   int64
	// HighWatermark is the partition's end offset at the last fetch,
	// Committed the group's committed offset, and Lag the difference: the
	// records not yet committed. Each is -1 while unknown.
	HighWatermark int64
	Committed     int64
	Lag           int64
}

// PartitionState is the state of a partition ([Partition.State]).
type PartitionState string

// States of a partition.
const (
	PartitionFlowing PartitionState = "flowing"
	PartitionPaused  PartitionState = "paused"
	PartitionStuck   PartitionState = "stuck"
)

// DeadLetterTopic is the state of one dead-letter topic.
type DeadLetterTopic struct {
	Topic  string
	Source string // the source topic
	// Ready: the topic exists (or was created) and its size limit is known.
	Ready bool
	// MaxMessageBytes is its max.message.bytes, 0 if unknown.
	MaxMessageBytes int32
	// Error says why it is not ready.
	Error string `json:",omitempty"`
}

// Topic is a source topic as the cluster's metadata last described it.
type Topic struct {
	Topic      string
	Partitions int
	// CheckedAt is when the metadata was read; it is read again 5 s later.
	CheckedAt time.Time
}

// BrokerState says whether the cluster answers.
type BrokerState struct {
	// Reachable: a connection to a broker succeeded and none failed since,
	// or one is open.
	Reachable bool
	// LastError is the last connection error, if any; Since is when the
	// brokers stopped answering (zero while reachable).
	LastError string    `json:",omitempty"`
	Since     time.Time `json:",omitzero"`
}

// OutcomeKey indexes [Stats.Outcomes].
type OutcomeKey struct {
	Stage   deadletter.Stage
	Class   failure.Class
	Outcome Outcome // OutcomeRetried, OutcomeDeadLettered, OutcomeSkipped, OutcomeHalted, OutcomeForwarded or OutcomeReleased
}

// MarshalText writes the key as "stage/class/outcome", for example
// "deserialize-value/permanent/dead-lettered": Stats marshals to JSON with
// these as the keys of Outcomes.
func (k OutcomeKey) MarshalText() ([]byte, error) {
	return []byte(string(k.Stage) + "/" + k.Class.String() + "/" + string(k.Outcome)), nil
}

// StuckReason is why a partition is stuck ([Stuck.Reason], [StuckEvent.Reason]).
type StuckReason string

// Why a partition is stuck.
const (
	StuckRetrying   StuckReason = "retrying"
	StuckDeadLetter StuckReason = "dead-letter write"
	StuckFlood      StuckReason = "flood guard"
)

// Stuck is a partition that cannot move past a record: it is retrying it, or
// waiting for its dead letter to be written.
type Stuck struct {
	Topic     string
	Partition int32
	Offset    int64
	Reason    StuckReason
	// Attempts counts the tries so far: of the record while retrying, of
	// the dead-letter write while that fails.
	Attempts int
	// Since is when the partition got stuck on this record.
	Since time.Time
	// LastError is the last failure, truncated.
	LastError string `json:",omitempty"`
}

type stats struct {
	consumed, processed, dlqWriteErrors, floodTrips, parked, held atomic.Uint64

	mu       sync.Mutex
	outcomes map[OutcomeKey]uint64
}

func (s *stats) failure(stage deadletter.Stage, class failure.Class, outcome Outcome) {
	s.mu.Lock()
	if s.outcomes == nil {
		s.outcomes = make(map[OutcomeKey]uint64)
	}
	s.outcomes[OutcomeKey{stage, class, outcome}]++
	s.mu.Unlock()
}

func (s *stats) snapshot() Stats {
	out := Stats{
		Consumed:              s.consumed.Load(),
		Processed:             s.processed.Load(),
		DeadLetterWriteErrors: s.dlqWriteErrors.Load(),
		FloodTrips:            s.floodTrips.Load(),
		Parked:                s.parked.Load(),
		Held:                  s.held.Load(),
		Outcomes:              make(map[OutcomeKey]uint64),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.outcomes {
		out.Outcomes[k] = v
		switch k.Outcome {
		case OutcomeRetried:
			out.Retried += v
		case OutcomeDeadLettered:
			out.DeadLettered += v
		case OutcomeSkipped:
			out.Skipped += v
		case OutcomeHalted:
			out.Halted += v
		case OutcomeForwarded:
			out.Forwarded += v
		}
	}
	return out
}
