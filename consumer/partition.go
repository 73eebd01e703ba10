package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// partition is the worker of one assigned partition. Records are handled one
// at a time, in offset order. Its jobs each have a type of their own:
//
//   - flow (flow.go): what the partition holds, and when its fetching is
//     paused;
//   - ledger (ledger.go): what may be committed;
//   - the settling of a failure (settle.go): retry in place, then the
//     policy's action;
//   - stuck: what an operator sees and may skip.
type partition[K, V any] struct {
	c     *Consumer[K, V]
	topic string
	part  int32
	ctx   context.Context
	stop  context.CancelFunc
	done  chan struct{}
	wake  chan struct{}
	log   *recordLog

	mu    sync.Mutex // guards queue, flow, stuck, hwm and resumed
	queue []*kgo.Record
	flow  flow
	stuck stuckSet
	hwm   int64 // high watermark from the last fetch, -1 until one

	// An operator pause stops the worker before its next record (and the
	// partition's fetching) until Resume; resumed is closed then.
	opPaused atomic.Bool
	resumed  chan struct{}

	ledger   ledger  // owned by the worker goroutine, like settler
	settler  settler // how a settled record is recorded (settler.go)
	floodWin window  // the flood window (with lanes on, guarded by lanes.mu)
	lanes    lanes   // with Concurrency: records handled at once
	// handoff takes a record the handle path settled: the settler itself
	// on the worker goroutine, or, on a lane, the lanes, which hand it to
	// the worker in offset order. beforeWait runs where the handle path is
	// about to wait: on the worker it marks what is settled for commit, on
	// a lane nothing (the worker does). Both are chosen once, in
	// newPartition.
	handoff    func(rec *kgo.Record, out []*kgo.Record, l *letter) bool
	beforeWait func() bool
	// route takes a fetched record to the handler: processNew, or with
	// retry topics handleTiered (parked behind its key, due, or tried).
	// Chosen once, in newPartition.
	route func(rec *kgo.Record) bool
	// retries are the attempts so far of the records that were retrying
	// in place when the partition was last owned, by offset, read from the
	// durable attempts at assignment. Read-only (the lanes read it too).
	retries map[int64]attemptEntry
	// skips are the offsets an operator skipped before the worker started
	// (Consumer.Skip, then an aborted transaction): skipped again. The map
	// is read-only; Consumer.forgetSkips drops it when the topic is
	// created again (its offsets start again).
	skips atomic.Pointer[map[int64]bool]

	// With retry topics: the partition's source topic (its own, or the
	// one whose tier it is), its tier index (-1 for a source partition),
	// and the per-key order it shares with its source and tiers (nil until
	// its first record, and without per-key order).
	source string
	tier   int
	fam    *family
}

// stuckAfter is how long a partition may wait for its oldest dead letter
// before it shows as stuck (Stats.Stuck) and can be skipped by an operator.
// A write that failed shows at once.
const stuckAfter = time.Second

// errSkipped is the cause of a record context canceled by an operator skip.
var errSkipped = errors.New("consumer: skipped by operator")

// operatorLetter is the cause of a record context an operator canceled to
// send its record to the dead-letter topic: who asked.
type operatorLetter struct{ who string }

func (o *operatorLetter) Error() string {
	return "consumer: dead-lettered by an operator (" + o.who + ")"
}

// byOperator returns who asked to dead-letter the record of ctx, if anyone.
func byOperator(ctx context.Context) (who string, ok bool) {
	var o *operatorLetter
	if errors.As(context.Cause(ctx), &o) {
		return o.who, true
	}
	return "", false
}

