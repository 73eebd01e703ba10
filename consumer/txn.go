package consumer

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/antidote-kafka/antidote/backoff"
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
// Interval, whichever comes first, when it holds anything. A commit takes a
// few round trips to the broker; the partitions do not wait for it: what
// they settle meanwhile is written in the next transaction. Outputs become
// visible to read_committed readers when their transaction commits, so
// Interval is also about the delay they see.
//
// With [RetryTopics], the forwards to the tiers are written in the
// transactions too, and after an abort the per-key order is rebuilt from the
// tiers, as at assignment.
//
// The consumer reads with read_committed unless ClientOpts says otherwise,
// and Config.CommitInterval is not used: offsets are committed only in the
// transactions (not on revoke either: a rebalance aborts the open one).
// It combines with [Concurrency] and with a [BatchHandler]: records settled
// out of order by the lanes are written in offset order, so a transaction
// never commits the outputs of a record past one that is not settled.
// DurableAttempts are not kept in this mode: a record retried in place
// starts counting again after a restart.
//
// A write that fails aborts its transaction, and its records are handled
// again. A record whose write fails in 3 transactions in a row is settled by
// its policy: an output's failure is a permanent failure of the record, a
// dead letter's goes to DeadLetterConfig.Unwritable. Such aborts wait a
// little longer each time (up to 5s). While the cluster cannot be reached,
// writes fail and their transaction is aborted; an abort the cluster does not
// confirm is tried again until it does, and the consumer goes on by itself
// from the committed offsets (nothing of an aborted transaction is seen);
// the next transaction is begun again while the cluster cannot give a
// producer id, for up to a minute, then the consumer halts. Stopped
// meanwhile, it stops cleanly. A commit whose outcome is unknown (the
// cluster went away between the flush and the end of the transaction, or
// answered the end with an unknown server error) may have committed: the
// consumer loads its producer id again, which ends the transaction if it is
// still open, waiting until the cluster answers; then it goes on from the
// group's committed offsets as the broker holds them (stable ones: a
// pending commit is waited for), so that the records are handled again only
// if it did not commit. It reads them after any abort of a commit attempt
// whose offsets were sent (a rebalance, say). An end the cluster refuses
// for good (not authorized, say) halts the consumer. An abort also waits
// for every write sent in its transaction: one to a dead-letter or retry
// topic deleted meanwhile ends once the consumer has created the topic
// again (with DeadLetterConfig.DisableTopicCreation, once an operator has).
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
	// records. Optional: 10,000. While a commit runs, this many records
	// settled meanwhile can wait for the next transaction; then the
	// partitions wait for the commit.
	MaxRecords int
	// Interval commits the transaction at least this often while it holds
	// anything. Optional: 100ms.
	Interval time.Duration
}

func (e ExactlyOnce) on() bool { return e.TransactionalID != "" }

