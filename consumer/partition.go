package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// partition is the worker of one assigned partition. Records are handled one
// at a time, in offset order. The poll goroutine pushes fetched records; the
// worker pauses fetching of its partition while it is retrying or while its
// buffer is full, and resumes it afterwards.
type partition[K, V any] struct {
	c     *Consumer[K, V]
	topic string
	part  int32
	ctx   context.Context
	stop  context.CancelFunc
	done  chan struct{}
	wake  chan struct{}
	log   *slog.Logger

	mu       sync.Mutex
	queue    []*kgo.Record
	paused   bool // fetching paused by us
	retrying bool // stuck on a failed record
	// current record being retried: its offset, attempts, and the cancel
	// of its context for an operator skip.
	curOffset   int64
	curAttempts int
	curCancel   context.CancelCauseFunc

	// Owned by the worker goroutine: records settled since the oldest
	// dead letter not yet acknowledged, in offset order. Offsets are marked
	// for commit only up to the first unacknowledged letter.
	pending  []settled
	inflight int // letters in pending not yet reaped
	// unmarked is the last record settled but not yet marked for commit,
	// and unmarkedN how many settled records it stands for: marks are
	// batched (see markBatch); nil while pending is not empty.
	unmarked  *kgo.Record
	unmarkedN int
}

// markBatch bounds the settled records that wait to be marked for commit:
// marking takes the client's group lock, so it is done once per batch of
// records rather than per record. Unmarked records are also marked before
// any wait (a retry, a dead letter, an idle partition) and when the worker
// stops, so a wait never holds back the commit of records settled before it.
const markBatch = 64

// settled is a settled record; l is its dead letter, nil if it was
// processed or skipped.
type settled struct {
	rec *kgo.Record
	l   *letter
}

// maxInflight bounds the dead letters in flight per partition.
const maxInflight = 256

// errSkipped is the cause of a record context canceled by an operator skip.
var errSkipped = errors.New("consumer: skipped by operator")

func newPartition[K, V any](c *Consumer[K, V], topic string, part int32) *partition[K, V] {
	ctx, stop := context.WithCancel(c.runCtx)
	return &partition[K, V]{
		c: c, topic: topic, part: part, ctx: ctx, stop: stop,
		done: make(chan struct{}), wake: make(chan struct{}, 1),
		log: c.log, curOffset: -1,
	}
}

func (p *partition[K, V]) cancel() { p.stop() }

