package consumer

import (
	"errors"
	"math/rand/v2"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestLedgerMarksBeforeAFailedLetter: when the oldest letter is acknowledged
// and a later one failed, advance marks every record settled before the
// failed letter, and releases them, before it hands the failed letter back
// to be rewritten (a wait that can be long). (Before: reap marked only when
// it returned, after the rewrite, so a crash during a long rewrite
// redelivered records that were settled.)
func TestLedgerMarksBeforeAFailedLetter(t *testing.T) {
	var marked []int64
	released := 0
	g := ledger{
		mark:    func(r *kgo.Record) { marked = append(marked, r.Offset) },
		release: func(n int, _ int64) { released += n },
	}
	rec := func(o int64) *kgo.Record { return &kgo.Record{Offset: o, Value: []byte("v")} }
	inFlight := func() *letter { return &letter{cur: &write{done: make(chan struct{})}} }

	g.done(rec(0))
	a := inFlight()
	g.letter(rec(1), a)
	g.done(rec(2))
	g.done(rec(3))
	b := inFlight()
	g.letter(rec(4), b)
	g.done(rec(5))
	// Released: offset 0, and 2 and 3 (settled without a letter, released
	// before the next letter); 5 waits for a flush.
	if len(marked) != 1 || marked[0] != 0 || released != 3 {
		t.Fatalf("before any letter is acknowledged: marked %v, released %d; want offset 0 marked, 3 released", marked, released)
	}

	var settledLetters []*letter
	if head := g.advance(func(l *letter) { settledLetters = append(settledLetters, l) }); head != a {
		t.Fatal("advance passed a letter still in flight")
	}
	close(a.cur.done) // acknowledged
	b.cur.err = errors.New("MESSAGE_TOO_LARGE")
	close(b.cur.done) // failed

	head := g.advance(func(l *letter) { settledLetters = append(settledLetters, l) })
	if head != b || !head.failed() {
		t.Fatal("advance did not stop at the failed letter")
	}
	if got := marked[len(marked)-1]; got != 3 || released != 4 || len(settledLetters) != 1 || settledLetters[0] != a {
		t.Fatalf("after the first letter was acknowledged: last mark %d, released %d, settled letters %d; want 3, 4 and the acknowledged letter", got, released, len(settledLetters))
	}
	// The failed letter is rewritten and acknowledged: the rest follows.
	b.cur = &write{done: make(chan struct{})}
	close(b.cur.done)
	head = g.advance(func(*letter) {})
	g.flush()
	if head != nil || marked[len(marked)-1] != 5 || released != 6 || !g.empty() {
		t.Fatalf("after the rewrite: head %v, last mark %d, released %d; want everything marked", head, marked[len(marked)-1], released)
	}
}

// ledgerProbe is a ledger whose marks and releases are recorded.
type ledgerProbe struct {
	g        ledger
	marked   int64 // the highest offset marked; -1 before any
	marks    int
	released int
	bytes    int64
}

func newLedgerProbe(t *testing.T) *ledgerProbe {
	pr := &ledgerProbe{marked: -1}
	pr.g = ledger{
		mark: func(r *kgo.Record) {
			if r.Topic != "t" || r.Partition != 3 {
				t.Fatalf("marked %s/%d, want t/3", r.Topic, r.Partition)
			}
			if r.Offset < pr.marked {
				t.Fatalf("marked offset %d after %d: marks go back", r.Offset, pr.marked)
			}
			pr.marked = r.Offset
			pr.marks++
		},
		release: func(n int, sz int64) { pr.released += n; pr.bytes += sz },
	}
	return pr
}

func ledgerRec(o int64) *kgo.Record {
	return &kgo.Record{Topic: "t", Partition: 3, Offset: o, LeaderEpoch: 7, Value: []byte("0123456789")}
}

func inFlightLetter() *letter { return &letter{cur: &write{done: make(chan struct{})}} }

// TestLedgerReleasesBehindALetter: records settled behind a dead letter in
// flight go back to flow control at once (every markBatch, and at flush),
// so that a slow acknowledgement does not fill the partition's buffer; but
// none of them is marked for commit before the letter is acknowledged. The
// dead-lettered record itself stays held until then.
func TestLedgerReleasesBehindALetter(t *testing.T) {
	pr := newLedgerProbe(t)
	g := &pr.g
	g.done(ledgerRec(0))
	l := inFlightLetter()
	g.letter(ledgerRec(1), l) // marks and releases offset 0
	reaps := 0
	const behind = 10 * markBatch
	for o := int64(2); o < 2+behind; o++ {
		if g.done(ledgerRec(o)) {
			reaps++
		}
	}
	if pr.marked != 0 {
		t.Fatalf("marked offset %d with the letter at offset 1 in flight", pr.marked)
	}
	if pr.released != 1+behind || pr.bytes != 10*(1+behind) {
		t.Fatalf("released %d records (%d bytes) behind the letter in flight, want %d (%d)", pr.released, pr.bytes, 1+behind, 10*(1+behind))
	}
	if reaps != behind/markBatch {
		t.Fatalf("done asked to reap %d times for %d records behind a letter, want %d", reaps, behind, behind/markBatch)
	}
	g.done(ledgerRec(2 + behind)) // not a full batch: released at flush
	if g.flush(); pr.released != 2+behind || pr.marked != 0 {
		t.Fatalf("after flush: released %d, marked %d; want %d and still 0", pr.released, pr.marked, 2+behind)
	}
	if head := g.advance(func(*letter) { t.Fatal("settled a letter in flight") }); head != l {
		t.Fatal("advance passed the letter in flight")
	}
	close(l.cur.done) // acknowledged
	settled := 0
	if head := g.advance(func(*letter) { settled++ }); head != nil || !g.empty() {
		t.Fatal("advance kept the acknowledged letter")
	}
	if pr.marked != 2+behind || settled != 1 || pr.released != 3+behind {
		t.Fatalf("after the acknowledgement: marked %d, settled %d letters, released %d; want %d, 1, %d", pr.marked, settled, pr.released, 2+behind, 3+behind)
	}
}

// TestLedgerBound: what pending keeps is bounded by the letters in flight
// (maxInflight, then full), however many records are settled behind them.
func TestLedgerBound(t *testing.T) {
	pr := newLedgerProbe(t)
	g := &pr.g
	o := int64(0)
	for i := 0; i < maxInflight; i++ {
		if g.full() {
			t.Fatalf("full with %d letters in flight, want full at %d", i, maxInflight)
		}
		g.letter(ledgerRec(o), inFlightLetter())
		o++
		for range 4000 {
			g.done(ledgerRec(o))
			o++
		}
	}
	if !g.full() {
		t.Fatalf("not full with %d letters in flight", maxInflight)
	}
	if len(g.pending) != maxInflight || cap(g.pending) > 2*maxInflight {
		t.Fatalf("pending holds %d entries (capacity %d) for %d letters and %d records behind them", len(g.pending), cap(g.pending), maxInflight, o-maxInflight)
	}
	g.flush()
	if held := int(o) - pr.released; held != maxInflight || pr.marked != -1 {
		t.Fatalf("%d records held and offset %d marked; want the %d letters held, nothing marked", held, pr.marked, maxInflight)
	}
}

// TestLedgerNeverCommitsPastALetter drives the ledger with a seeded random
// mix of processed records, dead letters, acknowledgements in any order,
// reaps and flushes, and checks after every step that the highest offset
// marked for commit is below the oldest letter not yet acknowledged, and
// that what is held is exactly the letters not yet taken off plus the
// records not yet flushed.
func TestLedgerNeverCommitsPastALetter(t *testing.T) {
	for seed := uint64(1); seed <= 20; seed++ {
		rng := rand.New(rand.NewPCG(seed, 0))
		pr := newLedgerProbe(t)
		g := &pr.g
		type sent struct {
			l   *letter
			off int64
		}
		var open []sent // letters not acknowledged, in any order
		var all []sent  // every letter, in offset order
		next := int64(0)
		for step := 0; step < 20000; step++ {
			switch r := rng.IntN(100); {
			case r < 70:
				g.done(ledgerRec(next))
				next++
			case r < 80 && !g.full():
				l := inFlightLetter()
				g.letter(ledgerRec(next), l)
				open = append(open, sent{l, next})
				all = append(all, sent{l, next})
				next++
			case r < 90 && len(open) > 0:
				i := rng.IntN(len(open))
				close(open[i].l.cur.done)
				open = append(open[:i], open[i+1:]...)
			case r < 97:
				g.advance(func(*letter) {})
			default:
				g.flush()
			}
			oldest := next // the oldest letter not acknowledged
			for _, s := range open {
				oldest = min(oldest, s.off)
			}
			if pr.marked >= oldest {
				t.Fatalf("seed %d step %d: marked offset %d, past the letter at %d in flight", seed, step, pr.marked, oldest)
			}
			inPending := len(g.pending)
			if held := int(next) - pr.released; held != inPending+g.freedN {
				t.Fatalf("seed %d step %d: %d records held, want %d letters in pending + %d unflushed", seed, step, held, inPending, g.freedN)
			}
		}
		for _, s := range open {
			close(s.l.cur.done)
		}
		g.done(ledgerRec(next))
		next++
		g.advance(func(*letter) {})
		g.flush()
		if pr.marked != next-1 || pr.released != int(next) || !g.empty() || len(all) == 0 {
			t.Fatalf("seed %d: at the end marked %d, released %d of %d (%d letters); want everything", seed, pr.marked, pr.released, next, len(all))
		}
	}
}
