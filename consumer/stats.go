package consumer

import (
	"sync"
	"sync/atomic"

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
	// DeadLetterWriteErrors counts failed dead-letter write attempts.
	DeadLetterWriteErrors uint64
	// Outcomes breaks the failure counters down by stage and class.
	Outcomes map[OutcomeKey]uint64
	// RetryEnabled is the kill switch.
	RetryEnabled bool
	// Stuck lists the partitions retrying a record right now.
	Stuck []Stuck
	// Dependencies is the state of each of [Config.Dependencies].
	Dependencies map[string]string
}

// OutcomeKey indexes [Stats.Outcomes].
type OutcomeKey struct {
	Stage   deadletter.Stage
	Class   failure.Class
	Outcome string // retried | dead-lettered | skipped | halted
}

// Stuck is a partition retrying a record.
type Stuck struct {
	Topic     string
	Partition int32
	Offset    int64
	Attempts  int
}

type stats struct {
	consumed, processed, dlqWriteErrors atomic.Uint64

	mu       sync.Mutex
	outcomes map[OutcomeKey]uint64
}

func (s *stats) failure(stage deadletter.Stage, class failure.Class, outcome string) {
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
		Outcomes:              make(map[OutcomeKey]uint64),
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for k, v := range s.outcomes {
		out.Outcomes[k] = v
		switch k.Outcome {
		case "retried":
			out.Retried += v
		case "dead-lettered":
			out.DeadLettered += v
		case "skipped":
			out.Skipped += v
		case "halted":
			out.Halted += v
		}
	}
	return out
}
