package consumer

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Flow control. A record is held from the moment it is fetched until it is
// settled: queued, being handled, or dead-lettered with its letter not yet
// acknowledged (the letter shares the record's key and value). In a retry
// tier's partition with per-key order, until its lanes take it (lanes.hold):
// a record held there behind its key must not stop the fetching of the one
// it waits for; Ahead and AheadBytes bound what the lanes hold. A record
// settled behind a letter in flight is released at once: the ledger keeps its
// offset for the commit, not the record, and bounds itself by the letters in
// flight (maxInflight). franz-go drops what it holds for a paused partition
// and fetches it again on resume, and it sends a broker's next fetch as soon
// as the one before is fully polled, naming every partition not paused at
// that moment. See [BufferLimits] and pollRound:
//
//   - Every poll takes all the client has fetched (one fetch per broker), so
//     that each partition gets its part of every fetch: none waits behind
//     another's records in the client.
//   - A flowing partition that holds its own bound keeps taking its part of
//     the fetches under way, and the poll goroutine pauses its fetching at
//     the first poll where that drops nothing (pollRound); the others keep
//     flowing. It is resumed once back under half of its bound. When its
//     record is the last the client holds (its records are the last of its
//     broker's fetch), the poll goroutine moves another partition of that
//     broker after it in the broker's fetch session (a rotation, pollRound),
//     and pauses it once its records are no longer last. When no rotation
//     can be made or it fails, or it was given two more fetches with no
//     such poll (several brokers), the poll loop waits (leaving that record
//     in the client) until it is back under half of its bound, or until the
//     member's other flowing partitions have no records left: then it tries
//     a rotation if none could start before, or else is paused, and what
//     the client holds of it (the one record) is dropped and fetched again
//     on resume. The records of a partition in a rotation count as held
//     back in that last test (the partition itself still counts as
//     flowing). A partition that no other flowing partition waits for (the
//     member's only one, or the others paused) never drops a record. A
//     partition paused while full, for any reason, stays paused until back
//     under half of its bound.
//   - When all flowing partitions together hold the total, the poll loop
//     waits until a quarter of it is free.
//   - A partition paused (stuck on a record: retrying it, waiting for its
//     dead letter; paused by an operator; full) holds what it has, and
//     counts toward neither. With Concurrency, a partition is paused as
//     stuck when a stuck record holds it at its Ahead bound; before that,
//     its other keys flow. The reasons are kept apart: the end of one never
//     resumes a partition another still pauses.

// size is what a record costs the buffer, in bytes.
func size(r *kgo.Record) int64 {
	n := int64(len(r.Key) + len(r.Value))
	for _, h := range r.Headers {
		n += int64(len(h.Key) + len(h.Value))
	}
	return n
}

// budget is the total held by the flowing (unpaused) partitions. The poll
// loop waits on it; partitions add to it and release from it.
type budget struct {
	maxRecords int
	maxBytes   int64

	mu       sync.Mutex
	records  int
	bytes    int64
	full     int           // flowing partitions that hold their own bound and hold back the poll loop
	blocked  int           // the records they hold, counted in records too
	assigned int           // the member's partitions (setAssigned)
	paused   int           // partitions whose fetching is paused for a reason (setPaused)
	freed    chan struct{} // closed when the budget drops under its bounds; nil when nobody waits
}

// overLocked reports whether the poll loop waits: the flowing partitions
// hold the total, or one holds its own bound and holds back the poll loop
// while the others still have records, or while no other flows (once the
// others have none left, the loop polls, and the round first moves the full
// partitions on or pauses them: pollRound).
func (b *budget) overLocked() bool {
	return b.full > 0 && !b.dryLocked() || b.records >= b.maxRecords || b.bytes >= b.maxBytes
}

// dryLocked reports whether the member has flowing partitions other than
// the full ones that hold back the poll loop, and none of them has records
// left. With none (the member's only partition, or the others paused), the
// full ones wait: a drop would help nobody.
func (b *budget) dryLocked() bool {
	return b.assigned-b.paused-b.full > 0 && b.records <= b.blocked
}

// roomLocked reports whether a waiting poll loop should wake: the bound is
// not just under its limit but a quarter of it is free, so that the loop
// polls a good batch rather than a few records at a time; and no full
// partition holds it back while the others have records.
func (b *budget) roomLocked() bool {
	return (b.full == 0 || b.dryLocked()) && b.records <= b.maxRecords-b.maxRecords/4 && b.bytes <= b.maxBytes-b.maxBytes/4
}

// dry reports whether full partitions hold back the poll loop and the
// member's other flowing partitions have no records left.
func (b *budget) dry() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.full > 0 && b.dryLocked()
}

// setAssigned notes the member's partitions: a partition that no other
// flowing partition waits for gains nothing by a pause that drops a record.
func (b *budget) setAssigned(n int) {
	b.mu.Lock()
	b.assigned = n
	b.wakeLocked()
	b.mu.Unlock()
}

// setPaused counts a partition whose fetching is paused for a reason (on),
// or no longer.
func (b *budget) setPaused(on bool) {
	b.mu.Lock()
	if on {
		b.paused++
	} else {
		b.paused--
	}
	b.wakeLocked()
	b.mu.Unlock()
}

