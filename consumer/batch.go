package consumer

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// BatchHandler processes decoded records of one partition together, in
// offset order: the natural shape for bulk sinks (Elasticsearch's _bulk, a SQL
// batch insert). It is called from one goroutine per partition. Records that
// fail to decode never reach it: they are settled before the batch, by the
// policy, as with a [Handler].
//
// Return nil when every record is processed. Return a [*BatchError] to fail
// some records: each is settled alone by the policy (retried in place as a
// batch of one, then dead-lettered, say), and the others are processed, once.
// Any other error fails the whole batch: a transient one retries the batch
// under the policy, and when retrying is over every record of it is settled
// by the policy's Then; a permanent one (or a panic) tries each record again
// alone, so that a poison pill is found and settled by itself.
//
// With [RetryTopics], a failed record is forwarded to a tier like any other
// (Then: ActionRetryTopic), and the records read back from a tier are tried one at
// a time, each when it is due, as batches of one. With per-key order (the
// default), a batch holds at most one record of each key: a later record of
// the key waits for the next batch, where it is parked behind the earlier
// one if that one went to a tier. With [ExactlyOnce], the outputs each record
// produced are written in the transaction that commits it.
type BatchHandler[K, V any] func(ctx context.Context, batch []*Record[K, V]) error

// BatchError fails some records of a batch: Errs[i] is the failure of
// batch[i]. Records without an entry are processed.
type BatchError struct {
	Errs map[int]error
}

func (e *BatchError) Error() string {
	idx := make([]int, 0, len(e.Errs))
	for i := range e.Errs {
		idx = append(idx, i)
	}
	sort.Ints(idx)
	parts := make([]string, 0, min(len(idx), 3))
	for _, i := range idx[:min(len(idx), 3)] {
		parts = append(parts, "record "+strconv.Itoa(i)+": "+fmt.Sprint(e.Errs[i]))
	}
	more := ""
	if len(idx) > 3 {
		more = fmt.Sprintf(" (and %d more)", len(idx)-3)
	}
	return fmt.Sprintf("consumer: %d records of the batch failed: %s%s", len(idx), strings.Join(parts, "; "), more)
}

// Batching configures a [BatchHandler].
type Batching struct {
	// Size is the most records of a batch. Optional: 500.
	Size int
	// Linger is how long a batch that is not full waits for more records
	// before it is handled, counted from its first record: a trickle of
	// records does not hold a batch back until it is full. Optional: 50ms.
	Linger time.Duration
}

func (b Batching) withDefaults() Batching {
	if b.Size == 0 {
		b.Size = 500
	}
	if b.Linger == 0 {
		b.Linger = 50 * time.Millisecond
	}
	return b
}

func (b Batching) validate() error {
	if b.Size < 0 {
		return configErr("Batching.Size", "negative")
	}
	if b.Linger < 0 {
		return configErr("Batching.Linger", "negative")
	}
	return nil
}

// oneOf is the Handler of a consumer with a BatchHandler: a batch of one,
// for the records settled alone (retried in place, tried after a batch
// failed as a whole).
func oneOf[K, V any](bh BatchHandler[K, V]) Handler[K, V] {
	return func(ctx context.Context, r *Record[K, V]) error {
		err := bh(ctx, []*Record[K, V]{r})
		var be *BatchError
		if errors.As(err, &be) {
			return be.Errs[0] // nil when the one record is not among them
		}
		return err
	}
}

// pending is a decoded record waiting for its batch.
type pending[K, V any] struct {
	rec   *kgo.Record
	r     *Record[K, V]
	trace *traced // its span, with a Tracer (trace.go)
}

// runBatches is the worker loop with a BatchHandler: records are decoded as
// they come, and handled in batches of up to Batching.Size, after at most
// Batching.Linger.
func (p *partition[K, V]) runBatches() {
	defer close(p.done)
	defer p.drain()
	p.batches(workerSource[K, V]{p})
}

// batchSource is where a batch loop takes its records: the partition's
// worker (one batch at a time), or a shard of it (with Concurrency).
type batchSource interface {
	// take returns the records queued, nil if none.
	take() []*kgo.Record
	// idle waits for records; false: stop.
	idle() bool
	// linger waits until due for more records; it reports whether records
	// came (false: handle the batch now, or stop).
	linger(due time.Time) bool
	// resumed waits while an operator pauses the partition; false: stop.
	resumed() bool
}

// workerSource is the batch source of the partition's worker.
type workerSource[K, V any] struct{ p *partition[K, V] }