func newPartition[K, V any](c *Consumer[K, V], topic string, part int32) *partition[K, V] {
	ctx, stop := context.WithCancel(c.runCtx)
	p := &partition[K, V]{
		c: c, topic: topic, part: part, ctx: ctx, stop: stop,
		done: make(chan struct{}), wake: make(chan struct{}, 1),
		log:  newRecordLog(c.log, topic, part),
		flow: flow{topic: topic, part: part, cl: c.cl, total: &c.budget, lim: c.cfg.Buffer, hooks: c.hooks},
		hwm:  -1, source: topic, tier: -1,
	}
	if t := c.tiers; t != nil {
		if ti, ok := t.byTopic[topic]; ok {
			p.source, p.tier = ti.source, ti.index
		}
	}
	if c.tiers != nil && c.tiers.ordered {
		f, created := c.tiers.family(p.source, p.part)
		if created { // not by the assignment: rebuilt here, for every worker that shares it
			go c.tiers.rebuild(c.runCtx, map[tp]*family{{p.source, p.part}: f}, c.log.Warn)
		}
		p.fam = f
	}
	// The flood guard watches source partitions: in a retry tier, records
	// fail again by nature. Once it trips, every partition waits.
	if !c.cfg.FloodGuard.Disable && p.tier < 0 {
		p.floodWin.dead = make([]bool, c.cfg.FloodGuard.Window)
	}
	p.lanes.cfg = c.cfg.Concurrency
	if p.tier >= 0 && p.fam != nil && c.txn == nil {
		// Not with ExactlyOnce: a transaction writes a partition's tier
		// copies in offset order, so the forward of a record behind a
		// held one would wait for it, and it may be the record it waits
		// for.
		p.lanes.holding()
	}
	p.retries = c.attempts.take(topic, part)
	mark := func(r *kgo.Record) { c.cl.MarkCommitRecords(r) }
	if c.txn != nil {
		mark = func(*kgo.Record) {} // the transaction marks (txn.settle)
	}
	p.ledger = ledger{
		mark: mark,
		release: func(n int, sz int64) {
			p.mu.Lock()
			p.flow.release(n, sz)
			p.mu.Unlock()
		},
	}
	if p.lanes.hold {
		// Released once taken by a lane (dispatch): see lanes.hold.
		p.ledger.release = func(int, int64) {}
	}
	p.settler = newSettler(p)
	p.route = p.processNew
	if c.tiers != nil {
		p.route = p.handleTiered
	}
	if p.lanes.on() {
		p.handoff, p.beforeWait = p.lanes.complete, func() bool { return true }
	} else {
		p.handoff, p.beforeWait = p.settleNow, p.markSettled
	}
	return p
}

// settleNow gives a settled record to the settler.
func (p *partition[K, V]) settleNow(rec *kgo.Record, out []*kgo.Record, l *letter) bool {
	if l != nil {
		return p.settler.letter(rec, l)
	}
	return p.settler.done(rec, out)
}

// markSettled marks what is settled for commit, reaping the letters
// acknowledged meanwhile: the worker's beforeWait. It returns false when the
// worker must stop.
func (p *partition[K, V]) markSettled() bool {
	p.ledger.flush()
	_, ok := p.reap()
	return ok
}

// cancel stops the worker and releases what its partition holds.
func (p *partition[K, V]) cancel() {
	p.stop()
	p.mu.Lock()
	p.flow.stop()
	p.mu.Unlock()
}

// push appends fetched records; called from the poll goroutine.
func (p *partition[K, V]) push(recs []*kgo.Record, hwm int64, round uint64) {
	p.mu.Lock()
	p.hwm = hwm
	p.queue = append(p.queue, recs...)
	p.flow.hold(recs, round)

	p.mu.Unlock()
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// wantsStop reports whether the partition is full and its fetching should
// be paused, and whether it holds back the poll loop (flow.wantsStop).
func (p *partition[K, V]) wantsStop() (want, blocking bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flow.wantsStop()
}

// pauseFull pauses the partition's fetching because it is full; the poll
// goroutine calls it where that drops the least (pollRound).
func (p *partition[K, V]) pauseFull() {
	p.mu.Lock()
	p.flow.pauseFull()
	p.mu.Unlock()
}

// holdBack makes the full partition hold back the poll loop: its record is
// the last the client holds (flow.holdBack).
func (p *partition[K, V]) holdBack() {
	p.mu.Lock()
	p.flow.holdBack()
	p.mu.Unlock()
}

// rotatable, setRotate and setRotating: see the flow's methods and
// pollRound.
func (p *partition[K, V]) rotatable() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flow.rotatable()
}

func (p *partition[K, V]) setRotate(on bool) {
	p.mu.Lock()
	p.flow.setRotate(on)
	p.mu.Unlock()
}

// feeds returns the poll rounds that gave the full partition records.
func (p *partition[K, V]) feeds() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.flow.fed
}

