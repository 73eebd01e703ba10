package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/failure"
)

// ExactlyOnce turns on the exactly-once mode: the records a handler produces
// ([Record.Produce]), the dead letters and the commit of the offsets of the
// records they settle are written in one Kafka transaction. Consumers of the
// outputs that read with read_committed see each output once, whatever
// crashes: a transaction that does not commit is aborted, and its records are
// handled again from the last committed offset.
//
// A transaction is committed every MaxRecords settled records or every
// Interval, whichever comes first, when it holds anything. While it commits,
// the partitions finish the record they are handling but do not settle
// another (a commit takes a few round trips to the broker).
//
// The consumer reads with read_committed unless ClientOpts says otherwise.
// Not supported together (New fails, naming the fields): Concurrency.Max
// above 1, BatchHandler, RetryTopics. DurableAttempts are not kept in this
// mode: a record retried in place starts counting again after a restart.
//
// What is counted in [Stats] includes the work of aborted transactions:
// a record handled again after an abort is counted again.
type ExactlyOnce struct {
	// TransactionalID is this member's transactional id; setting it turns
	// the mode on. Each member of the group needs its own, and the same
	// one across restarts (a pod name, say): a member that starts with
	// the id of another fences it, and the older one stops with a
	// *HaltError.
	TransactionalID string
	// MaxRecords commits the transaction once it settles this many
	// records. Optional: 1000.
	MaxRecords int
	// Interval commits the transaction at least this often while it holds
	// anything. Optional: 100ms.
	Interval time.Duration
}

func (e ExactlyOnce) on() bool { return e.TransactionalID != "" }

func (e ExactlyOnce) withDefaults() ExactlyOnce {
	if e.MaxRecords == 0 {
		e.MaxRecords = 1000
	}
	if e.Interval == 0 {
		e.Interval = 100 * time.Millisecond
	}
	return e
}

func (c *Config[K, V]) validateExactlyOnce() error {
	e := c.ExactlyOnce
	if !e.on() {
		if e.MaxRecords != 0 || e.Interval != 0 {
			return configErr("ExactlyOnce.TransactionalID", "required when ExactlyOnce.MaxRecords or ExactlyOnce.Interval is set")
		}
		return nil
	}
	switch {
	case e.MaxRecords < 0:
		return configErr("ExactlyOnce.MaxRecords", "negative")
	case e.Interval < 0 || (e.Interval > 0 && e.Interval < 10*time.Millisecond):
		return configErr("ExactlyOnce.Interval", fmt.Sprintf("%v: must be at least 10ms", e.Interval))
	case c.Concurrency.Max > 1:
		return configErr("ExactlyOnce", "with Concurrency.Max more than 1: the two do not work together yet; choose one")
	case c.BatchHandler != nil:
		return configErr("ExactlyOnce", "with BatchHandler: the two do not work together yet; choose one")
	case c.RetryTopics.on():
		return configErr("ExactlyOnce", "with RetryTopics: the two do not work together yet; choose one")
	}
	return nil
}

// ErrNotTransactional is returned by [Record.Produce] when the consumer is
// not in the exactly-once mode.
var ErrNotTransactional = errors.New("consumer: Record.Produce needs Config.ExactlyOnce")

// Produce adds output records to the handler's result, in the exactly-once
// mode ([ExactlyOnce]): they are written if the handler returns nil, in the
// transaction that commits this record's offset, and dropped if it fails
// (a retry calls the handler again, which produces them again). Each needs a
// Topic; the partition is chosen by key, as franz-go's default partitioner
// does. Produce does not wait: the transaction's commit does.
//
// It returns ErrNotTransactional without ExactlyOnce, and an error for a
// record without a topic: the handler can return it, and the record fails.
func (r *Record[K, V]) Produce(recs ...*kgo.Record) error {
	if !r.txn {
		return ErrNotTransactional
	}
	for _, o := range recs {
		if o == nil || o.Topic == "" {
			return errNoTopic
		}
	}
	r.out = append(r.out, recs...)
	return nil
}

var errNoTopic = failure.Permanent(errors.New("consumer: Record.Produce: an output record has no topic"))

