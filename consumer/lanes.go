package consumer

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Concurrency lets a partition handle several records at once: a handler
// that waits on I/O (a database, an HTTP service) then scales with Max, not
// with the partition count. Records of one key are handled one at a time, in
// offset order; records of different keys run in parallel. Records without a
// key (a nil key) count as one key: they keep their order among themselves.
//
// What may be committed does not change: offsets are committed only below the
// lowest record of the partition that is not settled, so a crash redelivers
// what was not settled, and possibly records of other keys settled after it.
// A record retried in place holds back only its own key: the other keys flow
// (it shows in Stats.Stuck, one entry per waiting record, and can be
// skipped). Ahead and AheadBytes bound how far a partition runs ahead of its
// lowest unsettled record; at the bound it stops taking records. When a stuck
// record (retrying, or waiting for its dead letter) holds it there, its
// fetching pauses, so that it never holds back the other partitions;
// otherwise what it holds counts toward [BufferLimits]. In a retry tier's
// partition with per-key order, a key's records are ordered by their source
// offsets instead, and what the lanes took leaves the buffer (see
// [RetryTopics]).
//
// Everything else works as with one record at a time: the policies, the
// dead-letter path, skip, the kill switch, the flood guard, stats, hooks and
// revokes, [RetryTopics] (a source partition's lanes park a key's records in
// order), [ExactlyOnce] (records settled out of order are written into the
// transaction in offset order) and [DurableAttempts] (one entry per record
// retrying in place).
//
// With a [BatchHandler], a partition's records are split by key into Max
// shards, each handling batches of its own: up to Max batches of a partition
// run at once, and a key's records, all in one shard, are never handled at
// once and reach the handler in offset order. Ahead then defaults to
// 2 × Max × Batching.Size, room for a full batch in each shard and the next.
type Concurrency struct {
	// Max is how many records of one partition are handled at once.
	// Optional: 0 or 1, one at a time in offset order.
	Max int
	// Unordered lets records of the same key run at once too. Off: one
	// key's records are handled in offset order.
	Unordered bool
	// Ahead bounds the records a partition has taken past its lowest
	// unsettled one: being handled, waiting for their key, or settled
	// behind it. Optional: 16 × Max (with a BatchHandler,
	// 2 × Max × Batching.Size); in a retry tier's partition with per-key
	// order, at least 10,000, with or without Max, and not with
	// ExactlyOnce (see [RetryTopics]).
	Ahead int
	// AheadBytes bounds the same in bytes (keys, values, headers).
	// Optional: 16 MiB.
	AheadBytes int64
}

func (c Concurrency) withDefaults() Concurrency {
	if c.Max <= 1 {
		return Concurrency{}
	}
	if c.Ahead == 0 {
		c.Ahead = 16 * c.Max
	}
	if c.AheadBytes == 0 {
		c.AheadBytes = 16 << 20
	}
	return c
}

func (c Concurrency) validate() error {
	switch {
	case c.Max < 0:
		return configErr("Concurrency.Max", "negative")
	case c.Ahead < 0:
		return configErr("Concurrency.Ahead", "negative")
	case c.AheadBytes < 0:
		return configErr("Concurrency.AheadBytes", "negative")
	case c.Max > 1 && c.Ahead > 0 && c.Ahead < c.Max:
		return configErr("Concurrency.Ahead", fmt.Sprintf("%d: less than Max (%d), so Max is never reached", c.Ahead, c.Max))
	}
	return nil
}

// lanes runs the records of one partition concurrently: a lane per key
// handles that key's records in order, at most max lanes at once. Records
// settle out of order; the lanes keep what they settle in slots, and the
// partition's worker takes the slots settled from the lowest one on, in
// offset order, and gives them to its settler (takeSettled): what may be
// committed is the same as with one record at a time, and only the worker
// touches the ledger, the letters and the transaction. Its zero value is
// off.
type lanes struct {
	cfg Concurrency

	// mu guards what follows, and the partition's flood window (which one
	// goroutine uses when lanes are off).
	mu      sync.Mutex
	busy    map[string][]*kgo.Record // key -> records waiting behind the one being handled
	nilBusy bool                     // the lane of records without a key is busy
	nilWait []*kgo.Record
	running int    // lanes handling a record
	slots   []slot // records taken, from the lowest not given to the settler, in offset order
	bytes   int64
	settled []slot        // the worker's: slots taken off by takeSettled, reused
	changed chan struct{} // closed and replaced when a record settles or a lane ends
	wg      sync.WaitGroup

	// hold: the lanes of a retry tier's partition with per-key order. A
	// record whose key has an earlier record in the tiers waits on its
	// lane, held (partition.hold), instead of being written to a tier
	// again, and does not count as running. holds are the held records'
	// give-up channels, by offset: at the Ahead bound, the worker closes
	// the lowest slot's, and that record is parked as before. A record
	// leaves the partition's buffer (BufferLimits) once a lane takes it:
	// Ahead and AheadBytes bound what the lanes hold, and a held record
	// (or the records settled behind it) must not stop the fetching of
	// the record it waits for, which may be in this partition or
	// another.
	hold  bool
	holds map[int64]chan struct{}
	// resuming counts the held records whose key is free, waiting to
	// run: they go before new records (room), within Max.
	resuming int
}