func (e ExactlyOnce) withDefaults() ExactlyOnce {
	if e.MaxRecords == 0 {
		e.MaxRecords = 10000
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
// settle records through it (settle); the poll goroutine commits. Workers
// never wait for a commit: what they settle while one runs is queued, and
// written in the next transaction once it begins.
type txn struct {
	sess *kgo.GroupTransactSession
	cfg  ExactlyOnce
	log  *slog.Logger
	// onCommit, when set, is told the offsets of each transaction that
	// committed (Consumer.pruneSkips). Called on the poll goroutine, with
	// no lock held.
	onCommit func(marks map[tp]kgo.EpochOffset)
	// hooks, when set, is told each transaction's end (TransactionEnded).
	hooks Hooks

	mu sync.Mutex
	// The open transaction.
	marks   map[tp]kgo.EpochOffset // next offset to commit, per partition
	settled int                    // records settled in it
	letters []sentLetter           // dead letters written in it
	failed  map[srcKey]error       // its writes that failed, by the record they settle
	// recreated are the topics of its outputs that failed for an old topic
	// id: deleted and created again since the client learned of them.
	recreated map[string]struct{}
	// writerTopic reports whether the dead-letter writer writes to a
	// topic (a dead-letter topic or retry tier): forgetting it is the
	// writer's (forgetRecreated).
	writerTopic func(topic string) bool
	// failedBefore are the writes that failed in aborted transactions, by
	// the record they settle, with how many transactions in a row they
	// failed; a record's entry goes when a transaction commits past it.
	failedBefore map[srcKey]failedWrite
	abortsInRow  int           // transactions in a row aborted by a failed write
	first        time.Time     // of its first settle; zero if none
	full         chan struct{} // signalled when settled reaches MaxRecords

	// While a commit runs: what is settled meanwhile, for the next one.
	committing bool
	inside     int           // workers writing into the open transaction
	empty      chan struct{} // closed when the last of them is done
	queue      []queued
	next       map[tp]kgo.EpochOffset
	reopened   chan struct{} // closed when the commit is over

	committed, aborted uint64

	// group is whose committed offsets rewind reads.
	group string
	// known are the committed offsets rewind read, of the partitions of
	// an aborted commit attempt: where it committed after all (its end
	// was not confirmed), franz-go's view of them is from before it, and
	// an abort goes back to that view. Each is set
	// again after every abort until a transaction commits the partition
	// (franz-go's view is right again) or it is revoked, lost or assigned
	// (franz-go reads the broker's offsets then). Under mu: the revoke
	// callbacks run while a commit does.
	known map[tp]kgo.EpochOffset
	// gone are the partitions revoked or lost since the commit began,
	// and goneTopics the topics consumed afresh: rewind does not read
	// them, nor keep what it read of them.
	gone       map[tp]bool
	goneTopics map[string]bool
	// abortNext: a partition was revoked or lost while a commit ran that
	// then committed, and records of it settled meanwhile are in the next
	// transaction (its marks and queued outputs, of records the next owner
	// handles again). franz-go aborts the transaction after a revoke, but
	// forgets a revoke that comes as its End returns (it resets its flag
	// after letting the callbacks in): the next transaction is aborted
	// here. Under mu.
	abortNext bool

	checked time.Time // the last fence check (checkFenced); the poll goroutine's
}

// fenceCheckEvery is how often an exactly-once consumer with nothing to
// write asks the transaction coordinator whether another member took its
// transactional id. A member learns that it is fenced when it writes or ends
// a transaction; one with nothing to write (its partitions went to the member
// that fenced it) would otherwise stay in the group for ever, unnoticed.
const fenceCheckEvery = 2 * time.Second

// queued is a record settled while a commit ran, with its writes.
type queued struct {
	src srcKey
	out []*kgo.Record
	l   *letter
}

// srcKey names a fetched record.
type srcKey struct {
	tp
	offset int64
}

func keyOf(r *kgo.Record) srcKey { return srcKey{tp{r.Topic, r.Partition}, r.Offset} }

// sentLetter is a letter written in the open transaction, and the record it
// settles.
type sentLetter struct {
	l   *letter
	src srcKey
}

// failedWrite is a write that failed in aborted transactions.
type failedWrite struct {
	err   error
	times int
}

// writeFailures is how many transactions in a row a record's write may fail
// (each aborted, the record handled again) before the failure goes to the
// record's policy: a batch the broker rejected once is written again, one
// that can never be written is dead-lettered.
const writeFailures = 3

// maxFailedBefore bounds failedBefore (writes of records that may never come
// back to this member).
const maxFailedBefore = 1000

func newTxn(cfg ExactlyOnce, log *slog.Logger) *txn {
	return &txn{cfg: cfg, log: log, marks: make(map[tp]kgo.EpochOffset), next: make(map[tp]kgo.EpochOffset), full: make(chan struct{}, 1),
		failed: make(map[srcKey]error), failedBefore: make(map[srcKey]failedWrite), gone: make(map[tp]bool), goneTopics: make(map[string]bool)}
}

// settle writes the outputs and the dead letter (either may be absent) of a
// settled record in the open transaction and marks its offset for the
// transaction's commit. While a commit runs, they are queued for the next
// transaction instead; when MaxRecords are queued, settle waits for the
// commit. It returns false when ctx ends first.
func (t *txn) settle(ctx context.Context, cl *kgo.Client, w *dlqWriter, rec *kgo.Record, out []*kgo.Record, l *letter) bool {
	for {
		t.mu.Lock()
		if !t.committing {
			t.inside++
			t.mu.Unlock()
			t.write(ctx, cl, w, keyOf(rec), out, l)
			t.mu.Lock()
			t.markLocked(rec, false)
			if t.inside--; t.inside == 0 && t.empty != nil {
				close(t.empty)
				t.empty = nil
			}
			t.mu.Unlock()
			return true
		}
		if len(t.queue) < t.cfg.MaxRecords {
			t.queue = append(t.queue, queued{src: keyOf(rec), out: out, l: l})
			t.markLocked(rec, true)
			t.mu.Unlock()
			return true
		}
		ch := t.reopened
		t.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return false
		}
	}
}

// write produces outputs and a letter in the open transaction.
func (t *txn) write(ctx context.Context, cl *kgo.Client, w *dlqWriter, src srcKey, out []*kgo.Record, l *letter) {
	for _, r := range out {
		// The write's own deadline: the client has no delivery timeout,
		// which franz-go would count from the output's timestamp.
		octx, cancel := context.WithTimeout(context.Background(), w.timeout)
		cl.Produce(octx, r, func(r *kgo.Record, err error) {
			cancel()
			if err != nil && !errors.Is(err, kgo.ErrAborting) { // aborting: not the record's failure
				var recreated string
				if errors.Is(err, kerr.UnknownTopicID) {
					recreated = r.Topic
				}
				t.writeFailed(src, fmt.Errorf("output to %s: %w", r.Topic, err), recreated)
			}
		})
	}
	if l != nil {
		w.send(ctx, l)
		t.mu.Lock()
		t.letters = append(t.letters, sentLetter{l, src})
		t.mu.Unlock()
	}
}

// writeFailed records a failed output of the open transaction, and its
// topic (recreated) when it failed for an old id of the topic: the topic
// was deleted and created again.
func (t *txn) writeFailed(src srcKey, err error, recreated string) {
	t.mu.Lock()
	if _, ok := t.failed[src]; !ok {
		t.failed[src] = err
	}
	if recreated != "" {
		if t.recreated == nil {
			t.recreated = map[string]struct{}{}
		}
		t.recreated[recreated] = struct{}{}
	}
	t.mu.Unlock()
}

// failedWrite returns the error of a write of rec that failed in
// writeFailures aborted transactions in a row: rec is settled again, and its
// policy decides (an output failure fails the record like its handler would,
// see outputFailure; a letter goes through DeadLetterConfig.Unwritable).
// Before that, it returns nil: the write is tried again.
func (t *txn) failedWrite(rec *kgo.Record) error {
	if t == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.failedBefore) == 0 {
		return nil
	}
	k := keyOf(rec)
	f, ok := t.failedBefore[k]
	if !ok || f.times < writeFailures {
		return nil
	}
	delete(t.failedBefore, k)
	return f.err
}

// outputFailure is the failure of a record one of whose outputs could not
// be written in writeFailures transactions in a row: permanent, since
// trying it again in place would only write it in a transaction again.
func outputFailure(err error) error {
	return failure.Permanent(fmt.Errorf("consumer: an output of this record could not be written in %d transactions: %w", writeFailures, err))
}

// markLocked marks rec for the commit of the open transaction, or of the
// next one (queued), which counts it when it begins (end).
func (t *txn) markLocked(rec *kgo.Record, queued bool) {
	eo := kgo.EpochOffset{Epoch: rec.LeaderEpoch, Offset: rec.Offset + 1}
	if queued {
		t.next[tp{rec.Topic, rec.Partition}] = eo
		return
	}
	t.marks[tp{rec.Topic, rec.Partition}] = eo
	t.counted(1)
}