func (p *partition[K, V]) setRotating(on bool) {
	p.mu.Lock()
	p.flow.setRotating(on)
	p.mu.Unlock()
}

// take returns the queued records. They stay held until they are settled.
func (p *partition[K, V]) take() []*kgo.Record {
	p.mu.Lock()
	q := p.queue
	p.queue = nil
	p.mu.Unlock()
	if len(q) > 0 && p.fam != nil && p.tier >= 0 {
		p.fam.took(p.tier, q)
	}
	return q
}

// run is the partition's worker. How records reach the handler is chosen
// here, once: one at a time, in keyed lanes (Concurrency), in batches
// (BatchHandler), or in batches of key shards (both). A retry tier's records
// are tried one record per call, each when it is due: with a BatchHandler,
// as batches of one.
func (p *partition[K, V]) run() {
	batches := p.c.cfg.BatchHandler != nil && p.tier < 0
	switch {
	case p.lanes.on() && batches:
		p.runShards()
		return
	case p.lanes.on():
		p.runLanes()
		return
	case batches:
		p.runBatches()
		return
	}
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
			if p.ctx.Err() != nil || !p.waitResumed() || !p.handle(rec) {
				return
			}
		}
		p.ledger.flush()
	}
}

// idle waits for new records. While dead letters are in flight it reaps each
// as it is acknowledged; a letter that takes longer than stuckAfter shows as
// stuck and can be skipped. It returns false when the worker must stop.
func (p *partition[K, V]) idle() bool {
	p.ledger.flush()
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
		}
	}
	return p.awaitLetter(head, p.wake)
}

// reap takes acknowledged letters off the front of the ledger, rewriting a
// failed one, and returns the oldest letter still in flight (nil if none).
// It returns false when the worker must stop.
func (p *partition[K, V]) reap() (*letter, bool) {
	for {
		head := p.ledger.advance(p.letterDone)
		if head == nil || !head.failed() {
			return head, true
		}
		if !p.rewrite(head) { // failed: retried here, marks already made
			return nil, false
		}
	}
}

// settleLetter writes l, the letter that settles rec (a dead letter, or a
// forward to a retry tier), as the settler writes letters, and hands rec
// over as settled by it. It returns false when the worker must stop.
func (p *partition[K, V]) settleLetter(rec *kgo.Record, l *letter) bool {
	l.at = rec.Offset
	p.settler.start(l)
	return p.handoff(rec, nil, l)
}

// awaitLetter waits for the latest write of l, or a signal on woken (nil:
// none), such as new records. After stuckAfter the partition shows as stuck
// on l's record, and an operator skip settles l as skipped. It returns false
// when the worker must stop.
func (p *partition[K, V]) awaitLetter(l *letter, woken <-chan struct{}) bool {
	t := time.NewTimer(stuckAfter)
	defer t.Stop()
	select {
	case <-l.cur.done:
		return true
	case <-woken: // nil unless wake: never ready
		return true
	case <-p.ctx.Done():
		return false
	case <-t.C:
	}
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	p.setStuck(stuck{offset: l.at, reason: StuckDeadLetter, attempts: l.tries, since: l.cur.start,
		lastErr: errors.New("dead-letter write not acknowledged yet"), cancel: rcancel})
	defer p.clearStuck(l.at)
	select {
	case <-l.cur.done:
	case <-woken:
	case <-rctx.Done():
	}
	switch {
	case l.isDone() && l.ok(): // written: a skip taken meanwhile comes too late
	case errors.Is(context.Cause(rctx), errSkipped): // a skip taken is never dropped
		l.skip("operator")
	case p.ctx.Err() != nil:
		return false
	}
	return true
}

// rewrite retries a failed dead-letter write until it is acknowledged. The
// partition shows as stuck at once, with the error, so an operator can skip
// the record; a write that can never succeed is settled by
// DeadLetterConfig.Unwritable. It returns false when the worker must stop.
func (p *partition[K, V]) rewrite(l *letter) bool {
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	defer p.clearStuck(l.at)
	w := p.c.dlq
	for !l.ok() {
		p.setStuck(stuck{offset: l.at, reason: StuckDeadLetter, attempts: l.tries, since: l.first, lastErr: l.cur.err, cancel: rcancel})
		p.c.stats.dlqWriteErrors.Add(1)
		never, now, err := w.failed(rctx, l)
		if never {
			if decided, ok := p.settleUnwritable(l, err); decided {
				return ok
			}
		}
		wait := w.nextWait(l)
		if now {
			wait = 0
		}
		p.log.error("dead-letter write failed; the partition waits and retries", l.src,
			"dlq_topic", l.tmpl.Topic, "attempt", l.tries, "wait", dur(wait), "never_succeeds", never, "err", err)
		if err := w.rewrite(rctx, l, wait); err != nil {
			if errors.Is(context.Cause(rctx), errSkipped) {
				l.skip("operator")
				return true
			}
			return false
		}
	}
	return true
}

