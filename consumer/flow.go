package consumer

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Flow control. A record is held from the moment it is fetched until it is
// settled: queued, being handled, or dead-lettered with its letter not yet
// acknowledged (the letter shares the record's key and value). A record
// settled behind a letter in flight is released at once: the ledger keeps its
// offset for the commit, not the record, and bounds itself by the letters in
// flight (maxInflight). Backpressure is
// applied by not polling, never by pausing a partition: franz-go drops what it
// has already fetched for a paused partition and fetches it again on resume,
// so pausing to make room would throw fetched data away. See [BufferLimits]:
//
//   - When a flowing partition holds its own bound, the poll loop waits until
//     it is back under half of it. Its records keep being handled, and so do
//     those the other partitions hold.
//   - When all flowing partitions together hold the total, the poll loop
//     waits until they are under it.
//   - A partition stuck on a record (retrying it, waiting for its dead
//     letter), or paused by an operator, has its fetching paused: it holds what it has, and counts toward neither.
//     With Concurrency, a partition is paused so when a stuck record holds
//     it at its Ahead bound; before that, its other keys flow.

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

	mu      sync.Mutex
	records int
	bytes   int64
	full    int           // flowing partitions that hold their own bound
	freed   chan struct{} // closed when the budget drops under its bounds; nil when nobody waits
}

func (b *budget) overLocked() bool {
	return b.full > 0 || b.records >= b.maxRecords || b.bytes >= b.maxBytes
}

// roomLocked reports whether a waiting poll loop should wake: the bound is
// not just under its limit but a quarter of it is free, so that the loop
// polls a good batch rather than a few records at a time.
func (b *budget) roomLocked() bool {
	return b.full == 0 && b.records <= b.maxRecords-b.maxRecords/4 && b.bytes <= b.maxBytes-b.maxBytes/4
}

// add changes the total by n records and sz bytes (negative to release).
func (b *budget) add(n int, sz int64) {
	b.mu.Lock()
	b.records += n
	b.bytes += sz
	if b.freed != nil && b.roomLocked() {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// setFull counts a flowing partition that holds its own bound (on) or no
// longer does.
func (b *budget) setFull(on bool) {
	b.mu.Lock()
	if on {
		b.full++
	} else {
		b.full--
	}
	if b.freed != nil && b.roomLocked() {
		close(b.freed)
		b.freed = nil
	}
	b.mu.Unlock()
}

// room returns how many records may be polled now: at least 1 and at most
// the records left under the bound. It waits while the budget is spent, and
// returns 0 when ctx ends.
func (b *budget) room(ctx context.Context) int {
	for {
		b.mu.Lock()
		if !b.overLocked() {
			n := b.maxRecords - b.records
			b.mu.Unlock()
			return n
		}
		if b.freed == nil {
			b.freed = make(chan struct{})
		}
		ch := b.freed
		b.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return 0
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
	blocking bool                // full and flowing: counted in total.full, the poll loop waits
	operator bool                // paused by an operator (Consumer.Pause)
	waiting  map[PauseReason]int // records waiting for a retry tier, by reason (PauseDue, PauseParked)
	paused   PauseReason         // why fetching is paused by us; "" while it flows
	stopped  bool                // the partition was revoked or the consumer stops
	hooks    Hooks
}

// hold adds fetched records.
func (f *flow) hold(recs []*kgo.Record) {
	if f.stopped {
		return
	}
	var sz int64
	for _, r := range recs {
		sz += size(r)
	}
	f.records += len(recs)
	f.bytes += sz
	if f.paused == "" {
		f.total.add(len(recs), sz)
	}
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
		f.total.add(-n, -sz)
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

// update pauses or resumes fetching (paused exactly while stuck or paused
// by an operator), and holds back the poll loop while the partition
// flows and is over its own bound, until it is back under half of it.
func (f *flow) update() {
	if f.stopped {
		return
	}
	if f.records >= f.lim.PartitionRecords || f.bytes >= f.lim.PartitionBytes {
		f.full = true
	} else if f.records <= f.lim.PartitionRecords/2 && f.bytes <= f.lim.PartitionBytes/2 {
		f.full = false
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
	}
	if (want == "") != (f.paused == "") {
		was := f.paused
		f.paused = want
		m := map[string][]int32{f.topic: {f.part}}
		ev := PauseEvent{PartitionEvent: PartitionEvent{f.topic, f.part}, Reason: want}
		if want != "" {
			f.total.add(-f.records, -f.bytes)
			f.cl.PauseFetchPartitions(m)
			if f.hooks != nil {
				f.hooks.PartitionPaused(ev)
			}
		} else {
			f.total.add(f.records, f.bytes)
			f.cl.ResumeFetchPartitions(m)
			if f.hooks != nil {
				ev.Reason = was
				f.hooks.PartitionResumed(ev)
			}
		}
	} else {
		f.paused = want // the reason may change while paused
	}
	f.setBlocking(f.full && f.paused == "")
}

// setBlocking makes the partition hold back the poll loop, or stop.
func (f *flow) setBlocking(on bool) {
	if on == f.blocking {
		return
	}
	f.blocking = on
	f.total.setFull(on)
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
	if f.paused == "" {
		f.total.add(-f.records, -f.bytes)
	}
	f.setBlocking(false)
	f.stopped = true
	f.records, f.bytes = 0, 0
}