// txn runs the transactions of the exactly-once mode. Partition workers
// settle records through its gate; the poll goroutine commits.
type txn struct {
	sess *kgo.GroupTransactSession
	cfg  ExactlyOnce
	log  *slog.Logger

	gate gate

	mu      sync.Mutex
	marks   map[tp]kgo.EpochOffset // next offset to commit, per partition
	settled int                    // records settled in this transaction
	outputs int                    // records produced by handlers in it
	letters []*letter              // dead letters written in it
	failed  error                  // the first failed output write
	first   time.Time              // of the first settle in it; zero if none
	full    chan struct{}          // signalled when settled reaches MaxRecords

	committed, aborted uint64 // guarded by mu
}

func newTxn(cfg ExactlyOnce, log *slog.Logger) *txn {
	return &txn{cfg: cfg, log: log, marks: make(map[tp]kgo.EpochOffset), full: make(chan struct{}, 1)}
}

// mark records that rec is settled in this transaction. The caller is in
// the gate.
func (t *txn) mark(rec *kgo.Record) {
	t.mu.Lock()
	t.marks[tp{rec.Topic, rec.Partition}] = kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}
	if t.settled++; t.settled == 1 {
		t.first = time.Now()
	}
	if t.settled == t.cfg.MaxRecords {
		select {
		case t.full <- struct{}{}:
		default:
		}
	}
	t.mu.Unlock()
}

// produce writes a handler's output in this transaction. The caller is in
// the gate.
func (t *txn) produce(cl *kgo.Client, r *kgo.Record) {
	t.mu.Lock()
	t.outputs++
	t.mu.Unlock()
	cl.Produce(context.Background(), r, t.promise)
}

func (t *txn) promise(r *kgo.Record, err error) {
	if err == nil {
		return
	}
	t.mu.Lock()
	if t.failed == nil {
		t.failed = fmt.Errorf("output to %s: %w", r.Topic, err)
	}
	t.mu.Unlock()
}

// letter records a dead letter written in this transaction. The caller is
// in the gate.
func (t *txn) letter(l *letter) {
	t.mu.Lock()
	t.letters = append(t.letters, l)
	t.mu.Unlock()
}

// due returns when the open transaction is due for a commit: Interval after
// its first settle, or Interval from now while it holds nothing.
func (t *txn) due() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.first.IsZero() {
		return time.Now().Add(t.cfg.Interval)
	}
	return t.first.Add(t.cfg.Interval)
}

// rewrite is the kgo.PreTxnCommitFnContext of a commit: franz-go commits
// what was polled, the transaction commits what it settled. Partitions
// with nothing settled are left out.
func (t *txn) rewrite(marks map[tp]kgo.EpochOffset) func(*kmsg.TxnOffsetCommitRequest) error {
	return func(req *kmsg.TxnOffsetCommitRequest) error {
		seen := make(map[tp]bool, len(marks))
		topics := req.Topics[:0]
		for _, rt := range req.Topics {
			parts := rt.Partitions[:0]
			for _, rp := range rt.Partitions {
				k := tp{rt.Topic, rp.Partition}
				if eo, ok := marks[k]; ok {
					rp.Offset, rp.LeaderEpoch = eo.Offset, eo.Epoch
					parts = append(parts, rp)
					seen[k] = true
				}
			}
			if rt.Partitions = parts; len(parts) > 0 {
				topics = append(topics, rt)
			}
		}
		req.Topics = topics
		for k := range marks {
			if !seen[k] {
				// Settled but not polled since the last commit cannot
				// happen: a record is settled after its poll.
				return fmt.Errorf("transaction: %s/%d settled but not in the commit", k.topic, k.partition)
			}
		}
		return nil
	}
}