// settleUnwritable applies DeadLetterConfig.Unwritable to l, whose write
// can never succeed: skip settles l as skipped (decided, ok), halt stops the
// consumer (decided, not ok); wait leaves it to the caller (not decided).
func (p *partition[K, V]) settleUnwritable(l *letter, err error) (decided, ok bool) {
	switch p.c.cfg.DeadLetter.Unwritable {
	case UnwritableSkip:
		l.skip("unwritable")
		return true, true
	case UnwritableHalt:
		p.log.error("halting: the dead letter can never be written", l.src, "dlq_topic", l.tmpl.Topic, "err", err)
		p.outcome(l.src, l.stage, l.class, OutcomeHalted)
		p.c.halt(&HaltError{Topic: l.src.Topic, Partition: l.src.Partition, Offset: l.src.Offset, Timestamp: l.src.Timestamp,
			Stage: string(l.stage), Err: fmt.Errorf("dead-letter write to %s: %w", l.tmpl.Topic, err)})
		return true, false
	}
	return false, true
}

// drain runs when the worker stops: it gives the letters in flight up to
// the write timeout to be acknowledged and marks the records settled before
// the first that was not, without retrying failures. Records after it stay
// unsettled and are redelivered.
func (p *partition[K, V]) drain() {
	defer p.log.summary()
	p.ledger.flush()
	grace := time.NewTimer(p.c.cfg.DeadLetter.WriteTimeout)
	defer grace.Stop()
	for {
		head := p.ledger.advance(p.letterDone)
		if head == nil {
			return
		}
		select {
		case <-head.cur.done:
			if head.failed() {
				return // not retried now
			}
		case <-grace.C:
			return
		}
	}
}

// letterDone counts and logs a letter that is settled: acknowledged, or
// skipped by an operator or by DeadLetterConfig.Unwritable.
func (p *partition[K, V]) letterDone(l *letter) {
	if l.clears != nil {
		p.c.attempts.clear(l.clears) // settled at last: its durable entry goes
	}
	switch {
	case l.skipped != "" && l.kind != kindDead:
		// A copy that may yet land kept its entry (letter.skip): it is
		// settled as skipped where it lands, and the later records of
		// its key wait for it there.
		if !l.kept {
			p.untrack(&origin{rec: l.src, keyed: true})
		}
	case l.kind == kindForward:
		p.outcome(l.src, l.stage, l.class, OutcomeForwarded)
		p.log.info("record forwarded to a retry tier", l.src, "stage", l.stage, "class", l.class, "retry_topic", l.tmpl.Topic, "attempts", l.attempts, "err", l.cause)
		return
	case l.kind == kindParked:
		p.c.stats.parked.Add(1)
		return
	}
	if l.skipped != "" {
		p.outcome(l.src, l.stage, l.class, OutcomeSkipped)
		msg := "record skipped: its dead letter was not written"
		if l.kept {
			msg = "record skipped while its copy was being written to a retry tier: should the copy land, it is not handled here"
		}
		p.log.warn(msg, l.src, "stage", l.stage, "why", l.skipped, "dlq_topic", l.tmpl.Topic, "err", l.cause)
		return
	}
	p.outcome(l.src, l.stage, l.class, OutcomeDeadLettered)
	p.log.warn("record dead-lettered", l.src, "stage", l.stage, "class", l.class, "reason", l.reason, "attempts", l.attempts, "err", l.cause)
}

// pause pauses the partition for an operator: its fetching, and its worker
// before the next record. It reports false if it was paused already.
func (p *partition[K, V]) pause() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.flow.operator {
		return false
	}
	p.resumed = make(chan struct{})
	p.opPaused.Store(true)
	p.flow.setOperator(true)
	return true
}

