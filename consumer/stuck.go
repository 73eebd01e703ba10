package consumer

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// stuck is a record a partition cannot move past right now: it is retrying
// it, or waiting for its dead letter to be acknowledged.
type stuck struct {
	offset   int64
	reason   StuckReason // StuckRetrying, StuckDeadLetter or StuckFlood
	attempts int
	since    time.Time
	lastErr  error
	// cancel ends the wait with errSkipped when an operator skips.
	cancel context.CancelCauseFunc
}

// stuckSet is what an operator sees and may skip: the records of a
// partition that cannot be moved past right now, by offset. Handling one
// record at a time, there is at most one, and the partition's fetching is
// paused while there is; with [Concurrency], there is at most one per key,
// and the other keys flow. It is guarded by the partition's mu.
type stuckSet map[int64]*stuck

// setStuck shows the partition as stuck on s. Handling one record at a
// time, it pauses its fetching: a stuck partition holds what it has and does
// not count toward the total buffer, so that it never holds the other
// partitions back.
func (p *partition[K, V]) setStuck(s stuck) {
	p.mu.Lock()
	old := p.stuck[s.offset]
	fresh := old == nil || old.reason != s.reason
	switch {
	case !fresh && !old.since.IsZero():
		s.since = old.since // the same wait goes on
	case s.since.IsZero():
		s.since = time.Now()
	}
	if p.stuck == nil {
		p.stuck = stuckSet{}
	}
	p.stuck[s.offset] = &s
	if !p.lanes.on() {
		p.flow.setStuck(true)
	}
	p.mu.Unlock()
	if h := p.c.hooks; h != nil && fresh {
		h.PartitionStuck(StuckEvent{PartitionEvent: PartitionEvent{p.topic, p.part}, Offset: s.offset, Reason: s.reason, Since: s.since})
	}
}

// clearStuck ends the stuck state of the record at offset: it is settled or
// being settled, and no longer skippable.
func (p *partition[K, V]) clearStuck(offset int64) {
	p.mu.Lock()
	_, was := p.stuck[offset]
	delete(p.stuck, offset)
	if p.flow.stuck && len(p.stuck) == 0 {
		p.flow.setStuck(false)
	}
	p.mu.Unlock()
	if h := p.c.hooks; h != nil && was {
		h.PartitionUnstuck(PartitionEvent{p.topic, p.part})
	}
}

// stuckOn returns the stuck records, in offset order.
func (p *partition[K, V]) stuckOn() []Stuck {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.stuck) == 0 {
		return nil
	}
	out := make([]Stuck, 0, len(p.stuck))
	for _, s := range p.stuck {
		st := Stuck{Topic: p.topic, Partition: p.part, Offset: s.offset, Reason: s.reason, Attempts: s.attempts, Since: s.since}
		if s.lastErr != nil {
			st.LastError = deadletter.Truncate(s.lastErr.Error(), deadletter.MaxMessageBytes)
		}
		out = append(out, st)
	}
	slices.SortFunc(out, func(a, b Stuck) int { return cmpInt(a.Offset, b.Offset) })
	return out
}

func (p *partition[K, V]) skipStuck(offset int64) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if s := p.stuck[offset]; s != nil && s.cancel != nil {
		s.cancel(errSkipped)
		return nil
	}
	return p.notStuckOn(offset)
}

// letterStuck ends the retries of the record at offset: it goes to the
// dead-letter topic, by who.
func (p *partition[K, V]) letterStuck(offset int64, who string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := p.stuck[offset]
	if s == nil || s.cancel == nil {
		return p.notStuckOn(offset)
	}
	if s.reason != StuckRetrying {
		return fmt.Errorf("%w: %s/%d offset %d is stuck on its %s, not retrying: skip it, or let the flood guard go on", ErrNotRetrying, p.topic, p.part, offset, s.reason)
	}
	s.cancel(&operatorLetter{who: who})
	return nil
}

// notStuckOn is the error of an operator action on offset, which the
// partition is not stuck on. p.mu is held.
func (p *partition[K, V]) notStuckOn(offset int64) error {
	var offs []int64
	for off, s := range p.stuck {
		if s.cancel != nil {
			offs = append(offs, off)
		}
	}
	slices.Sort(offs)
	on := make([]string, len(offs))
	for i, off := range offs {
		on[i] = strconv.FormatInt(off, 10)
	}
	switch len(on) {
	case 0:
		return fmt.Errorf("%w: %s/%d is not stuck", ErrNotStuck, p.topic, p.part)
	case 1:
		return fmt.Errorf("%w: %s/%d is stuck on offset %s, not %d", ErrNotStuck, p.topic, p.part, on[0], offset)
	}
	return fmt.Errorf("%w: %s/%d is stuck on offsets %s, not %d", ErrNotStuck, p.topic, p.part, strings.Join(on, ", "), offset)
}