// counted counts n records settled in the open transaction.
func (t *txn) counted(n int) {
	if t.settled == 0 && n > 0 {
		t.first = time.Now()
	}
	before := t.settled
	t.settled += n
	if before < t.cfg.MaxRecords && t.settled >= t.cfg.MaxRecords {
		select {
		case t.full <- struct{}{}:
		default:
		}
	}
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

// isDue reports whether the open transaction is due: MaxRecords settled, or
// Interval since its first settle.
func (t *txn) isDue() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.settled >= t.cfg.MaxRecords || (!t.first.IsZero() && !time.Now().Before(t.first.Add(t.cfg.Interval)))
}

// errNotAssigned fails the offset commit of a transaction that settled
// records of a partition revoked meanwhile: franz-go then aborts it.
var errNotAssigned = errors.New("transaction: records settled of a partition no longer assigned")

// nextHoldsGone reports whether what was settled during the commit, for
// the next transaction, holds a record of a partition revoked or lost
// since the commit began. t.mu is held.
func (t *txn) nextHoldsGone() bool {
	for k := range t.next {
		if t.gone[k] {
			return true
		}
	}
	for _, q := range t.queue {
		if t.gone[q.src.tp] {
			return true
		}
	}
	return false
}

// errRevokedInCommit is why a transaction is aborted after a partition was
// revoked or lost during the commit before it (txn.abortNext).
var errRevokedInCommit = errors.New("a partition was revoked or lost while the last transaction committed: the records settled meanwhile are handled again")

// rewrite is the kgo.PreTxnCommitFnContext of a commit: franz-go commits
// what was polled, the transaction commits what it settled. Partitions
// with nothing settled are left out. sent says that the offsets went out.
func (t *txn) rewrite(marks map[tp]kgo.EpochOffset, sent *atomic.Bool) func(*kmsg.TxnOffsetCommitRequest) error {
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
				// A record is settled after its poll, so this is a
				// partition revoked meanwhile: the session aborts.
				return fmt.Errorf("%w: %s/%d", errNotAssigned, k.topic, k.partition)
			}
		}
		sent.Store(true)
		return nil
	}
}

// begin starts a commit: what is settled from now on is queued. It waits
// for the workers writing into the open transaction.
func (t *txn) begin() {
	t.mu.Lock()
	t.committing = true
	clear(t.gone) // from now on: the commit's rewind reads what it sent
	clear(t.goneTopics)
	t.reopened = make(chan struct{})
	if t.inside == 0 {
		t.mu.Unlock()
		return
	}
	t.empty = make(chan struct{})
	ch := t.empty
	t.mu.Unlock()
	<-ch
}

// end ends a commit: the queued writes go into the transaction just begun
// (dropped after an abort, whose records are handled again), and workers
// write into it directly again.
func (t *txn) end(ctx context.Context, cl *kgo.Client, w *dlqWriter, drop bool) {
	for {
		t.mu.Lock()
		q := t.queue
		t.queue = nil
		if drop {
			q = nil
		}
		if len(q) == 0 {
			if !drop {
				for k, eo := range t.next {
					t.marks[k] = eo
				}
			}
			clear(t.next)
			t.committing = false
			close(t.reopened)
			t.mu.Unlock()
			return
		}
		t.counted(len(q))
		t.mu.Unlock()
		for _, e := range q {
			t.write(ctx, cl, w, e.src, e.out, e.l)
		}
	}
}

