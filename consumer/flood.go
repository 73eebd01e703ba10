package consumer

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// FloodGuard stops a consumer from emptying its topics into the dead-letter
// topic. A bad deploy or a wrong schema makes every record fail permanently;
// without a guard the consumer dead-letters the whole topic at full speed,
// and undoing that takes a redrive of everything. When more than Share of a
// partition's last Window settled records would be dead-lettered (and at
// least Min of them), the guard trips: the record that would cross the line
// is not dead-lettered, every partition stops fetching, each waits before its
// next dead letter, the consumer logs why, shows it in [Stats.Flood] and tells
// [Hooks]. An operator resumes with [Consumer.ResumeFlood] once the cause is
// fixed; the records then go on as the policy says, and the partition that
// tripped the guard can trip it again only once a full window of records has
// been settled after the resume.
//
// The guard is on by default: a paused consumer loses nothing and says why,
// while an emptied topic is hard to undo. The defaults (more than half of
// the last 1000 records of a partition, and at least 100 of them) leave a
// steady trickle of poison pills alone, even a heavy one.
type FloodGuard struct {
	// Disable turns the guard off.
	Disable bool
	// Window is how many of a partition's most recent settled records the
	// guard counts. Optional: 1000.
	Window int
	// Share is the share of the window that may be dead-lettered; more
	// trips the guard. Optional: 0.5.
	Share float64
	// Min is how many dead letters the window must hold before the guard
	// can trip. Optional: 100.
	Min int
	// Halt stops the consumer instead of pausing it: Run returns a
	// *HaltError wrapping [ErrFlood], naming the record that tripped it.
	Halt bool
}

// ErrFlood is wrapped by the *HaltError of a consumer halted by its flood
// guard ([FloodGuard.Halt]).
var ErrFlood = errors.New("consumer: flood guard tripped: too many records dead-lettered")

func (g FloodGuard) withDefaults() FloodGuard {
	if g.Window == 0 {
		g.Window = 1000
	}
	if g.Share == 0 {
		g.Share = 0.5
	}
	if g.Min == 0 {
		g.Min = 100
	}
	return g
}

func (g FloodGuard) validate() error {
	switch {
	case g.Window < 0:
		return configErr("FloodGuard.Window", "negative")
	case g.Share < 0 || g.Share >= 1:
		return configErr("FloodGuard.Share", fmt.Sprintf("%v: must be in [0, 1)", g.Share))
	case g.Min < 0:
		return configErr("FloodGuard.Min", "negative")
	case g.Window > 0 && g.Min > g.Window:
		return configErr("FloodGuard.Min", fmt.Sprintf("%d is more than the window of %d records", g.Min, g.Window))
	}
	return nil
}

// Flood is a tripped flood guard: in [Stats.Flood], and given to
// [Hooks.FloodGuardTripped] and [Hooks.FloodGuardResumed].
type Flood struct {
	// The record that tripped it.
	Topic     string
	Partition int32
	Offset    int64
	// DeadLetters of the last Records settled records of that partition,
	// counting the one that tripped it: more than Share of them, and at
	// least Min. Window is the most records the guard looks at
	// (FloodGuard.Window); Records is fewer until the partition has
	// settled that many.
	DeadLetters int
	Records     int
	Window      int
	Share       float64
	Min         int
	Since       time.Time
}

// Percent is DeadLetters as a percentage of Records.
func (f Flood) Percent() float64 {
	if f.Records == 0 {
		return 0
	}
	return 100 * float64(f.DeadLetters) / float64(f.Records)
}

// window counts one partition's most recent settled records and which of
// them were dead-lettered. It is owned by the partition's worker.
type window struct {
	dead   []bool
	next   int
	filled int
	count  int  // dead letters in the window
	grace  bool // after a resume: the guard trips again only on a full window
}

func (w *window) add(dead bool) {
	if len(w.dead) == 0 {
		return
	}
	if w.filled == len(w.dead) {
		if w.dead[w.next] {
			w.count--
		}
	} else {
		w.filled++
	}
	w.dead[w.next] = dead
	if dead {
		w.count++
	}
	w.next = (w.next + 1) % len(w.dead)
}

// wouldTrip reports whether one more dead letter crosses the guard's line.
func (w *window) wouldTrip(g *FloodGuard) bool {
	if len(w.dead) == 0 || (w.grace && w.filled < len(w.dead)) {
		return false
	}
	dead, n := w.next1()
	return dead >= g.Min && float64(dead) > g.Share*float64(n)
}

// next1 returns the dead letters and the records the window would hold with
// one more dead letter.
func (w *window) next1() (dead, n int) {
	if len(w.dead) == 0 {
		return 0, 0 // no guard here (a retry tier)
	}
	dead, n = w.count+1, min(w.filled+1, len(w.dead))
	if w.filled == len(w.dead) && w.dead[w.next] {
		dead-- // the oldest entry leaves the window
	}
	return dead, n
}

// reset empties the window after a resume, with a grace of one full
// window: the operator who resumed let the records behind the flood through.
func (w *window) reset() {
	clear(w.dead)
	w.next, w.filled, w.count = 0, 0, 0
	w.grace = true
}