// resume ends an operator pause. It reports false if there was none.
func (p *partition[K, V]) resume() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.flow.operator {
		return false
	}
	p.flow.setOperator(false)
	p.opPaused.Store(false)
	close(p.resumed)
	return true
}

// waitResumed waits while an operator pauses the partition, after marking
// what is settled. It returns false when the worker must stop.
func (p *partition[K, V]) waitResumed() bool {
	if !p.opPaused.Load() {
		return true
	}
	p.flush()
	return p.awaitResumed()
}

// awaitResumed waits while an operator pauses the partition. Unlike
// waitResumed it marks nothing for commit, so that a shard may call it. It
// returns false when the worker must stop.
func (p *partition[K, V]) awaitResumed() bool {
	if !p.opPaused.Load() {
		return true
	}
	p.mu.Lock()
	ch := p.resumed
	paused := p.flow.operator
	p.mu.Unlock()
	if !paused {
		return true
	}
	select {
	case <-ch:
		return true
	case <-p.ctx.Done():
		return false
	}
}

// state describes the partition for Stats; committed is the group's
// committed offset, -1 if none.
func (p *partition[K, V]) state(committed int64) Partition {
	p.mu.Lock()
	defer p.mu.Unlock()
	s := Partition{Topic: p.topic, Partition: p.part, State: PartitionFlowing, Paused: p.flow.paused,
		BufferedRecords: p.flow.records, BufferedBytes: p.flow.bytes,
		HighWatermark: p.hwm, Committed: committed, Lag: -1}
	switch {
	case len(p.stuck) > 0:
		s.State = PartitionStuck
	case p.flow.paused != "":
		s.State = PartitionPaused
	case p.flow.blocking:
		s.State, s.Paused = PartitionPaused, PauseFull
	}
	if p.hwm >= 0 && committed >= 0 {
		s.Lag = max(p.hwm-committed, 0)
	}
	return s
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
//
// o.rec is the record as the handler sees it. In the exactly-once mode, the
// handler's outputs are left in o.out when it succeeds. A traced record's
// try is a part of its span.
func (p *partition[K, V]) try(ctx context.Context, o *origin, attempt int, first time.Time) (deadletter.Stage, error) {
	t := o.trace
	if t == nil {
		return p.tryOnce(ctx, o, attempt, first)
	}
	tctx := t.try(ctx, attempt)
	stage, err := p.tryOnce(tctx, o, attempt, first)
	t.endTry(tctx, stage, err)
	return stage, err
}

// tryOnce is try, untraced.
func (p *partition[K, V]) tryOnce(ctx context.Context, o *origin, attempt int, first time.Time) (stage deadletter.Stage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = failure.Permanent(&serde.PanicError{Stage: string(stage), Value: v})
		}
	}()
	c := p.c
	r, stage, err := p.decode(ctx, o.rec, attempt, first, o.tiers)
	if err != nil {
		return stage, err
	}
	if h := c.hooks; h != nil {
		start := time.Now()
		err = c.cfg.Handler(ctx, r)
		h.HandlerDone(HandlerEvent{PartitionEvent: PartitionEvent{p.topic, p.part}, Duration: time.Since(start), Err: err})
	} else {
		err = c.cfg.Handler(ctx, r)
	}
	if err == nil && r.out != nil {
		o.out = r.out
	}
	return stage, err
}

// decode decodes rec's key and value. It returns the stage reached (process
// when both are decoded) and the failure, if any. A panic in a deserializer
// becomes a permanent failure of its stage.
func (p *partition[K, V]) decode(ctx context.Context, rec *kgo.Record, attempt int, first time.Time, tier int) (r *Record[K, V], stage deadletter.Stage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = failure.Permanent(&serde.PanicError{Stage: string(stage), Value: v})
		}
	}()
	c := p.c
	r = &Record[K, V]{Raw: rec, Attempt: attempt, FirstFailure: first, Tier: tier, txn: c.txn != nil}
	m := serde.Meta{Topic: rec.Topic, Headers: headers(rec.Headers)}
	if c.cfg.Key != nil {
		stage = deadletter.StageDeserializeKey
		m.Part = serde.Key
		if r.Key, err = c.cfg.Key.Deserialize(ctx, m, rec.Key); err != nil {
			return nil, stage, err
		}
	}
	stage = deadletter.StageDeserializeValue
	m.Part = serde.Value
	if r.Value, err = c.cfg.Value.Deserialize(ctx, m, rec.Value); err != nil {
		return nil, stage, err
	}
	return r, deadletter.StageProcess, nil
}