// commit ends the open transaction (a commit, or an abort when a write in
// it failed) and begins the next. It runs on the poll goroutine between
// begin and end. It reports whether the transaction was aborted, in which
// case the caller must drop every record it holds: the client goes back to
// the committed offsets. A fatal error (the producer was fenced) is returned.
//
// An abort whose end the cluster did not confirm (it is unreachable) is
// tried again until it is, or until ctx ends: nothing of an aborted
// transaction can have been committed, so the consumer goes on from the
// committed offsets once the cluster answers. A commit whose end is not
// confirmed may have committed: it is aborted likewise; after it, and after
// any other abort of a commit attempt whose offsets went out, the consumer
// goes on from the group's committed offsets as the broker holds them
// (rewind). Any other error of the end is returned: a halt.
func (t *txn) commit(ctx context.Context, cl *kgo.Client, timeout time.Duration) (aborted bool, err error) {
	t.mu.Lock()
	empty := t.settled == 0 && len(t.letters) == 0 && len(t.failed) == 0
	t.mu.Unlock()
	if empty {
		t.mu.Lock()
		t.abortNext = false // nothing of a revoked partition waits in it
		t.mu.Unlock()
		return false, nil
	}
	// Not ended by ctx: a commit that has begun finishes, even when the
	// consumer stops (its last commit follows).
	fctx, cancel := context.WithTimeout(context.Background(), timeout)
	ferr := cl.Flush(fctx)
	cancel()
	t.mu.Lock()
	var changed, stuck []*letter
	for _, sl := range t.letters {
		l := sl.l
		if !l.isDone() {
			stuck = append(stuck, l)
			continue
		}
		if l.cur.err != nil {
			if _, ok := t.failed[sl.src]; !ok {
				t.failed[sl.src] = fmt.Errorf("dead letter to %s: %w", l.tmpl.Topic, l.cur.err)
			}
			if topicChanged(l.cur.err) {
				changed = append(changed, l)
			}
		}
	}
	var why error
	for _, err := range t.failed {
		why = err
		break
	}
	if why == nil && t.abortNext {
		why = errRevokedInCommit
	}
	t.abortNext = false
	if why == nil && ferr != nil {
		why = fmt.Errorf("flush: %w", ferr)
	}
	marks, settled := t.marks, t.settled
	recreated := slices.Sorted(maps.Keys(t.recreated))
	t.recreated = nil
	t.mu.Unlock()
	for _, l := range changed {
		// Its topic is checked again before the next transaction
		// writes to it, and forgotten by the client if this write
		// failed for an old id (dlqWriter.changed): while nothing of
		// the next transaction is written to it yet.
		l.w.changed(l.src.Topic, l.tmpl.Topic, l.cur.err, l.cur)
	}
	// A letter the flush could not end may be to a topic deleted
	// meanwhile: franz-go retries a batch it sent, unsure whether it was
	// written, until the topic is back, and no abort ends before it. Its
	// topic is checked now, and created again if it is missing, and so
	// before each try of an unconfirmed abort: franz-go gives the batch
	// up once it sees the new topic's id.
	topics := letterTopics(stuck)
	ensureLetterTopics(ctx, t.log, timeout, topics)

	try := kgo.TryCommit
	if why != nil {
		try = kgo.TryAbort
	}
	// End must not be canceled mid-way: it gets its own bound, not ctx.
	ectx, cancel := context.WithTimeout(context.Background(), 2*timeout)
	var sent atomic.Bool
	committed, err := t.sess.End(kgo.PreTxnCommitFnContext(ectx, t.rewrite(marks, &sent)), try)
	cancel()
	if err != nil && !committed && offsetsRefused(err) {
		// The broker refused the offsets of a partition whose topic is
		// gone (a retry tier deleted, say): franz-go then ended the
		// transaction as an abort, and returns the refusal only when
		// that abort succeeded. Its records are handled again from the
		// committed offsets, as after any abort.
		if why == nil {
			why = err
		}
		err = nil
	}
	if err != nil && !committed && recreatedInTxn(err) && t.epochPerTxn(cl, timeout) {
		// franz-go aborted the transaction, since a topic it wrote to
		// was deleted and created again. The abort ended the producer
		// epoch: the records are handled again, and their writes to the
		// topic, failed for its old id, make the client forget it.
		if why == nil {
			why = err
		}
		err = nil
	}
	if err != nil && try == kgo.TryAbort && !fatalTxn(err) {
		err = t.abortUntilDone(ctx, timeout, err, topics)
	}
	if err != nil && try == kgo.TryCommit && !committed && !fatalTxn(err) && !errors.Is(err, errNotAssigned) && outcomeUnknown(err) {
		// The commit's end is not known (the cluster did not answer):
		// it may have committed. Aborting again loads the producer id
		// anew, which ends the epoch and with it the transaction, if
		// it is still open; then the group's offsets on the broker say
		// which it was (below).
		t.log.Warn("the end of a transaction was not confirmed: it is aborted with a new producer epoch, and the consumer goes on from the group's committed offsets",
			"records", settled, "err", err)
		if why == nil {
			why = err
		}
		err = t.abortUntilDone(ctx, timeout, err, topics)
	}
	if err == nil && try == kgo.TryCommit && !committed && sent.Load() {
		// A commit whose offsets went out ended as an abort: an
		// unconfirmed end (above), or one franz-go could not confirm
		// and reports as a plain abort (an UNKNOWN_SERVER_ERROR of the
		// EndTxn, which the broker may have carried out). The broker's
		// offsets decide, and the records go on from there: handled
		// again if it aborted, not if it committed.
		err = t.rewind(ctx, cl, timeout, marks)
	}
	var halt error
	if err == nil && !committed && len(recreated) > 0 {
		halt = t.forgetRecreated(cl, recreated, timeout)
	}
	t.mu.Lock()
	t.marks = make(map[tp]kgo.EpochOffset, len(marks))
	writeAbort := !committed && len(t.failed) > 0
	t.abortNext = committed && t.nextHoldsGone()
	switch {
	case writeAbort:
		t.abortsInRow++
		for k, err := range t.failed {
			if f, ok := t.failedBefore[k]; ok || len(t.failedBefore) < maxFailedBefore {
				t.failedBefore[k] = failedWrite{err: err, times: f.times + 1}
			}
		}
	case committed:
		t.abortsInRow = 0
		for k := range marks {
			delete(t.known, k) // franz-go's view of it is right again
		}
		for k := range t.failedBefore {
			if eo, ok := marks[k.tp]; ok && eo.Offset > k.offset {
				delete(t.failedBefore, k) // written at last, or settled by its policy
			}
		}
	}
	clear(t.failed)
	aborts := t.abortsInRow
	t.settled, t.letters, t.first = 0, nil, time.Time{}
	if committed {
		t.committed++
	} else {
		t.aborted++
	}
	t.mu.Unlock()
	if committed && t.onCommit != nil {
		t.onCommit(marks)
	}
	if !committed && (err == nil || errors.Is(err, errNotAssigned)) {
		// franz-go went back to its view of the committed offsets,
		// which is from before a transaction whose end was not
		// confirmed: the offsets rewind read are the broker's.
		t.setKnown(cl)
	}
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
	if t.hooks != nil {
		ev := TransactionEvent{Committed: committed, Records: settled}
		if !committed {
			ev.Err = why
			if why == nil {
				ev.Err = err
			}
		}
		t.hooks.TransactionEnded(ev)
	}
	if writeAbort {
		// A write failed: the next try waits a little more each time, so
		// that a failure the broker repeats is not a hot loop.
		time.Sleep(min(time.Duration(1<<min(aborts-1, 6))*100*time.Millisecond, 5*time.Second))
	}
	if halt != nil {
		return !committed, halt
	}
	if err != nil && !errors.Is(err, errNotAssigned) {
		// An error the cluster will repeat (franz-go: "odds are you
		// should not continue"), or the end of an unconfirmed commit
		// could not be made sure of: a restart reads the group's
		// offsets from the broker.
		return !committed, fmt.Errorf("ending a transaction: %w", err)
	}
	if berr := t.beginUntilDone(ctx); berr != nil {
		return !committed, berr
	}
	return !committed, nil
}