func (w workerSource[K, V]) take() []*kgo.Record       { return w.p.take() }
func (w workerSource[K, V]) idle() bool                { return w.p.idle() }
func (w workerSource[K, V]) linger(due time.Time) bool { return w.p.lingerUntil(due) }
func (w workerSource[K, V]) resumed() bool             { return w.p.waitResumed() }

// batches decodes the records of src as they come and handles them in
// batches of up to Batching.Size, after at most Batching.Linger, until the
// worker must stop.
func (p *partition[K, V]) batches(src batchSource) {
	size := p.c.cfg.Batching.Size
	batch := make([]pending[K, V], 0, size)
	var due time.Time // when the batch is handled if not full: Linger after its first record
	// With per-key order in the retry tiers, a batch holds one record of
	// a key: a later one joins the next batch, once the earlier one is
	// settled or forwarded (and then it is parked behind it).
	var keys map[string]struct{}
	if p.fam != nil {
		keys = map[string]struct{}{}
	}
	handle := func() bool {
		ok := p.handleBatch(batch)
		batch = batch[:0]
		clear(keys)
		return ok
	}
	for {
		recs := src.take()
		if len(recs) == 0 {
			if len(batch) > 0 && !src.linger(due) {
				if !handle() {
					return
				}
				continue
			}
			if len(batch) == 0 && !src.idle() {
				return
			}
			continue
		}
		for _, rec := range recs {
			if p.ctx.Err() != nil || !src.resumed() {
				return
			}
			p.c.stats.consumed.Add(1)
			if p.skipped(rec.Offset) {
				if !handle() || !p.skipAgain(rec) { // the batch before it first
					return
				}
				continue
			}
			if keys != nil && rec.Key != nil {
				join, ok := p.routeBatched(rec, keys, handle)
				if !ok {
					return
				}
				if !join {
					continue
				}
				keys[string(rec.Key)] = struct{}{}
			}
			var tr *traced
			if t := p.c.cfg.Tracer; t != nil {
				tr = &traced{span: t.Start(p.ctx, TraceRecord{Record: rec, Fetched: rec, Group: p.c.cfg.Group})}
			}
			if e, ok := p.retries[rec.Offset]; ok && e.used != nil && e.used.of(rec) {
				// It had used its tries: its letter is written again, in
				// offset order, the batch before it first.
				if !handle() {
					tr.endSpan()
					return
				}
				o := &origin{rec: rec, trace: tr}
				ok := p.letterAgain(rec, o, e)
				endSpan(o)
				if !ok {
					return
				}
				continue
			}
			r, stage, err := p.decode(p.ctx, rec, 1, time.Time{}, 0)
			if err != nil {
				// Settled in offset order: the batch before it first.
				if !handle() {
					tr.endSpan()
					return
				}
				o, n, first := &origin{rec: rec, trace: tr}, 1, time.Time{}
				if s, ok := p.retries[rec.Offset]; ok {
					// It was retrying before the restart: its tries go on,
					// and its entry goes once it is settled.
					o.saved, n, first = true, s.attempts+1, s.first
				}
				ok := p.settleFailure(rec, o, stage, err, n, first)
				endSpan(o)
				if !ok {
					return
				}
				continue
			}
			if len(batch) == 0 {
				due = time.Now().Add(p.c.cfg.Batching.Linger)
			}
			batch = append(batch, pending[K, V]{rec, r, tr})
			if len(batch) == size && !handle() {
				return
			}
		}
		if !p.beforeWait() {
			return
		}
	}
}

// routeBatched routes a keyed source record of a batch consumer with per-key
// order in the retry tiers: join when it is to be processed in the batch;
// otherwise it was parked behind an earlier record of its key in the tiers,
// or was in them already, and is settled. The batch being built is handled
// first (handle) when the record cannot join it: an earlier record of the
// same key in it may yet be forwarded. ok is false when the worker must stop.
func (p *partition[K, V]) routeBatched(rec *kgo.Record, keys map[string]struct{}, handle func() bool) (join, ok bool) {
	if !p.fam.await(p.ctx) {
		return false, false
	}
	_, dup := keys[string(rec.Key)]
	route, tier, _ := p.fam.route(string(rec.Key), rec.Offset) // no wait to process it
	if dup || route != routeProcess || p.fam.full() != nil {
		if !handle() || !p.awaitRoom() {
			return false, false
		}
		var ok bool
		if route, tier, ok = p.routeSource(rec); !ok {
			return false, false
		}
	}
	switch route {
	case routeForwarded:
		return false, p.settledInTier(rec) // in a tier already: forwarded before a restart
	case routePark:
		return false, p.park(rec, &origin{rec: rec}, nil, tier)
	}
	return true, true
}

