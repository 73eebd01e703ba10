package consumer

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// ledger tracks what one partition may commit. Records are settled in offset
// order; a record settled behind a dead letter that is not yet acknowledged
// waits in pending, because the commit must never pass that letter. Settled
// records are marked for commit (kgo.Client.MarkCommitRecords) in batches of
// markBatch, and always before the partition waits for anything: a wait never
// holds back the commit of records settled before it.
//
// It is owned by the partition's worker goroutine.
type ledger struct {
	mark    func(*kgo.Record)     // marks a record, and every one before it, for commit
	release func(n int, sz int64) // gives held records back to flow control

	// pending: records settled since the oldest dead letter not yet
	// acknowledged, in offset order.
	pending  []settled
	inflight int // letters in pending

	// unmarked is the last record settled but not yet marked, standing for
	// unmarkedN records; nil while pending is not empty.
	unmarked  *kgo.Record
	unmarkedN int
	// freed: settled records not yet released to flow control.
	freedN  int
	freedSz int64
}

// markBatch bounds the settled records that wait to be marked for commit:
// marking takes the client's group lock, so it is done once per batch of
// records rather than per record.
const markBatch = 64

// maxInflight bounds the dead letters in flight per partition.
const maxInflight = 256

// settled is a settled record; l is its dead letter, nil if it was
// processed or skipped.
type settled struct {
	rec *kgo.Record
	l   *letter
}

// done records that rec is settled without a dead letter. It reports
// whether records are piling up behind a letter: every markBatch of them,
// the partition reaps (see partition.reap), so that an acknowledged letter
// does not hold back the commit of a busy partition.
func (g *ledger) done(rec *kgo.Record) (reap bool) {
	if len(g.pending) > 0 {
		g.pending = append(g.pending, settled{rec: rec})
		return len(g.pending)%markBatch == 0
	}
	g.unmarked = rec
	g.freedN++
	g.freedSz += size(rec)
	if g.unmarkedN++; g.unmarkedN >= markBatch {
		g.flush()
	}
	return false
}

// letter records that rec is settled by its dead letter l, in flight.
func (g *ledger) letter(rec *kgo.Record, l *letter) {
	g.flush() // the records before the first letter in flight
	g.pending = append(g.pending, settled{rec: rec, l: l})
	g.inflight++
}

// full reports whether the partition must wait for its oldest letter before
// it writes another.
func (g *ledger) full() bool { return g.inflight >= maxInflight }

// flush marks the last settled record for commit and releases what was
// freed, if anything is waiting.
func (g *ledger) flush() {
	if g.unmarked != nil {
		g.mark(g.unmarked)
		g.unmarked, g.unmarkedN = nil, 0
	}
	if g.freedN > 0 {
		g.release(g.freedN, g.freedSz)
		g.freedN, g.freedSz = 0, 0
	}
}

// advance takes settled entries off the front of pending up to the first
// letter that is still in flight or whose write failed, marks the last one
// taken for commit at once, and returns that letter: nil when pending is
// empty. Each acknowledged or skipped letter taken is passed to settle.
func (g *ledger) advance(settle func(*letter)) *letter {
	var last *kgo.Record
	n := 0
	var sz int64
	var head *letter
	for _, e := range g.pending {
		if e.l != nil && !e.l.final() {
			head = e.l
			break
		}
		if e.l != nil {
			settle(e.l)
			g.inflight--
		}
		last = e.rec
		sz += size(e.rec)
		n++
	}
	if n > 0 {
		clear(g.pending[:n])
		g.pending = g.pending[n:]
		if len(g.pending) == 0 {
			g.pending = nil
		}
		g.mark(last)
		g.release(n, sz)
	}
	return head
}

// empty reports whether nothing waits in pending.
func (g *ledger) empty() bool { return len(g.pending) == 0 }