// beginUntilDone begins the next transaction. franz-go refuses to begin
// while it cannot load a producer id; when the cause is the network (a
// broker down behind a proxy or load balancer accepts the connection and
// closes it at once) it keeps the load to be tried again, and so does this:
// a little later each time, for up to beginPatience, then the refusal is
// returned (a halt: a restart starts with a new client). A refusal by the
// cluster (fenced, not authorized) is returned at once. When ctx ends
// meanwhile (the consumer stops), errStopping is returned.
func (t *txn) beginUntilDone(ctx context.Context) error {
	start := time.Now()
	for attempt := 1; ; attempt++ {
		err := t.sess.Begin()
		if err == nil || !unreachable(err) {
			return err
		}
		if ctx.Err() != nil {
			return errStopping
		}
		if time.Since(start) >= beginPatience {
			return err
		}
		wait := min(time.Duration(attempt)*time.Second, 10*time.Second)
		t.log.Warn("a transaction cannot begin: no producer id, the cluster seems unreachable; trying again",
			"attempt", attempt, "wait", wait.String(), "err", err)
		if backoff.Sleep(ctx, wait) != nil {
			return errStopping
		}
	}
}

// beginPatience is how long beginUntilDone tries to begin a transaction
// while the cluster seems unreachable.
const beginPatience = time.Minute

// errStopping is returned by beginUntilDone and abortUntilDone when the
// consumer stops while the cluster is unreachable: not a halt.
var errStopping = errors.New("consumer: stopping while the cluster is unreachable")

// unreachable reports whether err says only that the cluster could not be
// reached: a network error, with no answer of a broker in it.
func unreachable(err error) bool {
	if _, ok := errors.AsType[*kerr.Error](err); ok {
		return false
	}
	if _, ok := errors.AsType[*kgo.ErrFirstReadEOF](err); ok {
		return true
	}
	if _, ok := errors.AsType[*net.OpError](err); ok {
		return true
	}
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, context.DeadlineExceeded)
}

// abortUntilDone ends, as an abort, a transaction whose abort was not
// confirmed (err), waiting a little longer each time, until the cluster
// confirms it, the error is fatal, or ctx ends (errStopping). franz-go aborts an
// unconfirmed end by loading the producer id again, which fences whatever
// is still open of it at the broker. Before each try, the topics of the
// letters the commit's flush could not end are checked, and created again
// if missing (ensureLetterTopics): an abort waits for every batch sent, and
// one sent to a deleted topic ends only when the topic is back.
func (t *txn) abortUntilDone(ctx context.Context, timeout time.Duration, err error, topics []letterTopic) error {
	for attempt := 1; ; attempt++ {
		wait := min(time.Duration(attempt)*time.Second, 10*time.Second)
		t.log.Warn("aborting a transaction: the cluster did not confirm it; trying again", "attempt", attempt, "wait", wait.String(), "err", err)
		if backoff.Sleep(ctx, wait) != nil {
			// Stopping: the transaction is left to the coordinator's
			// timeout, or to the next owner's producer id, which fences
			// it. The next owner reads the group's offsets.
			return errStopping
		}
		ensureLetterTopics(ctx, t.log, timeout, topics)
		ectx, cancel := context.WithTimeout(context.Background(), 2*timeout)
		_, err = t.sess.End(ectx, kgo.TryAbort)
		cancel()
		if err == nil || fatalTxn(err) {
			return err
		}
	}
}

// letterTopic is a dead-letter or retry topic a letter of a transaction
// was written to, with its writer and source topic.
type letterTopic struct {
	w             *dlqWriter
	source, topic string
}

// letterTopics returns the distinct topics of ls.
func letterTopics(ls []*letter) []letterTopic {
	var out []letterTopic
	for _, l := range ls {
		lt := letterTopic{l.w, l.src.Topic, l.tmpl.Topic}
		if !slices.Contains(out, lt) {
			out = append(out, lt)
		}
	}
	return out
}

// ensureLetterTopics checks the topics of letters a commit's flush could
// not end, and creates the missing ones (dlqWriter.ensure), within
// 2×timeout in all. A topic whose client must forget it (stale) is left to
// the next write: forgetting it would fail the batch, and could leave the
// transaction's partitions of it out of the abort. A failure is logged,
// and the next try checks again.
func ensureLetterTopics(ctx context.Context, log *slog.Logger, timeout time.Duration, topics []letterTopic) {
	if len(topics) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 2*timeout)
	defer cancel()
	for _, lt := range topics {
		if !lt.w.recheckStuck(lt.topic) {
			continue
		}
		n, err := lt.w.sourcePartitions(ctx, lt.source)
		if err == nil {
			err = lt.w.ensure(ctx, lt.source, lt.topic, n)
		}
		if err != nil {
			log.Warn("a letter of a transaction waits for its topic, which cannot be checked or created: the transaction cannot end before it",
				"topic", lt.topic, "err", err)
		}
	}
}

// rewind reads the group's committed offsets of the partitions of an
// aborted commit attempt whose offsets went out (marks) from the broker,
// once that transaction is ended, and keeps them (known) for the client's
// positions (setKnown): they say whether it committed. The transaction is
// ended first: franz-go's abort of an unconfirmed end (abortUntilDone) only
// marks the producer id to be loaded again, and the load, which ends the
// epoch and the transaction with it, is waited for here. The offsets are
// asked for by partition with RequireStable, so that a commit still pending
// makes the broker answer UNSTABLE_OFFSET_COMMIT, not "none": rewind asks
// again until every answer is stable, or ctx ends (errStopping). A refusal
// the broker will repeat (not authorized) is returned: a halt. Partitions
// revoked or lost since the commit began, or whose topic is consumed
// afresh, are left out (gone).
func (t *txn) rewind(ctx context.Context, cl *kgo.Client, timeout time.Duration, marks map[tp]kgo.EpochOffset) error {
	for attempt := 1; ; attempt++ {
		if ctx.Err() != nil {
			return errStopping // the client closes: the next owner reads the offsets
		}
		t.mu.Lock()
		parts := make([]tp, 0, len(marks))
		for k := range marks {
			if !t.gone[k] && !t.goneTopics[k.topic] {
				parts = append(parts, k)
			}
		}
		t.mu.Unlock()
		if len(parts) == 0 {
			return nil
		}
		got, err := t.readCommitted(ctx, cl, timeout, parts)
		if err == nil {
			t.mu.Lock()
			for k, eo := range got {
				switch {
				case t.gone[k] || t.goneTopics[k.topic]:
				case eo.Offset < 0:
					// No commit, or the topic is gone: franz-go's
					// view says so too, or it is consumed afresh.
					delete(t.known, k)
				default:
					if t.known == nil {
						t.known = make(map[tp]kgo.EpochOffset)
					}
					t.known[k] = eo
				}
			}
			t.mu.Unlock()
			t.log.Debug("positions go to the group's committed offsets after an aborted commit", "partitions", len(parts))
			return nil
		}
		if fatalTxn(err) || !outcomeUnknown(err) && !errors.Is(err, kerr.UnstableOffsetCommit) {
			return fmt.Errorf("reading the group's committed offsets after an aborted commit: %w", err)
		}
		// A commit pending ends within a few round trips: asked again
		// soon, and at a steady pace.
		wait := min(time.Duration(attempt)*250*time.Millisecond, time.Second)
		t.log.Warn("the group's committed offsets cannot be read yet; trying again", "attempt", attempt, "wait", wait.String(), "err", err)
		if backoff.Sleep(ctx, wait) != nil {
			return errStopping
		}
	}
}

