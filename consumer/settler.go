package consumer

import "github.com/twmb/franz-go/pkg/kgo"

// settler records that a record of a partition is settled: what may be
// committed, and how. It is chosen once, when the partition is made:
//
//   - ledgerSettler: the commit ledger (ledger.go). Offsets are marked for
//     the client's commits, and never past a dead letter that is not
//     acknowledged yet.
//   - txnSettler: the transaction of the exactly-once mode (txn.go). The
//     handler's outputs, the dead letters and the offsets go out in one
//     transaction.
//
// Records reach it in offset order, on the partition's worker goroutine,
// which owns it with the partition's ledger and letters: with Concurrency,
// the lanes hand what they settle to the worker (lanes.go), and never touch
// either. Each method returns false when the worker must stop.
type settler interface {
	// start begins writing a letter, as soon as it is made: the commit
	// ledger writes it at once and goes on while it is in flight (the
	// offset moves past it once it is acknowledged); the transaction
	// writes it when its record is settled, in offset order. It is safe
	// to call from a lane.
	start(l *letter)
	// done records a record settled without a letter: processed (out are
	// its handler's outputs, in the exactly-once mode) or skipped.
	done(rec *kgo.Record, out []*kgo.Record) bool
	// letter records a record settled by a letter: a dead letter, or a
	// forward to a retry tier. l.at is rec's offset.
	letter(rec *kgo.Record, l *letter) bool
}

func newSettler[K, V any](p *partition[K, V]) settler {
	if p.c.txn != nil {
		return txnSettler[K, V]{p}
	}
	return ledgerSettler[K, V]{p}
}

// ledgerSettler settles into the commit ledger.
type ledgerSettler[K, V any] struct{ p *partition[K, V] }

func (s ledgerSettler[K, V]) start(l *letter) { s.p.c.dlq.send(s.p.ctx, l) }

func (s ledgerSettler[K, V]) done(rec *kgo.Record, _ []*kgo.Record) bool {
	if s.p.ledger.done(rec) {
		_, ok := s.p.reap()
		return ok
	}
	return true
}

// letter records a letter in flight; when too many are in flight, it waits
// for the oldest.
func (s ledgerSettler[K, V]) letter(rec *kgo.Record, l *letter) bool {
	p := s.p
	p.ledger.letter(rec, l)
	for {
		head, ok := p.reap()
		if !ok {
			return false
		}
		if head == nil || !p.ledger.full() {
			return true
		}
		if !p.awaitLetter(head, nil) {
			return false
		}
	}
}

// txnSettler settles into the open transaction.
type txnSettler[K, V any] struct{ p *partition[K, V] }

func (txnSettler[K, V]) start(*letter) {}

func (s txnSettler[K, V]) done(rec *kgo.Record, out []*kgo.Record) bool {
	p := s.p
	if !p.c.txn.settle(p.ctx, p.c.cl, p.c.dlq, rec, out, nil) {
		return false
	}
	p.ledger.done(rec) // flow control: the transaction marks it
	p.ledger.flush()
	return true
}

func (s txnSettler[K, V]) letter(rec *kgo.Record, l *letter) bool {
	return s.p.settleLetterTxn(rec, l)
}