// lingerUntil waits until due for more records. It reports whether records
// came (false: handle the batch now, or stop).
func (p *partition[K, V]) lingerUntil(due time.Time) bool {
	p.ledger.flush()
	return wakeBefore(p.ctx, p.wake, due)
}

// wakeBefore waits until due for a signal on wake. It reports whether one
// came (false: due passed, or ctx ended).
func wakeBefore(ctx context.Context, wake <-chan struct{}, due time.Time) bool {
	d := time.Until(due)
	if d <= 0 {
		return false
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-wake:
		return true
	case <-t.C:
		return false
	case <-ctx.Done():
		return false
	}
}

// batchDone settles a record its batch processed, with the outputs its
// handler produced (exactly-once mode). An output of it that could not be
// written in aborted transactions fails it instead (see txn.failedWrite).
func (p *partition[K, V]) batchDone(b pending[K, V]) bool {
	o := &origin{rec: b.rec, trace: b.trace}
	defer endSpan(o)
	if err := p.outputFailed(b.rec); err != nil {
		return p.settleFailure(b.rec, o, deadletter.StageProcess, err, b.r.Attempt, b.r.FirstFailure)
	}
	p.processed(b.rec, o)
	if _, ok := p.retries[b.rec.Offset]; ok {
		p.c.attempts.clear(b.rec) // it was retrying before the restart
	}
	return p.settledOut(b.rec, b.r.out)
}

// saveFailed saves the tries of the records of batch, from index from on,
// that be failed with an error of their own (not the stop's), for the next
// owner: the worker stops before settling them. attempt and since are the
// batch's try and first failure.
func (p *partition[K, V]) saveFailed(batch []pending[K, V], be *BatchError, from, attempt int, since time.Time) {
	for i := from; i < len(batch); i++ {
		b := batch[i]
		ferr := be.Errs[i]
		if ferr == nil || p.cutShort(ferr) {
			continue
		}
		n, first := attempt, since
		if s, ok := p.retries[b.rec.Offset]; ok {
			n, first = s.attempts+attempt, s.first
		}
		if first.IsZero() {
			first = time.Now()
		}
		p.c.attempts.save(b.rec, n, first)
	}
}

// callBatch calls the BatchHandler; a panic is a permanent failure of the
// whole batch. With a Tracer, the call has a batch span that names the
// spans of its records.
func (p *partition[K, V]) callBatch(ctx context.Context, batch []pending[K, V], rs []*Record[K, V], attempt int) error {
	t := p.c.cfg.Tracer
	if t == nil {
		return p.callBatchOnce(ctx, rs)
	}
	spans := make([]Span, len(batch))
	for i, b := range batch {
		if b.trace != nil {
			spans[i] = b.trace.span
		}
	}
	ctx = t.StartBatch(ctx, spans, attempt)
	err := p.callBatchOnce(ctx, rs)
	t.EndBatch(ctx, err)
	return err
}

// callBatchOnce is callBatch, untraced.
func (p *partition[K, V]) callBatchOnce(ctx context.Context, rs []*Record[K, V]) (err error) {
	defer func() {
		if v := recover(); v != nil {
			err = failure.Permanent(&serde.PanicError{Stage: string(deadletter.StageProcess), Value: v})
		}
	}()
	if h := p.c.hooks; h != nil {
		start := time.Now()
		err = p.c.cfg.BatchHandler(ctx, rs)
		h.HandlerDone(HandlerEvent{PartitionEvent: PartitionEvent{p.topic, p.part}, Duration: time.Since(start), Err: err})
		return err
	}
	return p.c.cfg.BatchHandler(ctx, rs)
}