// wakeLocked wakes a waiting poll loop when there is room.
func (b *budget) wakeLocked() {
	if b.freed != nil && b.roomLocked() {
		close(b.freed)
		b.freed = nil
	}
}

// add changes the total by n records and sz bytes (negative to release),
// of a partition that holds back the poll loop if blocking.
func (b *budget) add(n int, sz int64, blocking bool) {
	b.mu.Lock()
	b.records += n
	b.bytes += sz
	if blocking {
		b.blocked += n
	}
	b.wakeLocked()
	b.mu.Unlock()
}

// addBlocked counts n more records (negative: fewer) of the flowing
// partitions as blocked: those of a partition in a rotation.
func (b *budget) addBlocked(n int) {
	b.mu.Lock()
	b.blocked += n
	b.wakeLocked()
	b.mu.Unlock()
}

// setFull counts a flowing partition that holds its own bound and holds
// back the poll loop (on), with the n records it holds, or one that no
// longer does.
func (b *budget) setFull(on bool, n int) {
	b.mu.Lock()
	if on {
		b.full++
		b.blocked += n
	} else {
		b.full--
		b.blocked -= n
	}
	b.wakeLocked()
	b.mu.Unlock()
}

// room waits while the budget is spent, and reports whether the poll loop
// may poll: false when ctx ends first.
func (b *budget) room(ctx context.Context) bool {
	for {
		b.mu.Lock()
		if !b.overLocked() {
			b.mu.Unlock()
			return true
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		ch := b.freed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// flow is the flow control of one partition: what it holds and why its
// fetching is paused. Its methods are called with the partition's lock held.
type flow struct {
	topic string
	part  int32
	cl    *kgo.Client
	total *budget
	lim   BufferLimits

	records int
	bytes   int64

	stuck    bool                // stuck on a record: retrying it, or waiting for its letter
	held     bool                // with Concurrency: at its Ahead bound behind a stuck record
	full     bool                // over the partition's own bound (until back under half)
	fullAt   uint64              // the poll round in which it became full
	fedAt    uint64              // the last poll round that gave it records while full
	fed      int                 // poll rounds that gave it records while full
	last     bool                // full, and its record is the last the client holds (holdBack)
	fullStop bool                // paused because full, by the poll goroutine (pauseFull)
	blocking bool                // full, flowing, fed twice or last: counted in total.full, the poll loop waits
	operator bool                // paused by an operator (Consumer.Pause)
	waiting  map[PauseReason]int // records waiting for a retry tier, by reason (PauseDue, PauseParked)
	paused   PauseReason         // why fetching is paused by us; "" while it flows
	rotate   bool                // flowing, but its fetching is paused for one fetch: a rotation (pollRound)
	rotating bool                // full, and a rotation is under way for it: its fetches meanwhile do not hold back the poll loop
	off      bool                // its fetching is paused in the client: paused, or rotate
	stopped  bool                // the partition was revoked or the consumer stops
	hooks    Hooks
}

// hold adds records fetched, given to the partition in poll round round.
func (f *flow) hold(recs []*kgo.Record, round uint64) {
	if f.stopped {
		return
	}
	var sz int64
	for _, r := range recs {
		sz += size(r)
	}
	f.records += len(recs)
	f.bytes += sz
	if f.full && f.fullAt != round && f.fedAt != round && len(recs) > 0 {
		f.fedAt = round
		f.fed++
	}
	if f.paused == "" {
		f.total.add(len(recs), sz, f.blocking || f.rotating)
	}
	was := f.full
	f.update()
	if f.full && !was {
		f.fullAt = round
	}
}

// wantsStop reports whether the poll goroutine should pause the
// partition's fetching because it is full (it flows and holds its bound),
// and whether it holds back the poll loop meanwhile.
func (f *flow) wantsStop() (want, blocking bool) {
	want = !f.stopped && f.full && f.paused == ""
	return want, want && f.blocking
}

// holdBack notes that the partition's record is the last the client holds
// while it is full: no poll can pause it without dropping that record, so
// it holds back the poll loop, which leaves the record in the client
// (pollRound).
func (f *flow) holdBack() {
	if want, _ := f.wantsStop(); want {
		f.last = true
		f.update()
	}
}

// pauseFull pauses the partition's fetching because it is full. The poll
// goroutine calls it where that drops the least (pollRound).
func (f *flow) pauseFull() {
	if want, _ := f.wantsStop(); !want {
		return
	}
	f.fullStop = true
	f.update()
}

// rotatable reports whether the partition may be paused for one fetch so
// that its broker's fetch session lists it again, last: it flows, under
// its bound, and is not in a rotation already (pollRound).
func (f *flow) rotatable() bool {
	return !f.stopped && f.paused == "" && !f.full && !f.off
}

// setRotate pauses the partition's fetching for a rotation, or ends that
// pause: unlike the pauses for a reason, it is not shown, and what the
// partition holds still counts toward the total.
func (f *flow) setRotate(on bool) {
	f.rotate = on
	f.update()
}

// setRotating notes that a rotation is under way for the full partition
// (on), so that the fetches it is given meanwhile do not hold back the
// poll loop, or that it is over. Its records count as blocked meanwhile,
// as those of a full partition that holds back the poll loop: the others
// run dry without them (budget.dryLocked).
func (f *flow) setRotating(on bool) {
	if f.stopped || on == f.rotating {
		return
	}
	if f.paused == "" {
		// Count its records as blocked (or no longer) before update
		// moves them: it ends its blocking (on), or may begin it.
		if on {
			f.total.addBlocked(f.records)
		} else {
			f.total.addBlocked(-f.records)
		}
	}
	f.rotating = on
	f.update()
}

// release gives back n records of sz bytes that are no longer held.
func (f *flow) release(n int, sz int64) {
	if f.stopped {
		return
	}
	f.records -= n
	f.bytes -= sz
	if f.paused == "" {
		f.total.add(-n, -sz, f.blocking || f.rotating)
	}
	f.update()
}

// setStuck pauses or resumes the partition while it is stuck on a record.
func (f *flow) setStuck(on bool) {
	f.stuck = on
	f.update()
}

// setWaiting counts a record that waits for a retry tier (reason PauseDue
// or PauseParked; on), or no longer does: the partition's fetching is paused
// while any waits.
func (f *flow) setWaiting(reason PauseReason, on bool) {
	if f.waiting == nil {
		f.waiting = map[PauseReason]int{}
	}
	if on {
		f.waiting[reason]++
	} else if f.waiting[reason]--; f.waiting[reason] <= 0 {
		delete(f.waiting, reason)
	}
	f.update()
}

// setOperator pauses or resumes the partition for an operator.
func (f *flow) setOperator(on bool) {
	f.operator = on
	f.update()
}

// update pauses or resumes fetching (paused exactly while stuck, paused by
// an operator, waiting for a retry tier, or full and stopped by the poll
// goroutine), and holds back the poll loop while the partition flows, is
// over its own bound, and its record is the last the client holds or it
// was given two more fetches since it got there, until it is back under
// half of it or paused.
func (f *flow) update() {
	if f.stopped {
		return
	}
	if f.records >= f.lim.PartitionRecords || f.bytes >= f.lim.PartitionBytes {
		f.full = true
	} else if f.records <= f.lim.PartitionRecords/2 && f.bytes <= f.lim.PartitionBytes/2 {
		f.full, f.fed, f.fullStop, f.last = false, 0, false, false
	}
	var want PauseReason
	switch {
	case f.operator:
		want = PauseOperator
	case f.stuck || f.held:
		want = PauseStuck
	case f.waiting[PauseParked] > 0:
		want = PauseParked
	case f.waiting[PauseDue] > 0:
		want = PauseDue
	case f.fullStop:
		want = PauseFull
	}
	if want != "" && f.full {
		// Paused while full, for any reason: it stays paused until back
		// under half of its bound, which drops nothing more.
		f.fullStop = true
	}
	blocking := f.full && (f.fed >= 2 || f.last) && !f.rotating && want == ""
	if !blocking {
		f.setBlocking(false)
	}
	was := f.paused
	f.paused = want // the reason may change while paused
	if (want == "") != (was == "") {
		if want != "" {
			f.total.add(-f.records, -f.bytes, f.rotating)
		} else {
			f.total.add(f.records, f.bytes, f.rotating)
		}
		f.total.setPaused(want != "")
	}
	if off := want != "" || f.rotate; off != f.off {
		f.off = off
		m := map[string][]int32{f.topic: {f.part}}
		if off {
			f.cl.PauseFetchPartitions(m)
		} else {
			f.cl.ResumeFetchPartitions(m)
		}
	}
	if (want == "") != (was == "") && f.hooks != nil {
		ev := PauseEvent{PartitionEvent: PartitionEvent{f.topic, f.part}, Reason: want}
		if want != "" {
			f.hooks.PartitionPaused(ev)
		} else {
			ev.Reason = was
			f.hooks.PartitionResumed(ev)
		}
	}
	if blocking {
		f.setBlocking(true)
	}
}

// setBlocking makes the partition hold back the poll loop, or stop.
func (f *flow) setBlocking(on bool) {
	if on == f.blocking {
		return
	}
	f.blocking = on
	f.total.setFull(on, f.records)
	if f.hooks != nil {
		ev := PauseEvent{PartitionEvent: PartitionEvent{f.topic, f.part}, Reason: PauseFull}
		if on {
			f.hooks.PartitionPaused(ev)
		} else {
			f.hooks.PartitionResumed(ev)
		}
	}
}

// stop releases everything the partition holds from the total: its worker
// is gone, and what it held is dropped (unsettled records are fetched again
// by the next owner). Fetching is resumed by the consumer after a revoke.
func (f *flow) stop() {
	if f.stopped {
		return
	}
	f.setBlocking(false)
	if f.paused == "" {
		f.total.add(-f.records, -f.bytes, f.rotating)
	} else {
		f.total.setPaused(false)
	}
	f.stopped = true
	f.records, f.bytes = 0, 0
}
