package consumer

import (
	"context"
	"errors"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// tierRecord is a record as a consumer forwards it to a tier: key, the
// failure headers of the source record at srcOffset, the retry headers.
func tierRecord(topic, key, source string, srcOffset int64, forwards int) *kgo.Record {
	fl := &deadletter.Failure{Stage: deadletter.StageProcess, Reason: ReasonRetryTopic, Topic: source, Offset: srcOffset,
		Attempts: 1, First: time.Unix(1700000000, 0), Last: time.Unix(1700000000, 0)}
	var hs []kgo.RecordHeader
	for _, h := range fl.AppendHeaders(nil) {
		hs = append(hs, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	hs = append(hs, retryHeaders(1, forwards, time.Unix(1700000001, 0), false)...)
	return &kgo.Record{Topic: topic, Partition: 0, Key: []byte(key), Value: []byte("v"), Headers: hs}
}

// keysOf lists a family's entries as "key@offset".
func keysOf(f *family) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for k, es := range f.keys {
		for _, e := range es {
			out = append(out, k+"@"+strconv.FormatInt(e.offset, 10))
		}
	}
	slices.Sort(out)
	return out
}

// TestFamilyRebuildDropsGhosts: a rebuild of a family that workers share
// keeps what is still in the tiers or in flight and drops what is gone: a
// copy below the tier's committed offset (consumed and committed, here or by
// another member) and a copy whose writer stopped with its write failed. It
// does not add back a record this member's tier worker took and settled.
// (Before: a rebuild cleared the family and read the tiers from the committed
// offsets, so a record settled here but not yet committed came back as an
// entry that parked every later record of its key, again and again; and a
// family kept while a partition moved away and back kept entries of records
// settled elsewhere.)
func TestFamilyRebuildDropsGhosts(t *testing.T) {
	c := kafkatest.New(t)
	ctx := context.Background()
	source := c.Topic(t, "famsrc", 1)
	cfg := RetryTopics{Tiers: []time.Duration{time.Second}}
	group := kafkatest.UniqueName("famgroup")
	tier := cfg.TierTopic(source, group, time.Second)
	cl := c.Client(t)
	adm := kadm.NewClient(cl)
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, tier); err != nil {
		t.Fatal(err)
	}
	// The tier partition: offset 0 (a, settled and committed by another
	// member); 1 (b) and 2 (c), taken by this member's worker, which
	// settled c; 3 (g), not taken yet.
	kafkatest.Produce(t, cl,
		tierRecord(tier, "a", source, 1, 1),
		tierRecord(tier, "b", source, 5, 1),
		tierRecord(tier, "c", source, 7, 1),
		tierRecord(tier, "g", source, 8, 1))
	var offs kadm.Offsets
	offs.Add(kadm.Offset{Topic: tier, Partition: 0, At: 1, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, group, offs); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}

	tr := newTiers(cfg, []string{source}, group)
	tr.adm, tr.opts = adm, append(c.ClientOpts(), kgo.SeedBrokers(c.Brokers()...))
	f, _ := tr.family(source, 0)
	f.restore("a", 1, 0, 1, 0) // read by an earlier rebuild; since settled elsewhere
	// This member's tier worker took b and c; it settled c.
	taken := []*kgo.Record{tierRecord(tier, "b", source, 5, 1), tierRecord(tier, "c", source, 7, 1)}
	taken[0].Offset, taken[1].Offset = 1, 2
	f.took(0, taken)
	f.settle("c", 7)
	// The source worker forwards d (in flight), e (its write failed and
	// its worker stopped) and h (failed, its worker goes on and writes
	// it again).
	alive, gone := make(chan struct{}), make(chan struct{})
	close(gone)
	f.put("d", 9, 0, 1, alive)
	f.sending("d", 9, 1)
	f.put("e", 10, 0, 1, gone)
	f.sending("e", 10, 1)
	f.put("h", 11, 0, 1, alive)
	f.sending("h", 11, 1)
	f.sent("h", 11, 1, 0, errors.New("write failed"))

	if _, err := tr.read(ctx, map[tp]*family{{source, 0}: f}); err != nil {
		t.Fatal(err)
	}
	want := []string{"b@5", "d@9", "e@10", "g@8", "h@11"}
	if got := keysOf(f); !slices.Equal(got, want) {
		t.Fatalf("after the rebuild: %v, want %v (a settled elsewhere, c settled here)", got, want)
	}
	// e's write fails now, with its worker gone: no one writes it again.
	f.sent("e", 10, 1, 0, errors.New("write failed"))
	// d's is acknowledged at tier offset 4.
	f.sent("d", 9, 1, 4, nil)
	// h's worker stops without writing it again.
	close(alive)
	f.stopped(-1, alive)
	// e and h are back at their source, uncommitted: they still hold their
	// keys, but a source record of theirs is handled again, not taken for
	// forwarded; d's acknowledged copy is.
	want = []string{"b@5", "d@9", "e@10", "g@8", "h@11"}
	if got := keysOf(f); !slices.Equal(got, want) {
		t.Fatalf("after the writes ended: %v, want %v", got, want)
	}
	if r, _, _ := f.route("e", 10); r != routeProcess {
		t.Errorf("route of e, whose copy was never written = %d; want routeProcess", r)
	}
	if r, _, _ := f.route("d", 9); r != routeForwarded {
		t.Errorf("route of d, whose copy was acknowledged = %d; want routeForwarded", r)
	}
	// Once the group committed the source past them, a rebuild drops them.
	var src kadm.Offsets
	src.Add(kadm.Offset{Topic: source, Partition: 0, At: 11, LeaderEpoch: -1})
	if r, err := adm.CommitOffsets(ctx, group, src); err != nil || r.Error() != nil {
		t.Fatalf("commit: %v %v", err, r.Error())
	}
	if _, err := tr.read(ctx, map[tp]*family{{source, 0}: f}); err != nil {
		t.Fatal(err)
	}
	want = []string{"b@5", "d@9", "g@8", "h@11"}
	if got := keysOf(f); !slices.Equal(got, want) {
		t.Fatalf("after the source's commit passed e: %v, want %v", got, want)
	}
	if n := f.size(); n != len(want) {
		t.Fatalf("size %d, want %d", n, len(want))
	}
}

// TestFamilyLostForwardFallsBack: a tier record forwarded again whose new
// copy is never written (the write failed, its worker stopped) is where its
// previous copy is: its entry goes back to that copy instead of going, and
// keeps holding its key. A record of another source partition adds nothing.
func TestFamilyLostForwardFallsBack(t *testing.T) {
	f := newFamily("orders", 0, 100)
	f.restore("k", 7, 0, 1, 42) // in tier 0 at offset 42
	worker := make(chan struct{})
	f.put("k", 7, 1, 2, worker) // failed again: forwarded to tier 1
	f.sending("k", 7, 2)
	close(worker)
	f.sent("k", 7, 2, 0, errors.New("write failed"))
	es := f.keys["k"]
	if len(es) != 1 || es[0].tier != 0 || es[0].at != 42 || es[0].forwards != 1 {
		t.Fatalf("entries %+v; want k back at tier 0 offset 42", es)
	}
	if tier, lost, ok, _ := f.blocked("k", 9, false); !ok || lost || tier != 0 {
		t.Fatalf("before(k, 9) = %d %v %v; want tier 0, held, not lost", tier, lost, ok)
	}
	other := tierRecord("orders.retry.1s", "x", "payments", 3, 1)
	other.Offset = 43
	f.took(0, []*kgo.Record{other})
	if _, ok := f.keys["x"]; ok {
		t.Fatal("a tier record of another source added an entry")
	}
}

// TestFamilyTierGone: a tier topic deleted (and created again) took its
// copies with it: their entries go, so that the later records of their keys
// are no longer parked behind records that will never come back; a record
// whose current copy is in another tier stays, but no longer falls back to
// a copy in the deleted one. (Before: the entries stayed, and every later
// record of their keys was parked again and again, 366,629 park writes in
// 60 s; kfake chaos seed 6000055.)
func TestFamilyTierGone(t *testing.T) {
	f := newFamily("orders", 0, 100)
	f.restore("a", 5, 0, 1, 40) // in tier 0
	f.restore("a", 9, 0, 1, 41) // parked behind it, in tier 0
	f.restore("b", 6, 1, 2, 7)  // in tier 1
	f.restore("c", 8, 0, 1, 42) // in tier 0, being forwarded to tier 1
	worker := make(chan struct{})
	f.put("c", 8, 1, 2, worker)
	f.sending("c", 8, 2)
	f.seen[0] = 43
	f.gone(0)
	if got, want := keysOf(f), []string{"b@6", "c@8"}; !slices.Equal(got, want) {
		t.Fatalf("entries %v; want %v", got, want)
	}
	if _, ok := f.seen[0]; ok {
		t.Fatal("what the worker took of the deleted tier is still remembered")
	}
	if r, _, _ := f.route("a", 12); r != routeProcess {
		t.Fatalf("route of a later record of a = %d; want it processed, not parked", r)
	}
	close(worker)
	f.sent("c", 8, 2, 0, errors.New("write failed"))
	if es := f.keys["c"]; len(es) != 1 || !es[0].lost() || es[0].fallBack() {
		t.Fatalf("entries of c %+v; want its forward lost with nothing to fall back to", es)
	}
	if f.n != 2 {
		t.Fatalf("family size %d; want 2", f.n)
	}
}

// TestFamilyUnwritten: a source record parked behind its key waits while an
// earlier record's first copy is not acknowledged and would leave it back at
// its source if lost: a write in flight (to any tier), or a failed one. A
// copy with one before it and a copy whose writer stopped do not hold it;
// the wait ends at the write's end. A record skipped while its copy is in
// flight holds its key until the write ends.
func TestFamilyUnwritten(t *testing.T) {
	f := newFamily("orders", 0, 100)
	worker := make(chan struct{})
	route := func(key string, offset int64) (int, <-chan struct{}) {
		r, tier, wait := f.route(key, offset)
		if r != routePark {
			t.Fatalf("route(%s, %d) = %d; want routePark", key, offset, r)
		}
		return tier, wait
	}

	f.add("a", 1, 1, 2, 7)      // in the second tier, acknowledged
	f.put("a", 2, 0, 1, worker) // parked from the source in the first tier
	f.sending("a", 2, 1)
	if tier, wait := route("a", 3); tier != 1 || wait == nil {
		t.Fatalf("park of a@3 in tier %d, wait %v; want tier 1 and a wait for a@2, in flight to tier 0", tier, wait)
	}
	f.put("b", 1, 0, 1, worker)
	f.sending("b", 1, 1)
	if _, wait := route("b", 2); wait == nil {
		t.Fatal("b@2 does not wait for b@1 in flight to the same tier")
	}

	_, wait := route("a", 3)
	f.sent("a", 2, 1, -1, errors.New("write failed"))
	select {
	case <-wait:
	default:
		t.Fatal("the end of a@2's write did not end the wait")
	}
	if _, wait := route("a", 3); wait == nil {
		t.Fatal("a@3 does not wait for a@2, whose write failed and is written again")
	}
	f.sending("a", 2, 1)
	f.sent("a", 2, 1, 4, nil)
	if _, wait := route("a", 3); wait != nil {
		t.Fatal("a@3 waits for a@2, acknowledged")
	}

	f.add("c", 1, 0, 1, 3)      // read from the first tier,
	f.put("c", 1, 1, 2, worker) // forwarded to the second: its previous copy stays
	f.sending("c", 1, 2)
	if _, wait := route("c", 2); wait != nil {
		t.Fatal("c@2 waits for c@1, which has a copy before the one in flight")
	}

	// Skipped while being written: the entry stays, and holds its key,
	// until the write ends; landed, its copy is settled as skipped.
	for _, lands := range []bool{true, false} {
		f.put("s", 1, 0, 1, worker)
		f.sending("s", 1, 1)
		if !f.skip("s", 1, 1) {
			t.Fatal("a copy in flight, skipped, does not keep its entry")
		}
		if at, ok := f.skippedBefore("s", 2); !ok || at != 1 {
			t.Fatalf("skippedBefore(s, 2) = %d %v; want s@1", at, ok)
		}
		if _, wait := route("s", 2); wait == nil {
			t.Fatal("s@2 does not wait for s@1, skipped while its copy is in flight")
		}
		if lands {
			f.sent("s", 1, 1, 5, nil)
			if !f.skippedCopy("s", 1, 1) {
				t.Fatal("the landed copy of s@1 is not known as skipped")
			}
			f.settle("s", 1) // as its tier's worker does
		} else {
			f.sent("s", 1, 1, -1, errors.New("write failed"))
		}
		if r, _, wait := f.route("s", 2); r != routeProcess || wait != nil {
			t.Fatalf("lands=%v: route(s, 2) = %d, wait %v; want it processed", lands, r, wait)
		}
	}
	f.put("t", 1, 0, 1, worker)
	f.sending("t", 1, 1)
	f.sent("t", 1, 1, -1, errors.New("write failed"))
	if f.skip("t", 1, 1) {
		t.Fatal("a copy whose write failed, skipped, keeps its entry")
	}

	f.put("d", 1, 0, 1, worker)
	f.sending("d", 1, 1)
	f.sent("d", 1, 1, -1, errors.New("write failed"))
	close(worker) // its writer stopped: d@1 is back at its source, and d@2 is not parked
	if r, _, wait := f.route("d", 2); wait != nil {
		t.Fatalf("route(d, 2) = %d with a wait for a copy nobody writes", r)
	}
}