// holdAhead is the least Ahead of a retry tier's partition whose lanes
// hold records (lanes.hold): how far it goes on past its oldest held record
// before that one is parked again. A held record waits for its blocker's
// remaining tiers, while its partition takes what its tier receives
// meanwhile: the parks and forwards of every failing key of its source
// partition.
const holdAhead = 10000

// holding turns on the lanes of a retry tier's partition with per-key
// order (see hold), with at least holdAhead of Ahead. Without Concurrency,
// one record is handled at a time, as before (Max 1): a held record waits
// without counting, and once its key is free it runs before the records
// not taken yet.
func (ln *lanes) holding() {
	ln.hold = true
	ln.cfg.Max = max(ln.cfg.Max, 1)
	ln.cfg.Ahead = max(ln.cfg.Ahead, holdAhead)
	if ln.cfg.AheadBytes == 0 {
		ln.cfg.AheadBytes = 16 << 20
	}
}

// held makes the lane of the record at offset wait for its key: it no
// longer counts as running, so the worker may start another. It returns
// the channel the worker closes to make it give up (room).
func (ln *lanes) held(offset int64) <-chan struct{} {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	ch := make(chan struct{})
	if ln.holds == nil {
		ln.holds = map[int64]chan struct{}{}
	}
	ln.holds[offset] = ch
	ln.running--
	ln.signalLocked()
	return ch
}

// unheld ends the wait of the record at offset: its lane runs again once
// fewer than Max records are being handled (before new ones: room), or at
// once when the worker stops (done).
func (ln *lanes) unheld(offset int64, done <-chan struct{}) {
	ln.mu.Lock()
	delete(ln.holds, offset)
	ln.resuming++
	for ln.running >= ln.cfg.Max && !closed(done) {
		if ln.changed == nil {
			ln.changed = make(chan struct{})
		}
		ch := ln.changed
		ln.mu.Unlock()
		select {
		case <-ch:
		case <-done:
		}
		ln.mu.Lock()
	}
	ln.resuming--
	ln.running++ // lane takes it off when it ends
	ln.mu.Unlock()
}

// giveUpBeforeFailed makes the held records in front of the first letter
// whose write failed give up (room): a letter's write is retried only
// once every record before it is settled (reap), and that letter may be
// the forward of the very record they wait for. It runs on the worker.
func (ln *lanes) giveUpBeforeFailed() {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if len(ln.holds) == 0 {
		return
	}
	for i, sl := range ln.slots {
		if !sl.done || sl.l == nil || !sl.l.failed() {
			continue
		}
		for _, before := range ln.slots[:i] {
			if ch, held := ln.holds[before.rec.Offset]; held {
				close(ch)
				delete(ln.holds, before.rec.Offset)
			}
		}
		return
	}
}

// holdingAny reports whether a record waits behind its key (hold).
func (ln *lanes) holdingAny() bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	return len(ln.holds) > 0
}

// slot is a record taken by the lanes; once it is settled, l is its letter
// (if settled by one) and out its handler's outputs (exactly-once mode).
type slot struct {
	rec  *kgo.Record
	done bool
	l    *letter
	out  []*kgo.Record
}

func (ln *lanes) on() bool { return ln.cfg.Max > 1 || ln.hold }

// lock and unlock guard the flood window when lanes are on.
func (ln *lanes) lock() {
	if ln.on() {
		ln.mu.Lock()
	}
}

func (ln *lanes) unlock() {
	if ln.on() {
		ln.mu.Unlock()
	}
}

func (ln *lanes) signalLocked() {
	if ln.changed != nil {
		close(ln.changed)
	}
	ln.changed = make(chan struct{})
}