// flood is the consumer's flood state: nil while the guard has not tripped.
type flood struct {
	mu      sync.Mutex
	tripped *Flood
	resumed chan struct{} // closed by ResumeFlood
}

func (f *flood) state() *Flood {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tripped == nil {
		return nil
	}
	t := *f.tripped
	return &t
}

// wait returns the channel closed when the guard is resumed, nil if it is
// not tripped.
func (f *flood) wait() chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tripped == nil {
		return nil
	}
	return f.resumed
}

// guardFlood runs before rec is dead-lettered. It returns ok false when
// the worker must stop, skipped true when an operator skipped rec while it
// waited, and otherwise lets the letter be written (the guard is off, not
// crossed, or resumed).
func (p *partition[K, V]) guardFlood(rec *kgo.Record) (ok, skipped bool) {
	c := p.c
	g := &c.cfg.FloodGuard
	if g.Disable {
		return true, false
	}
	p.lanes.lock()
	trip := p.floodWin.wouldTrip(g)
	dead, n := p.floodWin.next1()
	p.lanes.unlock()
	if ch := c.flood.wait(); ch == nil && trip {
		if g.Halt {
			c.tripFlood(rec, dead, n, false)
			p.outcome(rec, "", 0, OutcomeHalted)
			c.halt(&HaltError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Stage: "flood-guard", Err: ErrFlood})
			return false, false
		}
		c.tripFlood(rec, dead, n, true)
	}
	ch := c.flood.wait()
	if ch == nil {
		return true, false
	}
	if !p.beforeWait() {
		return false, false
	}
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	p.setStuck(stuck{offset: rec.Offset, reason: StuckFlood, attempts: 1, lastErr: ErrFlood, cancel: rcancel})
	defer p.clearStuck(rec.Offset)
	select {
	case <-ch:
		p.lanes.lock()
		p.floodWin.reset()
		p.lanes.unlock()
		return true, false
	case <-rctx.Done():
		return false, errors.Is(context.Cause(rctx), errSkipped)
	}
}

// tripFlood records that the guard tripped on rec of p and, with pause,
// stops the fetching of every topic until ResumeFlood.
func (c *Consumer[K, V]) tripFlood(rec *kgo.Record, dead, records int, pause bool) {
	c.flood.mu.Lock()
	if c.flood.tripped != nil {
		c.flood.mu.Unlock()
		return
	}
	g := c.cfg.FloodGuard
	f := &Flood{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset,
		DeadLetters: dead, Records: records, Window: g.Window, Share: g.Share, Min: g.Min, Since: time.Now()}
	c.flood.tripped = f
	c.flood.resumed = make(chan struct{})
	c.flood.mu.Unlock()
	if pause {
		c.cl.PauseFetchTopics(c.sourceTopics()...)
	}
	c.stats.floodTrips.Add(1)
	msg := fmt.Sprintf("flood guard tripped: %d of the last %d records of a partition would be dead-lettered (%.0f%%, more than %.0f%%); ",
		f.DeadLetters, f.Records, f.Percent(), 100*f.Share)
	if pause {
		msg += "fetching is paused until the guard is resumed (Consumer.ResumeFlood, or POST /flood/resume on the admin API). A bad deploy or a wrong schema?"
	} else {
		msg += "the consumer halts (FloodGuard.Halt). A bad deploy or a wrong schema?"
	}
	c.log.Error(msg, "topic", f.Topic, "partition", f.Partition, "offset", f.Offset, "dead_letters", f.DeadLetters,
		"records", f.Records, "share", f.Share, "halt", !pause)
	if c.hooks != nil {
		c.hooks.FloodGuardTripped(*f)
	}
}

// ResumeFlood resumes a consumer paused by its flood guard: fetching
// resumes, and the records waiting to be dead-lettered are. It returns
// [ErrNotFlooded] when the guard has not tripped.
func (c *Consumer[K, V]) ResumeFlood() error {
	c.flood.mu.Lock()
	f := c.flood.tripped
	if f == nil {
		c.flood.mu.Unlock()
		return ErrNotFlooded
	}
	c.flood.tripped = nil
	close(c.flood.resumed)
	c.flood.mu.Unlock()
	c.cl.ResumeFetchTopics(c.sourceTopics()...)
	c.log.Warn("flood guard resumed by an operator", "tripped_on", fmt.Sprintf("%s/%d@%d", f.Topic, f.Partition, f.Offset),
		"paused_for", dur(time.Since(f.Since).Round(time.Millisecond)))
	if c.hooks != nil {
		c.hooks.FloodGuardResumed(*f)
	}
	return nil
}

// ErrNotFlooded is returned by [Consumer.ResumeFlood] when the flood guard
// has not tripped.
var ErrNotFlooded = errors.New("consumer: the flood guard has not tripped")

// floodAdd counts a settled record in the partition's window: dead-lettered
// (or forwarded to a retry tier), or not.
func (p *partition[K, V]) floodAdd(dead bool) {
	p.lanes.lock()
	p.floodWin.add(dead)
	p.lanes.unlock()
}