// commit ends the open transaction (a commit, or an abort when a write in
// it failed) and begins the next. It runs on the poll goroutine with the
// gate closed. It reports whether the transaction was aborted, in which case
// the caller must drop every record it holds: the client goes back to the
// committed offsets. A fatal error (the producer was fenced) is returned.
func (t *txn) commit(ctx context.Context, cl *kgo.Client, timeout time.Duration) (aborted bool, err error) {
	t.mu.Lock()
	empty := t.settled == 0 && t.outputs == 0 && len(t.letters) == 0
	t.mu.Unlock()
	if empty {
		return false, nil
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	ferr := cl.Flush(fctx)
	cancel()
	t.mu.Lock()
	why := t.failed
	for _, l := range t.letters {
		if why == nil && l.isDone() && l.cur.err != nil {
			why = fmt.Errorf("dead letter to %s: %w", l.tmpl.Topic, l.cur.err)
		}
	}
	if why == nil && ferr != nil {
		why = fmt.Errorf("flush: %w", ferr)
	}
	marks := t.marks
	settled := t.settled
	t.mu.Unlock()

	try := kgo.TryCommit
	if why != nil {
		try = kgo.TryAbort
	}
	// End must not be canceled mid-way: it gets its own bound, not ctx.
	ectx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	committed, err := t.sess.End(kgo.PreTxnCommitFnContext(ectx, t.rewrite(marks)), try)
	cancel()
	t.mu.Lock()
	t.marks = make(map[tp]kgo.EpochOffset, len(marks))
	t.settled, t.outputs, t.letters, t.failed, t.first = 0, 0, nil, nil, time.Time{}
	if committed {
		t.committed++
	} else {
		t.aborted++
	}
	t.mu.Unlock()
	select { // a signal of the transaction just ended
	case <-t.full:
	default:
	}
	if !committed {
		if why == nil && err == nil {
			why = errors.New("the group rebalanced, or the offsets could not be committed")
		}
		t.log.Warn("transaction aborted: its records are handled again from the committed offsets", "records", settled, "why", why, "err", err)
	}
	if err != nil && fatalTxn(err) {
		return !committed, err
	}
	if berr := t.sess.Begin(); berr != nil {
		return !committed, berr
	}
	return !committed, nil
}

// fatalTxn reports whether a transaction error means this member can no
// longer write: another member took its transactional id, or it is not
// authorized.
func fatalTxn(err error) bool {
	for _, e := range []error{kerr.ProducerFenced, kerr.InvalidProducerEpoch, kerr.TransactionalIDAuthorizationFailed,
		kerr.ClusterAuthorizationFailed, kerr.InvalidTransactionTimeout} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// gate keeps the partition workers out while a transaction commits: a
// worker settles a record (writes its outputs and dead letter, marks its
// offset) inside the gate, and the commit waits for those inside, so that a
// commit covers every record whose writes it flushed and none other.
type gate struct {
	mu     sync.Mutex
	inside int
	closed chan struct{} // non-nil while a commit runs, closed when it ends
	empty  chan struct{} // closed when the last worker leaves a closed gate
}

// enter waits while the gate is closed. It returns false when ctx ends
// first (the partition is revoked or the consumer stops).
func (g *gate) enter(ctx context.Context) bool {
	for {
		g.mu.Lock()
		if g.closed == nil {
			g.inside++
			g.mu.Unlock()
			return true
		}
		ch := g.closed
		g.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

func (g *gate) leave() {
	g.mu.Lock()
	if g.inside--; g.inside == 0 && g.empty != nil {
		close(g.empty)
		g.empty = nil
	}
	g.mu.Unlock()
}

// close closes the gate and waits until nobody is inside.
func (g *gate) close() {
	g.mu.Lock()
	g.closed = make(chan struct{})
	if g.inside == 0 {
		g.mu.Unlock()
		return
	}
	g.empty = make(chan struct{})
	ch := g.empty
	g.mu.Unlock()
	<-ch
}

func (g *gate) open() {
	g.mu.Lock()
	close(g.closed)
	g.closed = nil
	g.mu.Unlock()
}

// pollContext is the context of one wait of the poll loop: ctx, and in the
// exactly-once mode ended when the open transaction is due.
func (c *Consumer[K, V]) pollContext(ctx context.Context) (context.Context, context.CancelFunc) {
	t := c.txn
	if t == nil {
		return ctx, func() {}
	}
	wctx, cancel := context.WithDeadline(ctx, t.due())
	go func() {
		select {
		case <-t.full:
			cancel()
		case <-wctx.Done():
		}
	}()
	return wctx, cancel
}

// commitDue commits the open transaction when it is due: MaxRecords
// settled, or Interval since its first settle.
func (c *Consumer[K, V]) commitDue(ctx context.Context) {
	t := c.txn
	if t == nil {
		return
	}
	t.mu.Lock()
	due := t.settled >= t.cfg.MaxRecords || (!t.first.IsZero() && !time.Now().Before(t.first.Add(t.cfg.Interval)))
	t.mu.Unlock()
	if due {
		c.commitTxn(ctx)
	}
}

// commitTxn commits the open transaction, with the workers out of the gate.
// After an abort, every worker is stopped before the gate opens again: the
// records they hold are fetched again from the committed offsets.
func (c *Consumer[K, V]) commitTxn(ctx context.Context) {
	t := c.txn
	t.gate.close()
	defer t.gate.open()
	aborted, err := t.commit(ctx, c.cl, c.cfg.DeadLetter.WriteTimeout)
	if aborted {
		c.stopAll()
	}
	if err != nil {
		c.halt(txnHalt(err))
	}
}

// stopAll stops every partition worker: what they hold stays unsettled.
func (c *Consumer[K, V]) stopAll() {
	c.mu.Lock()
	m := make(map[string][]int32)
	for k := range c.parts {
		m[k.topic] = append(m[k.topic], k.partition)
	}
	c.mu.Unlock()
	c.stopPartitions(m)
}

func txnHalt(err error) *HaltError {
	return &HaltError{Stage: "transaction", Err: fmt.Errorf("the transactions cannot go on: %w", err)}
}

// settledOut settles a processed record with the handler's outputs, which
// are written in the open transaction (exactly-once mode); without it, it is
// settled.
func (p *partition[K, V]) settledOut(rec *kgo.Record, out []*kgo.Record) bool {
	t := p.c.txn
	if t == nil {
		return p.settled(rec)
	}
	if !t.gate.enter(p.ctx) {
		return false
	}
	for _, r := range out {
		t.produce(p.c.cl, r)
	}
	p.ledger.done(rec)
	p.ledger.flush() // marked now: the next commit covers it
	t.gate.leave()
	return true
}

// settleLetterTxn settles rec by its dead letter l in the open transaction:
// the commit checks that it was written, and aborts otherwise. A letter that
// cannot be produced at all (its topic is not ready, it is too large) waits
// and is tried again, outside the gate, or is settled by
// DeadLetterConfig.Unwritable, as without transactions.
func (p *partition[K, V]) settleLetterTxn(rec *kgo.Record, l *letter) bool {
	c, t, w := p.c, p.c.txn, p.c.dlq
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	defer p.clearStuck(l.at)
	for {
		if !t.gate.enter(p.ctx) {
			return false
		}
		w.send(p.ctx, l)
		if !l.failed() { // in flight, or written: the commit checks it
			t.letter(l)
			p.ledger.done(rec)
			p.ledger.flush()
			t.gate.leave()
			p.letterDone(l)
			return true
		}
		t.gate.leave()
		err := l.cur.err
		c.stats.dlqWriteErrors.Add(1)
		p.setStuck(stuck{offset: l.at, reason: StuckDeadLetter, attempts: l.tries, since: l.first, lastErr: err, cancel: rcancel})
		never := unwritable(err)
		if never {
			switch c.cfg.DeadLetter.Unwritable {
			case UnwritableSkip:
				l.skipped = "unwritable"
				p.letterDone(l)
				return p.settled(rec)
			case UnwritableHalt:
				p.log.error("halting: the dead letter can never be written", l.src, "dlq_topic", l.tmpl.Topic, "err", err)
				p.outcome(l.src, l.stage, l.class, OutcomeHalted)
				c.halt(&HaltError{Topic: l.src.Topic, Partition: l.src.Partition, Offset: l.src.Offset, Timestamp: l.src.Timestamp,
					Stage: string(l.stage), Err: fmt.Errorf("dead-letter write to %s: %w", l.tmpl.Topic, err)})
				return false
			}
		}
		wait := w.nextWait(l)
		p.log.error("dead-letter write failed; the partition waits and retries", l.src,
			"dlq_topic", l.tmpl.Topic, "attempt", l.tries, "wait", dur(wait), "never_succeeds", never, "err", err)
		if sleep(rctx, wait, nil) != nil {
			if errors.Is(context.Cause(rctx), errSkipped) {
				l.skipped = "operator"
				p.letterDone(l)
				return p.settled(rec)
			}
			return false
		}
	}
}