// push appends fetched records; called from the poll goroutine.
func (p *partition[K, V]) push(recs []*kgo.Record) {
	p.mu.Lock()
	p.queue = append(p.queue, recs...)
	p.updatePauseLocked()
	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// updatePauseLocked pauses or resumes fetching of the partition so that it
// is paused exactly while it retries or its buffer is full.
func (p *partition[K, V]) updatePauseLocked() {
	want := p.retrying || len(p.queue) >= p.c.cfg.MaxBufferedRecords
	if want == p.paused || p.ctx.Err() != nil {
		return
	}
	p.paused = want
	m := map[string][]int32{p.topic: {p.part}}
	if want {
		p.c.cl.PauseFetchPartitions(m)
	} else {
		p.c.cl.ResumeFetchPartitions(m)
	}
}

func (p *partition[K, V]) take() []*kgo.Record {
	p.mu.Lock()
	defer p.mu.Unlock()
	q := p.queue
	p.queue = nil
	p.updatePauseLocked()
	return q
}

func (p *partition[K, V]) run() {
	defer close(p.done)
	defer p.drain()
	for {
		batch := p.take()
		if len(batch) == 0 {
			if !p.idle() {
				return
			}
			continue
		}
		for _, rec := range batch {
			if p.ctx.Err() != nil || !p.handle(rec) {
				return
			}
		}
		p.flushMark()
	}
}

// flushMark marks the last settled record for commit, if it is not yet.
func (p *partition[K, V]) flushMark() {
	if p.unmarked != nil {
		p.c.cl.MarkCommitRecords(p.unmarked)
		p.unmarked, p.unmarkedN = nil, 0
	}
}

// idle waits for new records. While dead letters are in flight it also
// reaps each as it is acknowledged. It returns false when the worker must
// stop.
func (p *partition[K, V]) idle() bool {
	var oldest <-chan struct{}
	if len(p.pending) > 0 {
		if l := p.pending[0].l; l != nil {
			oldest = l.cur.done
		} else {
			return p.reap(false)
		}
	}
	select {
	case <-p.ctx.Done():
		return false
	case <-p.wake:
		return true
	case <-oldest: // nil when nothing is in flight: never ready
		return p.reap(false)
	}
}

// settle records that rec is settled, with its dead letter l if any, and
// marks for commit every record settled before the oldest letter still in
// flight. It returns false when the worker must stop.
func (p *partition[K, V]) settle(rec *kgo.Record, l *letter) bool {
	if l == nil && len(p.pending) == 0 { // the common case
		p.unmarked = rec
		if p.unmarkedN++; p.unmarkedN >= markBatch {
			p.flushMark()
		}
		return true
	}
	p.flushMark() // records before the first letter in flight
	p.pending = append(p.pending, settled{rec, l})
	if l != nil {
		p.inflight++
	}
	block := p.inflight >= maxInflight || len(p.pending) >= p.c.cfg.MaxBufferedRecords
	return p.reap(block)
}

// stuckAfter is how long a partition may wait for its oldest dead letter
// before it shows as stuck (Stats.Stuck) and can be skipped by an operator.
const stuckAfter = time.Second

// reap takes acknowledged letters off the front of pending and marks the
// records settled before the first letter still in flight. With block, it
// waits for the oldest letter first. A failed write is retried here, while
// the partition waits paused. It returns false when the worker must stop.
func (p *partition[K, V]) reap(block bool) bool {
	var last *kgo.Record
	defer func() {
		if last != nil {
			p.c.cl.MarkCommitRecords(last)
		}
	}()
	for len(p.pending) > 0 {
		e := p.pending[0]
		if e.l != nil {
			if block {
				if !p.await(e.l) {
					return false
				}
				block = false
			}
			if !e.l.skipped {
				select {
				case <-e.l.cur.done:
				default:
					return true // still in flight
				}
				if !e.l.ok() && !p.rewrite(e.l) {
					return false
				}
			}
			p.letterDone(e.l)
			p.inflight--
		}
		last = e.rec
		p.pending[0] = settled{}
		p.pending = p.pending[1:]
	}
	p.pending = nil
	return true
}

// await waits for the latest write of l. After stuckAfter the partition
// shows as stuck, and an operator skip settles l as skipped. It returns
// false when the worker must stop.
func (p *partition[K, V]) await(l *letter) bool {
	t := time.NewTimer(stuckAfter)
	defer t.Stop()
	select {
	case <-l.cur.done:
		return true
	case <-p.ctx.Done():
		return false
	case <-t.C:
	}
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	p.setRetrying(true, l.src.Offset, l.tries, rcancel)
	defer p.setRetrying(false, -1, 0, nil)
	select {
	case <-l.cur.done:
		return true
	case <-rctx.Done():
		if errors.Is(context.Cause(rctx), errSkipped) {
			l.skipped = true
			return true
		}
		return false
	}
}

// rewrite retries a failed dead-letter write until it is acknowledged. The
// partition is paused meanwhile and counts as stuck, so an operator can skip
// the record. It returns false when the worker must stop.
func (p *partition[K, V]) rewrite(l *letter) bool {
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	p.setRetrying(true, l.src.Offset, l.tries, rcancel)
	defer p.setRetrying(false, -1, 0, nil)
	if err := p.c.dlq.resend(rctx, l); err != nil {
		if errors.Is(context.Cause(rctx), errSkipped) {
			l.skipped = true
			return true // settled as skipped; see letterDone
		}
		return false
	}
	return true
}

// drain runs when the worker stops: it gives the letters in flight up to
// the write timeout to be acknowledged and marks the records settled before
// the first that was not, without retrying failures. Records after it stay
// unsettled and are redelivered.
func (p *partition[K, V]) drain() {
	p.flushMark()
	var last *kgo.Record
	grace := time.NewTimer(p.c.cfg.DeadLetter.WriteTimeout)
	defer grace.Stop()
loop:
	for _, e := range p.pending {
		if e.l != nil && !e.l.skipped {
			select {
			case <-e.l.cur.done:
			case <-grace.C:
				break loop
			}
			if !e.l.ok() {
				break
			}
		}
		if e.l != nil {
			p.letterDone(e.l)
		}
		last = e.rec
	}
	p.pending = nil
	if last != nil {
		p.c.cl.MarkCommitRecords(last)
	}
}

// letterDone counts and logs an acknowledged (or operator-skipped) letter.
func (p *partition[K, V]) letterDone(l *letter) {
	if l.skipped {
		p.c.stats.failure(l.stage, l.class, "skipped")
		p.log.Warn("record skipped while its dead letter was not acknowledged", append(recordAttrs(l.src), "stage", l.stage, "why", "operator", "err", l.cause)...)
		return
	}
	p.c.stats.failure(l.stage, l.class, "dead-lettered")
	p.log.Warn("record dead-lettered", append(recordAttrs(l.src), "stage", l.stage, "class", l.class, "reason", l.reason, "attempts", l.attempts, "err", l.cause)...)
}

func (p *partition[K, V]) setRetrying(on bool, off int64, attempts int, cancel context.CancelCauseFunc) {
	p.mu.Lock()
	p.retrying = on
	p.curOffset, p.curAttempts, p.curCancel = off, attempts, cancel
	if !on {
		p.curOffset, p.curCancel = -1, nil
	}
	p.updatePauseLocked()
	p.mu.Unlock()
}

func (p *partition[K, V]) stuckOn() (int64, int, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.curOffset, p.curAttempts, p.retrying
}

func (p *partition[K, V]) skipStuck() (int64, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.retrying || p.curCancel == nil {
		return -1, fmt.Errorf("%w: %s/%d", ErrNotStuck, p.topic, p.part)
	}
	p.curCancel(errSkipped)
	return p.curOffset, nil
}

// recordAttrs are the attributes of every record-level log line.
func recordAttrs(r *kgo.Record) []any {
	return []any{"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "timestamp", r.Timestamp.UTC().Format(deadletter.TimeLayout)}
}

// headers reinterprets franz-go headers as serde headers: both are
// struct{Key string; Value []byte} (checked by a test), so no copy is made.
func headers(h []kgo.RecordHeader) []serde.Header {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice((*serde.Header)(unsafe.Pointer(unsafe.SliceData(h))), len(h))
}

// try decodes and processes rec once. It returns the stage reached and the
// failure, if any. A panic anywhere becomes a permanent failure of its stage.
func (p *partition[K, V]) try(ctx context.Context, rec *kgo.Record, attempt int, first time.Time) (stage deadletter.Stage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = failure.Permanent(&serde.PanicError{Stage: string(stage), Value: v})
		}
	}()
	c := p.c
	r := &Record[K, V]{Raw: rec, Attempt: attempt, FirstFailure: first}
	m := serde.Meta{Topic: rec.Topic, Headers: headers(rec.Headers)}
	if c.cfg.Key != nil {
		stage = deadletter.StageDeserializeKey
		m.Part = serde.Key
		if r.Key, err = c.cfg.Key.Deserialize(ctx, m, rec.Key); err != nil {
			return stage, err
		}
	}
	stage = deadletter.StageDeserializeValue
	m.Part = serde.Value
	if r.Value, err = c.cfg.Value.Deserialize(ctx, m, rec.Value); err != nil {
		return stage, err
	}
	stage = deadletter.StageProcess
	return stage, c.cfg.Handler(ctx, r)
}