// readCommitted ends the epoch of a transaction whose end was not
// confirmed (loading the producer id again), then reads the group's
// committed offsets of parts (-1: none, or the topic was deleted: it has
// no records to handle again).
func (t *txn) readCommitted(ctx context.Context, cl *kgo.Client, timeout time.Duration, parts []tp) (map[tp]kgo.EpochOffset, error) {
	pctx, cancel := context.WithTimeout(ctx, timeout)
	_, _, err := cl.ProducerID(pctx)
	cancel()
	if err != nil {
		return nil, err
	}
	req := kmsg.NewPtrOffsetFetchRequest()
	req.Group, req.RequireStable = t.group, true
	byTopic := map[string][]int32{}
	for _, k := range parts {
		byTopic[k.topic] = append(byTopic[k.topic], k.partition)
	}
	for topic, ps := range byTopic {
		rt := kmsg.NewOffsetFetchRequestTopic()
		rt.Topic, rt.Partitions = topic, ps
		req.Topics = append(req.Topics, rt)
	}
	fctx, cancel := context.WithTimeout(ctx, timeout)
	resp, err := req.RequestWith(fctx, cl)
	cancel()
	if err != nil {
		return nil, err
	}
	type answer struct {
		offset int64
		epoch  int32
		code   int16
	}
	answers := map[tp]answer{}
	code := resp.ErrorCode
	for _, rt := range resp.Topics {
		for _, rp := range rt.Partitions {
			answers[tp{rt.Topic, rp.Partition}] = answer{rp.Offset, rp.LeaderEpoch, rp.ErrorCode}
		}
	}
	for _, g := range resp.Groups { // v8 and up
		if g.ErrorCode != 0 {
			code = g.ErrorCode
		}
		for _, rt := range g.Topics {
			for _, rp := range rt.Partitions {
				answers[tp{rt.Topic, rp.Partition}] = answer{rp.Offset, rp.LeaderEpoch, rp.ErrorCode}
			}
		}
	}
	if err := kerr.ErrorForCode(code); err != nil {
		return nil, err
	}
	got := make(map[tp]kgo.EpochOffset, len(parts))
	var unnamed []string // topics not answered by name
	for _, k := range parts {
		a, ok := answers[k]
		err := kerr.ErrorForCode(a.code)
		switch {
		case !ok || errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition):
			// From Kafka 4.2 the answer names topics by id, which the
			// client cannot name if it does not know the id: the topic
			// was deleted, or the client's metadata is behind.
			unnamed = append(unnamed, k.topic)
		case err != nil:
			return nil, fmt.Errorf("%s/%d: %w", k.topic, k.partition, err)
		default:
			got[k] = kgo.EpochOffset{Epoch: a.epoch, Offset: a.offset}
		}
	}
	if len(unnamed) > 0 {
		// Deleted, per the cluster asked now (not the client's cached
		// metadata): no records to handle again (a topic created again
		// is consumed afresh, and left out then). Otherwise asked again.
		mreq := kmsg.NewPtrMetadataRequest()
		for _, topic := range unnamed {
			rt := kmsg.NewMetadataRequestTopic()
			rt.Topic = kmsg.StringPtr(topic)
			mreq.Topics = append(mreq.Topics, rt)
		}
		mctx, cancel := context.WithTimeout(ctx, timeout)
		md, err := mreq.RequestWith(mctx, cl)
		cancel()
		if err != nil {
			return nil, err
		}
		deleted := map[string]bool{}
		for _, mt := range md.Topics {
			if mt.Topic != nil && mt.ErrorCode == kerr.UnknownTopicOrPartition.Code {
				deleted[*mt.Topic] = true
			}
		}
		for _, k := range parts {
			if _, ok := got[k]; ok {
				continue
			}
			if !deleted[k.topic] {
				return nil, fmt.Errorf("%s/%d: not answered by name: %w", k.topic, k.partition, kerr.UnknownTopicID)
			}
			got[k] = kgo.EpochOffset{Epoch: -1, Offset: -1}
		}
	}
	return got, nil
}

// outcomeUnknown reports whether err, from ending a transaction or reading
// the group's offsets, leaves the outcome unknown: the cluster did not
// answer, or answered with an error kerr calls retriable. Any other answer
// (not authorized, a fenced instance id; and the ones franz-go keeps as its
// producer id's error, which no reload clears) halts as before.
func outcomeUnknown(err error) bool {
	if unreachable(err) || errors.Is(err, kerr.UnknownServerError) { // unreachable: a deadline too
		return true
	}
	if ke, ok := errors.AsType[*kerr.Error](err); ok {
		return ke.Retriable
	}
	return true // not the broker's answer: the client's own (gave up retrying, say)
}