// handle settles rec: processed, dead-lettered or skipped. It returns false
// when the worker must stop (partition revoked, consumer stopping, halt)
// with rec unsettled.
func (p *partition[K, V]) handle(rec *kgo.Record) bool {
	p.c.stats.consumed.Add(1)
	if p.skipped(rec.Offset) {
		return p.skipAgain(rec)
	}
	return p.route(rec)
}

// processNew processes a fetched record that went through no retry tier:
// the route of a consumer without retry topics.
func (p *partition[K, V]) processNew(rec *kgo.Record) bool {
	return p.process(rec, &origin{rec: rec}, 1, time.Time{})
}

// skipped reports whether an operator skipped offset before the worker
// started (skips).
func (p *partition[K, V]) skipped(offset int64) bool {
	m := p.skips.Load()
	return m != nil && (*m)[offset]
}

// skipAgain settles as skipped a record an operator skipped before the
// worker started: its skip was undone by an aborted transaction.
func (p *partition[K, V]) skipAgain(rec *kgo.Record) bool {
	o := &origin{rec: rec}
	if p.fam != nil && p.tier >= 0 && rec.Key != nil {
		if st, err := parseRetry(rec.Headers); err == nil {
			o = &origin{rec: st.original(rec), keyed: true}
		}
	}
	return p.skip(rec, o, deadletter.StageProcess, errSkipped, 0, "operator (again, after an aborted transaction)")
}

// origin is a record as the handler sees it: a fetched source record
// itself, or the original of a record read from a retry tier.
type origin struct {
	rec       *kgo.Record
	parkDelay time.Duration // a park waits this long in its tier (see lostBlockerDelay)
	tiers     int           // retry tiers it went through after failing; 0 at the source
	forwards  int           // forwards to a tier so far (HeaderRetryForwards)
	keyed     bool          // its family tracks it (per-key order): settling it must say so
	saved     bool          // it has a durable attempts entry
	lettered  bool          // a letter settles it, and clears its durable entry (letter.clears)
	out       []*kgo.Record // the handler's outputs (exactly-once mode)
	trace     *traced       // its span, with a Tracer (trace.go)
}

// process decodes and processes rec (o.rec as the handler sees it), then
// settles it. attempt and first come from the retry headers or the durable
// attempts.
func (p *partition[K, V]) process(rec *kgo.Record, o *origin, attempt int, first time.Time) bool {
	c := p.c
	var used *attemptEntry
	if r, ok := p.retries[rec.Offset]; ok && r.attempts >= attempt { // a record retrying before the restart
		switch {
		case r.used != nil && r.used.of(rec):
			used = &r
		case r.used != nil:
			// Another record's, at this offset of a topic created
			// again: it goes once rec is settled.
			o.saved = true
		default:
			attempt, first, o.saved = r.attempts+1, r.first, true
			p.log.info("record resumes its retries", rec, "attempts_so_far", r.attempts, "first_failure", r.first.UTC().Format(deadletter.TimeLayout))
		}
	}
	if p.startSpan(rec, o) {
		defer endSpan(o)
	}
	if used != nil {
		return p.letterAgain(rec, o, *used)
	}
	stage, err := p.try(p.ctx, o, attempt, first)
	if err == nil {
		err = p.outputFailed(rec)
	}
	if err == nil {
		p.processed(rec, o)
		if o.saved {
			c.attempts.clear(rec)
		}
		return p.settledOut(rec, o.out)
	}
	return p.settleFailure(rec, o, stage, err, attempt, first)
}

// settledInTier settles rec, whose current copy is in a retry tier already:
// a durable entry it has (saved when its partition moved while that copy
// was being written) goes with it.
func (p *partition[K, V]) settledInTier(rec *kgo.Record) bool {
	if _, ok := p.retries[rec.Offset]; ok {
		p.c.attempts.clear(rec)
	}
	return p.settled(rec)
}