// handle settles rec: processed, dead-lettered or skipped. It returns false
// when the worker must stop (partition revoked, consumer stopping, halt)
// with rec unsettled.
func (p *partition[K, V]) handle(rec *kgo.Record) bool {
	c := p.c
	c.stats.consumed.Add(1)
	stage, err := p.try(p.ctx, rec, 1, time.Time{})
	if err == nil {
		c.stats.processed.Add(1)
		return p.settle(rec, nil)
	}
	return p.settleFailure(rec, stage, err)
}

// settleFailure is the slow path: retry in place, then the policy's action.
func (p *partition[K, V]) settleFailure(rec *kgo.Record, stage deadletter.Stage, err error) bool {
	c := p.c
	p.flushMark() // the records before this one, before any wait
	first := time.Now()
	attempt := 1
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	defer p.setRetrying(false, -1, 0, nil)
	skipped := func() bool { return errors.Is(context.Cause(rctx), errSkipped) }

	for {
		if p.ctx.Err() != nil {
			return false // revoked or stopping: the failure may be our own cancellation
		}
		if skipped() {
			return p.skip(rec, stage, err, attempt, "operator")
		}
		if c.cfg.Skip != nil && p.skipFunc(rec, stage, err) {
			p.setRetrying(false, -1, 0, nil)
			return p.skip(rec, stage, err, attempt, "Config.Skip")
		}
		// Taken before the kill switch is read, so that a flip between the
		// two still wakes the sleep below.
		wake := c.wakeSignal()
		class := c.classify(stage, err)
		out := c.policy.outcome(stage, class)
		if c.retryOff.Load() {
			// The kill switch: no waiting, straight to the exhausted outcome.
			if _, canRetry := out.Retry.Next(attempt, time.Since(first)); canRetry {
				p.setRetrying(false, -1, 0, nil)
				return p.act(rec, stage, class, err, attempt, first, deadletter.ReasonRetryDisabled, out.Then)
			}
		} else if wait, ok := backoff.Next(out.Retry, attempt, time.Since(first), err); ok {
			c.stats.failure(stage, class, "retried")
			p.setRetrying(true, rec.Offset, attempt, rcancel)
			p.log.Debug("retrying", append(recordAttrs(rec), "stage", stage, "class", class, "attempt", attempt, "wait", wait, "err", err)...)
			if attempt == 1 || attempt%10 == 0 {
				p.log.Warn("record failed, retrying", append(recordAttrs(rec), "stage", stage, "class", class, "attempt", attempt, "wait", wait, "err", err)...)
			}
			if sleep(rctx, wait, wake) != nil || c.retryOff.Load() {
				continue // stopping, skipped or kill switch: re-decide at the top
			}
			attempt++
			stage, err = p.try(rctx, rec, attempt, first)
			if err == nil {
				p.setRetrying(false, -1, 0, nil) // no longer skippable
				c.stats.processed.Add(1)
				p.log.Info("record recovered after retry", append(recordAttrs(rec), "attempts", attempt)...)
				return p.settle(rec, nil)
			}
			continue
		}
		reason := deadletter.ReasonExhausted
		if class == failure.ClassPermanent {
			reason = deadletter.ReasonPermanent
		}
		p.setRetrying(false, -1, 0, nil) // settled below: no longer skippable
		return p.act(rec, stage, class, err, attempt, first, reason, out.Then)
	}
}

