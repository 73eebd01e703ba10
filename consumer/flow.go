package consumer

import (
	"context"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Flow control. A record is held from the moment it is fetched until it is
// settled and no longer needed for the commit: queued, being handled, or
// settled behind a dead letter that is not yet acknowledged. Two bounds apply
// (see [BufferLimits]):
//
//   - Each partition holds at most its own share. A partition over it has
//     its fetching paused (as is a partition retrying a record), and is
//     resumed once it is back under half of it. Pausing makes franz-go drop
//     what it had already fetched for that partition; it is fetched again on
//     resume.
//   - All flowing partitions together hold at most the total. The poll loop
//     waits before it polls again, so nothing already fetched is thrown away:
//     this is the bound that applies when every partition is busy.

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
	freed   chan struct{} // closed when the budget drops under its bounds; nil when nobody waits
}

func (b *budget) overLocked() bool { return b.records >= b.maxRecords || b.bytes >= b.maxBytes }

// add changes the total by n records and sz bytes (negative to release).
func (b *budget) add(n int, sz int64) {
	b.mu.Lock()
	b.records += n
	b.bytes += sz
	if b.freed != nil && !b.overLocked() {
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

	retrying bool   // a record is being retried in place
	full     bool   // over the partition's own bound
	operator bool   // paused by an operator (Consumer.Pause)
	paused   string // why fetching is paused by us; "" while it flows
	stopped  bool   // the partition was revoked or the consumer stops
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

// setRetrying pauses or resumes the partition for a retry in place.
func (f *flow) setRetrying(on bool) {
	f.retrying = on
	f.update()
}

// setOperator pauses or resumes the partition for an operator.
func (f *flow) setOperator(on bool) {
	f.operator = on
	f.update()
}

// update pauses or resumes fetching: paused exactly while retrying, paused
// by an operator, or full. A full partition is resumed when it is back under
// half its bound.
func (f *flow) update() {
	if f.stopped {
		return
	}
	if f.records >= f.lim.PartitionRecords || f.bytes >= f.lim.PartitionBytes {
		f.full = true
	} else if f.records <= f.lim.PartitionRecords/2 && f.bytes <= f.lim.PartitionBytes/2 {
		f.full = false
	}
	want := ""
	switch {
	case f.operator:
		want = PauseOperator
	case f.retrying:
		want = PauseRetrying
	case f.full:
		want = PauseFull
	}
	if (want == "") == (f.paused == "") {
		f.paused = want // the reason may change while paused
		return
	}
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
}

// stop releases everything the partition holds from the total: its worker
// is gone, and what it held is dropped (unsettled records are fetched again
// by the next owner). Fetching is resumed by the consumer after a revoke.
func (f *flow) stop() {
	if f.paused == "" {
		f.total.add(-f.records, -f.bytes)
	}
	f.stopped = true
	f.records, f.bytes = 0, 0
}