// changedCh returns the channel closed at the next change: a record settled
// at the lowest slot, or a lane free.
func (ln *lanes) changedCh() <-chan struct{} {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.changed == nil {
		ln.changed = make(chan struct{})
	}
	return ln.changed
}

// room reports whether another record may be taken, and returns the channel
// closed at the next change.
func (ln *lanes) room(ledgerFull bool) (bool, <-chan struct{}) {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	if ln.changed == nil {
		ln.changed = make(chan struct{})
	}
	ahead := len(ln.slots) < ln.cfg.Ahead && ln.bytes < ln.cfg.AheadBytes
	if !ahead && len(ln.slots) > 0 {
		// At the bound behind a held record: it gives up and is parked.
		if ch, held := ln.holds[ln.slots[0].rec.Offset]; held {
			close(ch)
			delete(ln.holds, ln.slots[0].rec.Offset)
		}
	}
	ok := !ledgerFull && ln.running+ln.resuming < ln.cfg.Max && ahead
	return ok, ln.changed
}

// runLanes is the worker loop with lanes on: it takes records in offset order
// and hands each to the lane of its key.
func (p *partition[K, V]) runLanes() {
	defer close(p.done)
	defer p.drain()
	defer func() {
		// Before drain: no lane settles anything after this, and what
		// they settled goes to the settler.
		p.lanes.wg.Wait()
		p.takeSettled()
	}()
	for {
		batch := p.take()
		if len(batch) == 0 {
			if !p.idleLanes() {
				return
			}
			continue
		}
		for _, rec := range batch {
			if p.ctx.Err() != nil || !p.waitResumed() || !p.dispatch(rec) {
				return
			}
		}
		p.flush()
	}
}

// lanesTick is how often a partition waiting for its lanes reaps the dead
// letters acknowledged meanwhile and marks what it may commit.
const lanesTick = 100 * time.Millisecond

// dispatch waits for room, then hands rec to its lane. It returns false
// when the worker must stop.
func (p *partition[K, V]) dispatch(rec *kgo.Record) bool {
	if !p.awaitLaneRoom() {
		return false
	}
	ln := &p.lanes
	if ln.hold {
		p.mu.Lock()
		p.flow.release(1, size(rec))
		p.mu.Unlock()
	}
	ln.mu.Lock()
	ln.slots = append(ln.slots, slot{rec: rec})
	ln.bytes += size(rec)
	key, keyed := string(rec.Key), rec.Key != nil && !ln.cfg.Unordered && !ln.hold
	switch {
	case ln.cfg.Unordered:
	case ln.hold && rec.Key != nil:
		// A lane of its own: the family orders a key's records (a record
		// held behind its key waits for the earlier ones to be settled),
		// and an earlier record may come after it in the partition.
	case rec.Key == nil && ln.nilBusy:
		ln.nilWait = append(ln.nilWait, rec)
		ln.mu.Unlock()
		return true
	case rec.Key == nil:
		ln.nilBusy = true
	default:
		if q, busy := ln.busy[key]; busy {
			ln.busy[key] = append(q, rec)
			ln.mu.Unlock()
			return true
		}
		if ln.busy == nil {
			ln.busy = map[string][]*kgo.Record{}
		}
		ln.busy[key] = nil
	}
	ln.running++
	ln.mu.Unlock()
	ln.wg.Add(1)
	go p.lane(key, keyed, rec.Key == nil && !ln.cfg.Unordered, rec)
	return true
}

// awaitLaneRoom waits until the partition may take another record: a lane is
// free, the records taken are under Ahead and AheadBytes, and the ledger has
// room for a letter. Meanwhile it gives what the lanes settle to the
// settler and marks it for commit. It returns false when the worker must
// stop.
func (p *partition[K, V]) awaitLaneRoom() bool {
	ln := &p.lanes
	defer p.setHeld(false)
	for {
		// Taken first: a record settled after takeSettled closes it.
		changed := ln.changedCh()
		if !p.takeSettled() {
			return false
		}
		if ln.hold {
			ln.giveUpBeforeFailed()
		}
		full := p.ledger.full()
		if ok, _ := ln.room(full); ok {
			break
		}
		// At its Ahead bound behind a stuck record, the partition holds
		// what it has, and its fetching pauses: it must not fill its
		// buffer and hold back the poll loop of every partition.
		p.setHeld(p.isStuck())
		head, alive := p.reap()
		if !alive {
			return false
		}
		if full && head != nil {
			if !p.awaitLetter(head, nil) {
				return false
			}
			continue
		}
		p.flush()
		t := time.NewTimer(lanesTick)
		select {
		case <-changed:
		case <-t.C:
		case <-p.ctx.Done():
			t.Stop()
			return false
		}
		t.Stop()
	}
	return true
}