// saveUnwritten gives a durable attempts entry to each record settled by a
// letter that had none (its letter followed its first try here; see
// letter.clearsAttempts) and that the next owner gets again: every letter
// of the ledger's pending (none of their records is marked for commit,
// acknowledged or not), and with lanes every letter in a slot not handed
// to the ledger. The next owner writes the letter again rather than try
// the record once more. The worker and its lanes have stopped, so what
// they held is the caller's.
func (p *partition[K, V]) saveUnwritten() {
	save := func(l *letter) {
		if l != nil && l.unsaved != nil && l.skipped == "" {
			p.c.attempts.saveUsed(l.unsaved, l)
		}
	}
	for _, h := range p.ledger.pending {
		save(h.l)
	}
	for _, s := range p.lanes.slots {
		if s.done {
			save(s.l)
		}
	}
}

// letterAgain settles rec by the letter that was being written when its
// partition moved: rec had used its tries (e.used; see DurableAttempts), so
// it is not tried again.
func (p *partition[K, V]) letterAgain(rec *kgo.Record, o *origin, e attemptEntry) bool {
	o.saved = true
	if !p.beforeWait() {
		return false
	}
	u := e.used
	p.log.info("record had used its tries when its partition moved: its letter is written again", rec,
		"stage", u.stage, "class", u.class, "attempts", e.attempts, "first_failure", e.first.UTC().Format(deadletter.TimeLayout))
	err := u.err()
	if u.reason == deadletter.ReasonOperator {
		f := newFailure(p.c.cfg.Group, o.rec, u.stage, u.class, u.reason, err, e.attempts, e.first)
		return p.operatorLetter(rec, o, f, u.class, err) // its message names the operator already
	}
	then, reason := ActionDeadLetter, u.reason
	switch {
	case u.forward && p.c.tiers != nil:
		then = ActionRetryTopic
	case u.forward:
		// No retry tiers here (any more): what the policy does once
		// retrying is over.
		then, reason = p.c.policy.outcome(u.stage, u.class).Then, deadletter.ReasonExhausted
	}
	ok := p.act(rec, o, u.stage, u.class, err, e.attempts, e.first, reason, then)
	if ok && !o.lettered {
		p.c.attempts.clear(rec) // settled without a letter (a skip): the entry goes
	}
	return ok
}

// processed counts a record the handler completed.
func (p *partition[K, V]) processed(rec *kgo.Record, o *origin) {
	o.trace.settledAs(OutcomeProcessed, "", 0, nil, 0)
	p.c.stats.processed.Add(1)
	p.untrack(o)
	p.floodAdd(false)
	if h := p.c.hooks; h != nil {
		h.RecordSettled(SettledEvent{PartitionEvent: PartitionEvent{p.topic, p.part}, Offset: rec.Offset, Outcome: OutcomeProcessed})
	}
}

// outcome counts a failed record's outcome: retried, dead-lettered, skipped
// or halted.
func (p *partition[K, V]) outcome(rec *kgo.Record, stage deadletter.Stage, class failure.Class, outcome Outcome) {
	p.c.stats.failure(stage, class, outcome)
	if h := p.c.hooks; h != nil && outcome != OutcomeRetried {
		h.RecordSettled(SettledEvent{PartitionEvent: PartitionEvent{p.topic, p.part}, Offset: rec.Offset, Outcome: outcome, Stage: stage, Class: class})
	}
}

// settled records that rec is settled without a dead letter. It returns
// false when the worker must stop.
func (p *partition[K, V]) settled(rec *kgo.Record) bool {
	return p.handoff(rec, nil, nil)
}

// settledOut records that rec is processed, with the handler's outputs
// (written in the open transaction in the exactly-once mode). It returns
// false when the worker must stop.
func (p *partition[K, V]) settledOut(rec *kgo.Record, out []*kgo.Record) bool {
	return p.handoff(rec, out, nil)
}

// recordAttrs are the attributes of every record-level log line.
func recordAttrs(r *kgo.Record) []any {
	return []any{"topic", r.Topic, "partition", r.Partition, "offset", r.Offset, "timestamp", r.Timestamp.UTC().Format(deadletter.TimeLayout)}
}

// dur logs a duration as text ("642ms"), not as nanoseconds.
func dur(d time.Duration) slog.Value { return slog.StringValue(d.String()) }