// handleBatch handles and settles a batch, in offset order. It returns false
// when the worker must stop (the records not settled yet stay unsettled).
func (p *partition[K, V]) handleBatch(batch []pending[K, V]) bool {
	if len(batch) == 0 {
		return true
	}
	c := p.c
	if c.cfg.Tracer != nil {
		// The spans of the records the batch leaves unsettled (the
		// consumer stops) end too; a record's span ends as it is settled.
		defer func() {
			for i := range batch {
				batch[i].trace.endSpan()
				batch[i].trace = nil
			}
		}()
	}
	rs := make([]*Record[K, V], len(batch))
	for i, b := range batch {
		rs[i] = b.r
	}
	first := batch[0].rec
	var since time.Time
	defer p.clearStuck(first.Offset)
	for attempt := 1; ; attempt++ {
		for i, r := range rs {
			r.Attempt, r.FirstFailure = attempt, since
			if s, ok := p.retries[batch[i].rec.Offset]; ok {
				// It was retrying before the restart: its tries go on.
				r.Attempt, r.FirstFailure = s.attempts+attempt, s.first
			}
		}
		err := p.callBatch(p.ctx, batch, rs, attempt)
		var be *BatchError
		if p.ctx.Err() != nil {
			// Revoked or stopping. A record the batch failed with an
			// error of its own (not our cancellation) has made a try:
			// its count is saved for the next owner, as settleFailure
			// does for a record alone.
			if errors.As(err, &be) {
				p.saveFailed(batch, be, 0, attempt, since)
			}
			return false
		}
		switch {
		case err == nil:
			for i, b := range batch {
				batch[i].trace = nil // ended by batchDone
				if !p.batchDone(b) {
					return false
				}
			}
			return true
		case errors.As(err, &be):
			p.clearStuck(first.Offset)
			for i, b := range batch {
				batch[i].trace = nil // ended below
				ferr, failed := be.Errs[i]
				if !failed || ferr == nil {
					if !p.batchDone(b) {
						p.saveFailed(batch, be, i+1, attempt, since)
						return false
					}
					continue
				}
				o, n, first := &origin{rec: b.rec, trace: b.trace}, attempt, since
				if r, ok := p.retries[b.rec.Offset]; ok {
					// It was retrying before the restart.
					o.saved, n, first = true, r.attempts+attempt, r.first
				}
				ok := p.settleFailure(b.rec, o, deadletter.StageProcess, ferr, n, first)
				endSpan(o)
				if !ok {
					// Stopped while settling it (a retry wait, say): the
					// records after it that the batch failed keep their
					// tries too.
					p.saveFailed(batch, be, i+1, attempt, since)
					return false
				}
			}
			return true
		}
		if since.IsZero() {
			since = time.Now()
		}
		class := c.classify(deadletter.StageProcess, err)
		out := c.policy.outcome(deadletter.StageProcess, class)
		if class == failure.ClassPermanent {
			// Find the poison pill: each record alone.
			p.clearStuck(first.Offset)
			p.log.warn("batch failed permanently; its records are tried one by one", first, "records", len(batch), "err", err)
			for i, b := range batch {
				batch[i].trace = nil // ended below
				o := &origin{rec: b.rec, trace: b.trace}
				ok := p.process(b.rec, o, attempt+1, since)
				endSpan(o)
				if !ok {
					return false
				}
			}
			return true
		}
		wait, retry := retryWait(out.Retry, attempt, time.Since(since), err)
		if retry && !c.retryOff.Load() {
			p.outcome(first, deadletter.StageProcess, class, OutcomeRetried)
			if !p.beforeWait() { // on a shard: nothing, the worker marks
				return false
			}
			// An operator skip of the stuck offset settles the batch's
			// first record as skipped; the rest is handled again.
			rctx, rcancel := context.WithCancelCause(p.ctx)
			p.setStuck(stuck{offset: first.Offset, reason: StuckRetrying, attempts: attempt, since: since, lastErr: err, cancel: rcancel})
			if attempt == 1 || attempt%10 == 0 {
				p.log.warn("batch failed, retrying", first, "records", len(batch), "class", class, "attempt", attempt, "wait", dur(wait), "err", err)
			}
			serr := sleep(rctx, wait, c.wakeSignal())
			skipped := errors.Is(context.Cause(rctx), errSkipped)
			who, lettered := byOperator(rctx)
			rcancel(nil)
			if skipped || lettered {
				p.clearStuck(first.Offset)
				o, n, from := &origin{rec: first, trace: batch[0].trace}, attempt, since
				batch[0].trace = nil // ended below
				if s, ok := p.retries[first.Offset]; ok {
					o.saved, n, from = true, s.attempts+attempt, s.first // its tries went on from before a restart
				}
				var ok bool
				if skipped {
					ok = p.skip(first, o, deadletter.StageProcess, err, n, "operator")
				} else {
					ok = p.letterByOperator(first, o, deadletter.StageProcess, class, err, n, from, who)
				}
				if ok && o.saved && !o.lettered {
					p.c.attempts.clear(first) // settled: its durable entry goes
				}
				endSpan(o)
				return ok && p.handleBatch(batch[1:])
			}
			if serr != nil {
				return false
			}
			continue
		}
		// Retrying is over: each record is settled by the policy's Then.
		p.clearStuck(first.Offset)
		reason := deadletter.ReasonExhausted
		if c.retryOff.Load() && retry {
			reason = deadletter.ReasonRetryDisabled
		}
		for i, b := range batch {
			batch[i].trace = nil // ended below
			o := &origin{rec: b.rec, trace: b.trace}
			ok := p.act(b.rec, o, deadletter.StageProcess, class, err, attempt, since, reason, out.Then)
			endSpan(o)
			if !ok {
				return false
			}
		}
		return true
	}
}