// skipFunc asks Config.Skip; a panic in it counts as "no" and is logged.
func (p *partition[K, V]) skipFunc(rec *kgo.Record, stage deadletter.Stage, err error) (skip bool) {
	defer func() {
		if v := recover(); v != nil {
			p.log.Error("Config.Skip panicked; the failure is settled by the policy", append(recordAttrs(rec), "panic", v)...)
			skip = false
		}
	}()
	return p.c.cfg.Skip(stage, err)
}

// classify applies the classifier and the deserialize-stage rule: an
// unclassified decode error is permanent.
func (c *Consumer[K, V]) classify(stage deadletter.Stage, err error) failure.Class {
	class := c.classifier.Classify(err)
	if class == failure.ClassUnclassified && stage != deadletter.StageProcess {
		return failure.ClassPermanent
	}
	return class
}

func (p *partition[K, V]) act(rec *kgo.Record, stage deadletter.Stage, class failure.Class, err error, attempts int, first time.Time, reason deadletter.Reason, then Action) bool {
	c := p.c
	switch then {
	case Skip:
		return p.skip(rec, stage, err, attempts, string(reason))
	case Halt:
		c.stats.failure(stage, class, "halted")
		p.log.Error("halting on record", append(recordAttrs(rec), "stage", stage, "class", class, "err", err)...)
		c.halt(&HaltError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Stage: string(stage), Err: err})
		return false
	}
	f := &deadletter.Failure{
		Stage: stage, Reason: reason, Class: class.String(),
		ErrorType: deadletter.ErrorType(err), Message: err.Error(),
		Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp,
		OriginalHeaders: len(rec.Headers), Group: c.cfg.Group, Attempts: attempts,
		First: first, Last: time.Now(),
	}
	if s, ok := serde.StageOf(err); ok && stage != deadletter.StageProcess {
		f.ErrorStage = s
	}
	// The write is asynchronous: the partition goes on while it is in
	// flight, and its offset is marked only once it is acknowledged.
	l := c.dlq.newLetter(rec, f, err)
	l.class, l.attempts = class, attempts
	c.dlq.send(p.ctx, l)
	return p.settle(rec, l)
}

func (p *partition[K, V]) skip(rec *kgo.Record, stage deadletter.Stage, err error, attempts int, why string) bool {
	c := p.c
	c.stats.failure(stage, c.classify(stage, err), "skipped")
	p.log.Warn("record skipped", append(recordAttrs(rec), "stage", stage, "why", why, "attempts", attempts, "err", err)...)
	return p.settle(rec, nil)
}
