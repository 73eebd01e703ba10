package consumer

import (
	"github.com/twmb/franz-go/pkg/kgo"
)

// ledger tracks what one partition may commit. Records are settled in offset
// order; the commit must never pass a dead letter that is not yet
// acknowledged, so a record settled behind one is marked for commit only
// once every letter before it is acknowledged. Settled records are marked
// for commit (kgo.Client.MarkCommitRecords) in batches of markBatch, and
// always before the partition waits for anything: a wait never holds back
// the commit of records settled before it.
//
// Flow control (flow.go): a record settled without a letter is released at
// once, in batches of markBatch, even behind a letter in flight: marking it
// later needs only its offset and leader epoch, which pending keeps, not the
// record. A dead-lettered record stays held until its letter is
// acknowledged (the letter shares its key and value). So a partition whose
// letters take long to be acknowledged holds at most maxInflight letters
// and does not hold back the poll loop for the records behind them.
//
// It is owned by the partition's worker goroutine.
type ledger struct {
	mark    func(*kgo.Record)     // marks a record, and every one before it, for commit
	release func(n int, sz int64) // gives held records back to flow control

	// pending: the dead letters since the oldest one not yet acknowledged,
	// in offset order, each with the last record settled after it without
	// a letter. At most maxInflight entries.
	pending []held

	// unmarked is the last record settled but not yet marked; nil while
	// pending is not empty.
	unmarked *kgo.Record
	// freed: settled records not yet released to flow control.
	freedN  int
	freedSz int64
	// scratch is the record advance marks: the topic and partition of the
	// ledger's records with the offset and leader epoch of a held position.
	scratch kgo.Record
}

// markBatch bounds the settled records that wait to be marked for commit:
// marking takes the client's group lock, so it is done once per batch of
// records rather than per record. Releasing to flow control takes the
// partition's lock, and is batched the same way.
const markBatch = 64

// maxInflight bounds the dead letters in flight per partition. A partition
// that dead-letters 10,000 records a second (bench/ at 10% poison) while
// acknowledgements come tens of milliseconds late (the client's goroutines
// waiting for a core, bench/README.md) has hundreds in flight at the peaks:
// at 256 it waited for acknowledgements in most rounds (0.87× the bare
// client against 1.0× at 1024). The records of the letters count against
// BufferLimits, so memory stays bounded by it.
const maxInflight = 1024

// at is the position of a settled record: what marking it for commit needs.
type at struct {
	offset int64
	epoch  int32
}

// none is the position of no record.
var none = at{offset: -1}

func posOf(r *kgo.Record) at { return at{r.Offset, r.LeaderEpoch} }

// held is a dead-lettered record in pending: its letter, its position and
// size (it is held for flow control until the letter is acknowledged), and
// the last record settled after it without a letter (none if there is no
// such record yet).
type held struct {
	l    *letter
	pos  at
	size int64
	tail at
}

// done records that rec is settled without a dead letter. It reports
// whether records are piling up behind a letter: every markBatch of them,
// the partition reaps (see partition.reap), so that an acknowledged letter
// does not hold back the commit of a busy partition.
func (g *ledger) done(rec *kgo.Record) (reap bool) {
	g.freedN++
	g.freedSz += size(rec)
	if n := len(g.pending); n > 0 {
		g.pending[n-1].tail = posOf(rec)
		if g.freedN >= markBatch {
			g.flush() // releases only: nothing is unmarked
			return true
		}
		return false
	}
	g.unmarked = rec
	if g.freedN >= markBatch {
		g.flush()
	}
	return false
}

// letter records that rec is settled by its dead letter l, in flight.
func (g *ledger) letter(rec *kgo.Record, l *letter) {
	g.flush() // the records before it
	g.scratch.Topic, g.scratch.Partition = rec.Topic, rec.Partition
	g.pending = append(g.pending, held{l: l, pos: posOf(rec), size: size(rec), tail: none})
}

// full reports whether the partition must wait for its oldest letter before
// it writes another.
func (g *ledger) full() bool { return len(g.pending) >= maxInflight }

// flush marks the last settled record for commit and releases what was
// freed, if anything is waiting.
func (g *ledger) flush() {
	if g.unmarked != nil {
		g.mark(g.unmarked)
		g.unmarked = nil
	}
	if g.freedN > 0 {
		g.release(g.freedN, g.freedSz)
		g.freedN, g.freedSz = 0, 0
	}
}

// advance takes letters off the front of pending up to the first that is
// still in flight or whose write failed, marks the last record settled
// before that letter for commit at once, releases the letters taken, and
// returns that letter: nil when pending is empty. Each acknowledged or
// skipped letter taken is passed to settle.
func (g *ledger) advance(settle func(*letter)) *letter {
	last := none
	n := 0
	var sz int64
	var head *letter
	for i := range g.pending {
		e := &g.pending[i]
		if !e.l.final() {
			head = e.l
			break
		}
		settle(e.l)
		last = e.pos
		if e.tail != none {
			last = e.tail
		}
		sz += e.size
		n++
	}
	if n > 0 {
		clear(g.pending[:n])
		g.pending = g.pending[n:]
		if len(g.pending) == 0 {
			g.pending = nil
		}
		g.scratch.Offset, g.scratch.LeaderEpoch = last.offset, last.epoch
		g.mark(&g.scratch)
		g.release(n, sz)
	}
	return head
}

// empty reports whether no letter waits in pending.
func (g *ledger) empty() bool { return len(g.pending) == 0 }