// lane handles rec, then the records of its key that wait behind it: those
// of key when keyed, those without a key when unkeyed, none otherwise.
func (p *partition[K, V]) lane(key string, keyed, unkeyed bool, rec *kgo.Record) {
	ln := &p.lanes
	defer ln.wg.Done()
	for rec != nil {
		ok := p.handle(rec)
		ln.mu.Lock()
		var next *kgo.Record
		switch {
		case !ok: // stopping: rec and the records behind it stay unsettled
		case unkeyed && len(ln.nilWait) > 0:
			next, ln.nilWait = ln.nilWait[0], ln.nilWait[1:]
		case keyed && len(ln.busy[key]) > 0:
			q := ln.busy[key]
			next, ln.busy[key] = q[0], q[1:]
		}
		if next == nil {
			ln.running--
			switch {
			case keyed:
				delete(ln.busy, key)
			case unkeyed:
				ln.nilBusy, ln.nilWait = false, nil
			}
		}
		ln.signalLocked()
		ln.mu.Unlock()
		rec = next
	}
}

// complete is the handoff of a lane: it records that rec is settled, by its
// letter l if not nil, with its handler's outputs out, and wakes the worker
// when rec is the lowest record not yet given to the settler.
func (ln *lanes) complete(rec *kgo.Record, out []*kgo.Record, l *letter) bool {
	ln.mu.Lock()
	defer ln.mu.Unlock()
	i, found := slices.BinarySearchFunc(ln.slots, rec.Offset, func(s slot, off int64) int { return cmpInt(s.rec.Offset, off) })
	if !found {
		return true
	}
	ln.slots[i].done, ln.slots[i].l, ln.slots[i].out = true, l, out
	if i == 0 {
		ln.signalLocked()
	}
	return true
}

// takeSettled gives the records the lanes settled, from the lowest one on,
// to the settler, in offset order. It runs on the worker. It returns false
// when the worker must stop.
func (p *partition[K, V]) takeSettled() bool {
	ln := &p.lanes
	ln.mu.Lock()
	n := 0
	for n < len(ln.slots) && ln.slots[n].done {
		ln.bytes -= size(ln.slots[n].rec)
		n++
	}
	ln.settled = append(ln.settled[:0], ln.slots[:n]...)
	if n > 0 {
		clear(ln.slots[:n])
		ln.slots = ln.slots[n:]
		ln.signalLocked()
	}
	ln.mu.Unlock()
	for i, s := range ln.settled {
		if !p.settleNow(s.rec, s.out, s.l) {
			clear(ln.settled)
			return false
		}
		ln.settled[i] = slot{}
	}
	return true
}

// idleLanes is idle with lanes on: it also wakes when a lane settles a
// record, to mark it for commit.
func (p *partition[K, V]) idleLanes() bool {
	// Taken first: a record settled after takeSettled closes it.
	changed := p.lanes.changedCh()
	if !p.takeSettled() {
		return false
	}
	var tick <-chan time.Time
	if p.lanes.hold && p.lanes.holdingAny() {
		// A letter behind a held record may fail, and nothing else
		// wakes the worker then (giveUpBeforeFailed).
		p.lanes.giveUpBeforeFailed()
		t := time.NewTimer(lanesTick)
		defer t.Stop()
		tick = t.C
	}
	p.flush()
	p.log.idle()
	head, ok := p.reap()
	if !ok {
		return false
	}
	if head == nil {
		select {
		case <-p.ctx.Done():
			return false
		case <-p.wake:
			return true
		case <-changed:
			return true
		case <-tick:
			return true
		}
	}
	return p.awaitLetter(head, p.wake)
}

// setHeld pauses the partition's fetching while it cannot take more records
// because a stuck record holds it at its Ahead bound (on), or resumes it.
func (p *partition[K, V]) setHeld(on bool) {
	p.mu.Lock()
	if p.flow.held != on {
		p.flow.held = on
		p.flow.update()
	}
	p.mu.Unlock()
}

// isStuck reports whether a record of the partition is stuck.
func (p *partition[K, V]) isStuck() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stuck) > 0
}

// flush marks what is settled for commit. It runs on the worker.
func (p *partition[K, V]) flush() { p.ledger.flush() }