// setKnown sets the client's positions of the partitions rewind read to
// the offsets it read. SetOffsets skips a partition not consumed.
func (t *txn) setKnown(cl *kgo.Client) {
	t.mu.Lock()
	if len(t.known) == 0 {
		t.mu.Unlock()
		return
	}
	m := make(map[string]map[int32]kgo.EpochOffset)
	for k, eo := range t.known {
		if m[k.topic] == nil {
			m[k.topic] = make(map[int32]kgo.EpochOffset)
		}
		m[k.topic][k.partition] = eo
	}
	t.mu.Unlock()
	cl.SetOffsets(m)
}

// forgetKnown drops what rewind read of partitions revoked or lost (gone)
// or assigned: their next owner, or this member assigned them again, starts
// from the offsets franz-go reads from the broker then. Partitions revoked
// or lost while a commit runs are not read by its rewind.
func (t *txn) forgetKnown(parts map[string][]int32, gone bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range parts {
		for _, p := range ps {
			delete(t.known, tp{topic, p})
			if gone {
				t.gone[tp{topic, p}] = true
			}
		}
	}
}

// forgetKnownTopic drops what rewind read of a topic consumed afresh
// (deleted and created again): its offsets were the old topic's.
func (t *txn) forgetKnownTopic(topic string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.goneTopics[topic] = true
	for k := range t.known {
		if k.topic == topic {
			delete(t.known, k)
		}
	}
}

// offsetsRefused reports whether err, from ending a transaction, is the
// broker's refusal of a partition's offsets because its topic is unknown:
// an error of the offsets' commit (TxnOffsetCommit), which franz-go returns
// only once the abort that follows it succeeded. Not franz-go's own error
// for a topic the transaction produced to that was created again
// (TransactionAbortable, with UNKNOWN_TOPIC_ID): see recreatedInTxn.
func offsetsRefused(err error) bool {
	return (errors.Is(err, kerr.UnknownTopicID) || errors.Is(err, kerr.UnknownTopicOrPartition)) &&
		!errors.Is(err, kerr.TransactionAbortable)
}

// recreatedInTxn reports whether err, from ending a transaction, is
// franz-go's refusal to commit a transaction that wrote to a topic deleted
// and created again since: it aborted the transaction instead.
func recreatedInTxn(err error) bool {
	return errors.Is(err, kerr.TransactionAbortable) && errors.Is(err, kerr.UnknownTopicID)
}

// forgetRecreated makes the client forget output topics that were deleted
// and created again, once the transaction whose outputs to them failed for
// the old ids is aborted: the next one writes to the new topics. Forgetting
// a topic starts its sequence numbers again; that is safe only when the
// abort ended the producer epoch (transaction.version 2, KIP-890). Before,
// an output that reached the new topic by name in the aborted transaction
// holds the sequence numbers the next writes would start with, and the
// broker would take them for duplicates and drop them: the consumer halts
// instead, and a restart begins with a new epoch.
//
// A dead-letter topic or retry tier that is also an output is left to the
// dead-letter writer, which forgets a topic only while nothing is written
// to it (dlqWriter.ensure): forgetting it here too would reset the sequence
// numbers of its writes to the new topic.
func (t *txn) forgetRecreated(cl *kgo.Client, topics []string, timeout time.Duration) error {
	topics = slices.DeleteFunc(topics, func(topic string) bool { return t.writerTopic != nil && t.writerTopic(topic) })
	if len(topics) == 0 {
		return nil
	}
	if !t.epochPerTxn(cl, timeout) {
		return fmt.Errorf("output topics %v were deleted and created again, and the transactions keep the producer epoch "+
			"(transaction.version below 2, or a MaxVersions cap below its requests): the client cannot forget the old topics safely; a restart begins with a new epoch", topics)
	}
	t.log.Warn("output topics were deleted and created again: the client writes to them afresh", "topics", topics)
	cl.PurgeTopicsFromProducing(topics...)
	return nil
}

