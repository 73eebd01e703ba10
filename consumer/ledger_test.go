package consumer

import (
	"errors"
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
	if len(marked) != 1 || marked[0] != 0 || released != 1 {
		t.Fatalf("before any letter is acknowledged: marked %v, released %d; want offset 0 only", marked, released)
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
	if head := g.advance(func(*letter) {}); head != nil || marked[len(marked)-1] != 5 || released != 6 || !g.empty() {
		t.Fatalf("after the rewrite: head %v, last mark %d, released %d; want everything marked", head, marked[len(marked)-1], released)
	}
}
