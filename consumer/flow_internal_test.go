package consumer

import (
	"context"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFlowHoldBackUntilOthersDry: a full partition whose record is the
// last the client holds holds back the poll loop while another partition
// has records, and lets it poll (to pause the full one) once the other has
// none left, but only when the member has other partitions: its only
// partition never drops its record. A partition paused while full, for any reason,
// stays paused until back under half of its bound.
func TestFlowHoldBackUntilOthersDry(t *testing.T) {
	b, mk := flowKit(t)
	full, other := mk(0), mk(1)
	over := func() bool { b.mu.Lock(); defer b.mu.Unlock(); return b.overLocked() }

	other.hold(recs(5), 1)
	full.hold(recs(10), 1)
	if want, blocking := full.wantsStop(); !want || blocking || over() {
		t.Fatalf("full: wants a stop %v, blocking %v, poll loop waits %v; want true, false, false", want, blocking, over())
	}
	full.holdBack()
	if _, blocking := full.wantsStop(); !blocking || !over() || b.dry() {
		t.Fatalf("held back: blocking %v, poll loop waits %v, dry %v; want true, true, false", blocking, over(), b.dry())
	}
	b.setAssigned(2)
	if !over() {
		t.Fatal("the poll loop polls while the other partition has records")
	}
	full.release(3, 0) // 7: still full
	if b.blocked != 7 || b.records != 12 {
		t.Fatalf("budget holds %d records, %d of them blocked; want 12, 7", b.records, b.blocked)
	}
	woke := make(chan bool, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		woke <- b.room(ctx)
	}()
	other.release(5, 0)
	if !<-woke || over() || !b.dry() {
		t.Fatalf("the other partition has no records left: poll loop waits %v, dry %v; want false, true", over(), b.dry())
	}
	b.setAssigned(1)
	if !over() || b.dry() {
		t.Fatalf("the member's only partition: poll loop waits %v, dry %v; want true, false", over(), b.dry())
	}
	b.setAssigned(2)
	other.setOperator(true)
	if !over() || b.dry() || b.paused != 1 {
		t.Fatalf("the other partition paused: poll loop waits %v, dry %v, paused %d; want true, false, 1", over(), b.dry(), b.paused)
	}
	other.setOperator(false)
	if over() || !b.dry() || b.paused != 0 {
		t.Fatalf("the other partition resumed: poll loop waits %v, dry %v, paused %d; want false, true, 0", over(), b.dry(), b.paused)
	}
	full.pauseFull()
	if full.paused != PauseFull || full.blocking || b.full != 0 || b.blocked != 0 || b.records != 0 || over() {
		t.Fatalf("paused: reason %q, blocking %v, budget full %d, blocked %d, records %d; want buffer-full, false, 0, 0, 0",
			full.paused, full.blocking, b.full, b.blocked, b.records)
	}
	full.setOperator(true)
	full.setOperator(false)
	if full.paused != PauseFull {
		t.Fatalf("after the operator's pause and resume: %q; want buffer-full", full.paused)
	}
	full.release(2, 0) // 5: half of its bound
	if full.paused != "" || full.full || b.records != 5 {
		t.Fatalf("back under half: paused %q, full %v, budget %d; want flowing, 5", full.paused, full.full, b.records)
	}
	// Full again and paused by the operator while full (and not yet
	// paused for it): it stays paused because full after the resume.
	full.hold(recs(5), 2)
	full.setOperator(true)
	full.setOperator(false)
	if full.paused != PauseFull {
		t.Fatalf("paused by the operator while full, then resumed: %q; want buffer-full", full.paused)
	}
}

// TestFlowRotatingCountsAsBlocked: a full partition in a rotation does not
// hold back the poll loop, and its records count as blocked, so that
// another full partition that holds back the poll loop meanwhile is let go
// once the flowing partitions have no records left; the counts come back
// when the rotation ends, and when a partition in one is paused or stops.
// (Before: the rotating partition's records kept the others from running
// dry, and the poll loop waited with the rotation's other partition
// paused.)
func TestFlowRotatingCountsAsBlocked(t *testing.T) {
	b, mk := flowKit(t)
	rot, held, other := mk(0), mk(1), mk(2)
	b.setAssigned(3)
	rot.hold(recs(10), 1)
	held.hold(recs(10), 1)
	rot.setRotating(true)
	if rot.blocking || b.blocked != 10 || b.full != 0 {
		t.Fatalf("rotating: blocking %v, budget blocked %d, full %d; want false, 10, 0", rot.blocking, b.blocked, b.full)
	}
	held.holdBack()
	if !held.blocking || b.blocked != 20 || b.records != 20 || !b.dry() {
		t.Fatalf("another held back: blocking %v, budget blocked %d of %d, dry %v; want true, 20 of 20, true", held.blocking, b.blocked, b.records, b.dry())
	}
	other.hold(recs(3), 2)
	if b.dry() {
		t.Fatal("dry while the other flowing partition has records")
	}
	other.release(3, 0)
	rot.hold(recs(2), 2) // fetches in a rotation count as blocked too
	rot.release(1, 0)
	if b.blocked != 21 || b.records != 21 || !b.dry() {
		t.Fatalf("budget blocked %d of %d, dry %v; want 21 of 21, true", b.blocked, b.records, b.dry())
	}
	rot.pauseFull()
	if rot.paused != PauseFull || b.blocked != 10 || b.records != 10 {
		t.Fatalf("rotating, then paused: %q, budget blocked %d of %d; want buffer-full, 10 of 10", rot.paused, b.blocked, b.records)
	}
	rot.setRotating(false)
	if b.blocked != 10 || b.records != 10 || b.paused != 1 {
		t.Fatalf("rotation ended while paused: budget blocked %d of %d, paused %d; want 10 of 10, 1", b.blocked, b.records, b.paused)
	}
	held.setRotating(true)
	if held.blocking || b.full != 0 || b.blocked != 10 {
		t.Fatalf("a held-back partition in a rotation: blocking %v, full %d, blocked %d; want false, 0, 10", held.blocking, b.full, b.blocked)
	}
	held.stop()
	rot.stop()
	held.stop() // twice: no change
	if b.blocked != 0 || b.records != 0 || b.paused != 0 || b.full != 0 {
		t.Fatalf("stopped: budget blocked %d, records %d, paused %d, full %d; want all 0", b.blocked, b.records, b.paused, b.full)
	}
}

// flowKit returns a budget and a maker of flows of topic "t" on it, each
// bounded at 10 records, with a client that reaches no broker.
func flowKit(t *testing.T) (*budget, func(part int32) *flow) {
	cl, err := kgo.NewClient(kgo.SeedBrokers("127.0.0.1:1"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	b := &budget{maxRecords: 1000, maxBytes: 1 << 30}
	lim := BufferLimits{PartitionRecords: 10, PartitionBytes: 1 << 30}
	return b, func(p int32) *flow { return &flow{topic: "t", part: p, cl: cl, total: b, lim: lim} }
}

// recs returns n empty records.
func recs(n int) []*kgo.Record {
	rs := make([]*kgo.Record, n)
	for i := range rs {
		rs[i] = &kgo.Record{}
	}
	return rs
}