// epochPerTxn reports whether the client's transactions end with a new
// producer epoch: the cluster's finalized transaction.version is 2 or more
// (KIP-890), and the client's MaxVersions, if any, allow the requests that
// franz-go needs for it (Produce 12, EndTxn 5, TxnOffsetCommit 5; franz-go
// decides the same way). The cluster is asked each time a topic was created
// again under the transactions, which is rare: the answer is not kept. An
// unanswered question counts as no.
func (t *txn) epochPerTxn(cl *kgo.Client, timeout time.Duration) bool {
	if mv, _ := cl.OptValue(kgo.MaxVersions).(*kversion.Versions); mv != nil {
		for key, need := range map[int16]int16{int16(kmsg.Produce): 12, int16(kmsg.EndTxn): 5, int16(kmsg.TxnOffsetCommit): 5} {
			if v, ok := mv.LookupMaxKeyVersion(key); !ok || v < need {
				return false
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "antidote", "1"
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		t.log.Warn("the cluster's transaction version is unknown", "err", err)
		return false
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "transaction.version" {
			return f.MaxVersionLevel >= 2
		}
	}
	return false
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

// beginTxns loads the producer id, which fences an earlier process with the
// same transactional id and aborts its open transaction at once, and begins
// the first transaction. It retries until runCtx ends while the cluster
// cannot be reached; a fatal error (fenced, not authorized) halts.
func (c *Consumer[K, V]) beginTxns(runCtx context.Context) {
	for attempt := 1; ; attempt++ {
		pctx, cancel := context.WithTimeout(runCtx, 2*c.cfg.DeadLetter.WriteTimeout)
		_, _, err := c.cl.ProducerID(pctx)
		cancel()
		if err == nil {
			if err = c.txn.beginUntilDone(runCtx); err != nil && !errors.Is(err, errStopping) {
				c.halt(txnHalt(err))
			}
			return
		}
		if runCtx.Err() != nil {
			return
		}
		if fatalTxn(err) {
			c.halt(txnHalt(err))
			return
		}
		c.log.Warn("transactions cannot begin yet; retrying", "attempt", attempt, "err", err)
		if backoff.Sleep(runCtx, min(time.Duration(attempt)*time.Second, 10*time.Second)) != nil {
			return
		}
	}
}

// commitDue commits the open transaction when it is due; while it holds
// nothing, it checks now and then that this member is not fenced.
func (c *Consumer[K, V]) commitDue(ctx context.Context) {
	t := c.txn
	if t == nil {
		return
	}
	if t.isDue() {
		c.commitTxn(ctx)
		return
	}
	c.checkFenced(ctx)
}

// checkFenced halts the consumer when the transaction coordinator holds
// another producer (or a later epoch) for its transactional id: another
// member started with the same id and fenced this one. It runs on the poll
// goroutine, at most every fenceCheckEvery, while the open transaction holds
// nothing (one that holds records learns it at its end).
func (c *Consumer[K, V]) checkFenced(ctx context.Context) {
	t := c.txn
	if time.Since(t.checked) < fenceCheckEvery {
		return
	}
	t.mu.Lock()
	idle := t.settled == 0 && !t.committing
	t.mu.Unlock()
	if !idle {
		return
	}
	t.checked = time.Now()
	ctx, cancel := context.WithTimeout(ctx, c.cfg.DeadLetter.WriteTimeout)
	defer cancel()
	id, epoch, err := c.cl.ProducerID(ctx)
	if err != nil {
		if fatalTxn(err) {
			c.halt(txnHalt(err))
		}
		return
	}
	described, err := c.dlq.adm.DescribeTransactions(ctx, t.cfg.TransactionalID)
	if err != nil {
		return // checked again later
	}
	d, ok := described[t.cfg.TransactionalID]
	if !ok || d.Err != nil {
		return
	}
	if d.ProducerID != id || d.ProducerEpoch > epoch {
		c.log.Error("another member took this member's transactional id: halting", "transactional_id", t.cfg.TransactionalID,
			"producer_id", id, "epoch", epoch, "coordinator_producer_id", d.ProducerID, "coordinator_epoch", d.ProducerEpoch)
		c.halt(txnHalt(fmt.Errorf("fenced while idle: the coordinator holds producer %d epoch %d, this member %d epoch %d: %w",
			d.ProducerID, d.ProducerEpoch, id, epoch, kerr.ProducerFenced)))
	}
}

// commitTxn commits the open transaction. After an abort, every worker is
// stopped, and what they settled meanwhile dropped: the records they hold
// are fetched again from the committed offsets.
func (c *Consumer[K, V]) commitTxn(ctx context.Context) {
	t := c.txn
	t.begin()
	aborted, err := t.commit(c.runCtx, c.cl, c.cfg.DeadLetter.WriteTimeout)
	if aborted {
		c.stopAll()
		c.floors.aborted() // the client goes back to the committed offsets
		if c.tiers != nil {
			c.tiers.reset(c.runCtx, c.log.Info)
		}
	}
	t.end(ctx, c.cl, c.dlq, aborted || err != nil)
	if err != nil && !errors.Is(err, errStopping) {
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

// outputFailed is the failure of rec when one of its outputs could not be
// written in an aborted transaction (see txn.failedWrite), nil otherwise.
func (p *partition[K, V]) outputFailed(rec *kgo.Record) error {
	if err := p.c.txn.failedWrite(rec); err != nil {
		return outputFailure(err)
	}
	return nil
}

// settleLetterTxn settles rec by its dead letter l in the open transaction:
// the commit checks that it was written, and aborts otherwise. A letter that
// cannot be written yet (its topic is not ready, it is too large) waits and
// is checked again, or is settled by DeadLetterConfig.Unwritable, as without
// transactions.
func (p *partition[K, V]) settleLetterTxn(rec *kgo.Record, l *letter) bool {
	c, w := p.c, p.c.dlq
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	defer p.clearStuck(l.at)
	err := c.txn.failedWrite(rec) // this letter failed in an aborted transaction
	for tries := 1; ; tries++ {
		if err == nil {
			err = w.writable(p.ctx, l)
		}
		if err == nil {
			if !c.txn.settle(p.ctx, c.cl, w, rec, nil, l) {
				return false
			}
			p.ledger.done(rec)
			p.ledger.flush()
			p.letterDone(l)
			return true
		}
		c.stats.dlqWriteErrors.Add(1)
		if topicChanged(err) {
			// Decided on the topic as it is now, not as it was cached:
			// an operator may have fixed it. Checked again only: the
			// error is of a write of an earlier transaction, or of a
			// check, never of this letter's write, so it says nothing
			// of the ids this client holds now (the commit that saw a
			// write fail decided that, see txn.commit). Marking the
			// topic stale here would make the client forget it after
			// another letter of this transaction went to the new topic,
			// and the broker would take the next letter for a
			// duplicate of that one and drop it.
			w.recheck(l.src.Topic, l.tmpl.Topic)
			if err = w.writable(p.ctx, l); err == nil {
				continue
			}
		}
		p.setStuck(stuck{offset: l.at, reason: StuckDeadLetter, attempts: tries, since: l.f.Last, lastErr: err, cancel: rcancel})
		never := unwritable(err)
		if never {
			if decided, ok := p.settleUnwritable(l, err); decided {
				if !ok {
					return false
				}
				p.letterDone(l) // skipped
				// On the worker, already the settler: not the handoff,
				// which with lanes would look for a slot taken already.
				return p.settler.done(rec, nil)
			}
		}
		var wait time.Duration
		if !(tooLarge(err) && l.shrink()) { // smaller now: check again at once
			var ok bool
			if wait, ok = backoff.Next(w.retry, tries, 0, err); !ok {
				wait = time.Second
			}
		}
		p.log.error("dead letter cannot be written; the partition waits and checks again", l.src,
			"dlq_topic", l.tmpl.Topic, "attempt", tries, "wait", dur(wait), "never_succeeds", never, "err", err)
		if sleep(rctx, wait, nil) != nil {
			if errors.Is(context.Cause(rctx), errSkipped) {
				l.skip("operator")
				p.letterDone(l)
				return p.settler.done(rec, nil)
			}
			return false
		}
		err = nil // check again
	}
}
