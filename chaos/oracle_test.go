package main

import (
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// The oracle must see each kind of broken promise: these facts are made up,
// each with one defect.

func testScenario() *Scenario {
	return &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 3, Protocol: "classic", ExactlyOnce: true}}
}

func src(sc *Scenario, p int32, o int64, key string, v Value) *kgo.Record {
	return &kgo.Record{Topic: sc.Source(), Partition: p, Offset: o, Key: []byte(key), Value: v.Encode(0)}
}

func call(sc *Scenario, p int32, o int64, res string, t0, t1 int64) Event {
	return Event{Ev: "call", Topic: sc.Source(), Part: p, Offset: o, Res: res, T0: t0, T1: t1, Att: 1}
}

func letterOf(sc *Scenario, r *kgo.Record, attempts int) *kgo.Record {
	return &kgo.Record{Topic: sc.DLQ(), Key: r.Key, Value: r.Value, Headers: []kgo.RecordHeader{
		{Key: deadletter.HeaderOriginalTopic, Value: []byte(sc.Source())},
		{Key: deadletter.HeaderOriginalPartition, Value: []byte(strconv.Itoa(int(r.Partition)))},
		{Key: deadletter.HeaderOriginalOffset, Value: []byte(strconv.FormatInt(r.Offset, 10))},
		{Key: deadletter.HeaderAttempts, Value: []byte(strconv.Itoa(attempts))},
		{Key: deadletter.HeaderStage, Value: []byte(deadletter.StageProcess)},
	}}
}

func output(p int32, o int64) *kgo.Record {
	return &kgo.Record{Value: []byte(strconv.Itoa(int(p)) + "/" + strconv.FormatInt(o, 10))}
}

func byKind(vs []Violation) map[string]int {
	m := map[string]int{}
	for _, v := range vs {
		m[v.Kind]++
	}
	return m
}

func TestOracleClean(t *testing.T) {
	sc := testScenario()
	a, b := src(sc, 0, 0, "k", Value{ID: 0}), src(sc, 0, 1, "k", Value{ID: 1, Perm: true})
	f := &facts{source: []*kgo.Record{a, b}, letters: []*kgo.Record{letterOf(sc, b, 1)}, outputs: []*kgo.Record{output(0, 0)},
		ends: map[int32]int64{0: 2}, committed: map[int32]int64{0: 2},
		events: []Event{call(sc, 0, 0, "ok", 1, 2), call(sc, 0, 1, "permanent", 3, 4)}}
	if vs := judge(sc, f); len(vs) > 0 {
		t.Fatalf("violations in a clean run: %v", vs)
	}
}

func TestOracleFindsDefects(t *testing.T) {
	sc := testScenario()
	ok := src(sc, 0, 0, "k", Value{ID: 0})
	lost := src(sc, 0, 1, "k", Value{ID: 1})
	early := src(sc, 0, 2, "k", Value{ID: 2, Fail: 1}) // fails once of 3 tries: must not be dead-lettered
	dup := src(sc, 1, 0, "j", Value{ID: 3})
	late := src(sc, 1, 1, "j", Value{ID: 4})
	f := &facts{
		source:    []*kgo.Record{ok, lost, early, dup, late},
		letters:   []*kgo.Record{letterOf(sc, early, 2)},
		outputs:   []*kgo.Record{output(0, 0), output(1, 0), output(1, 0), output(1, 1)},
		ends:      map[int32]int64{0: 3, 1: 2},
		committed: map[int32]int64{0: 3, 1: 1},
		events: []Event{
			call(sc, 0, 0, "ok", 1, 2),
			call(sc, 0, 2, "transient", 3, 4),
			call(sc, 1, 1, "ok", 5, 6), // before the record ahead of it
			call(sc, 1, 0, "ok", 7, 8),
		},
	}
	got := byKind(judge(sc, f))
	for _, k := range []string{"lost", "unexpected-letter", "attempts-ahead", "duplicate-output", "order", "commit-behind"} {
		if got[k] == 0 {
			t.Errorf("no %s violation; got %v", k, got)
		}
	}
}

// A delete fault destroys the letters in the topic it deletes. A record
// whose letter Kafka acknowledged before the deletion (the child's "ack"
// event) is dead-lettered, then deleted by the fault; one whose letter was
// never acknowledged, or acknowledged after the deletion (it would be in the
// topic created again), is lost (kfake seed 410150236 counted the first
// kind lost).
func TestOracleLetterDeletedByFault(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 1, Protocol: "classic", TiersMs: []int{100}}}
	tier := sc.Tiers()[0]
	ack := func(r *kgo.Record, to string, t0 int64) Event {
		return Event{Ev: "ack", Topic: sc.Source(), To: to, Part: r.Partition, Offset: r.Offset, T0: t0}
	}
	deleted := src(sc, 0, 0, "k", Value{ID: 0, Perm: true})   // letter acknowledged at 10, topic deleted at 15-20
	never := src(sc, 0, 1, "k", Value{ID: 1, Perm: true})     // letter never acknowledged
	after := src(sc, 0, 2, "k", Value{ID: 2, Perm: true})     // acknowledged at 500, after the deletion and its margin
	forwarded := src(sc, 1, 0, "j", Value{ID: 3, Fail: 1000}) // forwarded to the tier at 12, the tier deleted at 25-30
	fw := letterOf(sc, forwarded, 1)
	fw.Topic = tier
	f := &facts{
		source:    []*kgo.Record{deleted, never, after, forwarded},
		forwards:  []*kgo.Record{fw}, // read before the tier was deleted
		ends:      map[int32]int64{0: 3, 1: 1},
		committed: map[int32]int64{0: 3, 1: 1},
		commits:   []commitSample{{At: 40, Partition: 1, Committed: 1}},
		events: []Event{
			call(sc, 0, 0, "permanent", 1, 2), ack(deleted, sc.DLQ(), 10),
			call(sc, 0, 1, "permanent", 3, 4),
			call(sc, 0, 2, "permanent", 5, 6), ack(after, sc.DLQ(), 500),
			call(sc, 1, 0, "transient", 7, 8), ack(forwarded, tier, 12),
		},
		deletes:      []deletion{{Topic: sc.DLQ(), Start: 15, End: 20}, {Topic: tier, Start: 25, End: 30}},
		deleteMargin: 100,
	}
	vs := judge(sc, f)
	lost := map[string]bool{}
	for _, v := range vs {
		if v.Kind != "lost" {
			t.Errorf("unexpected violation: %s: %s", v.Kind, v.Detail)
			continue
		}
		lost[strings.Fields(v.Detail)[1]] = true
	}
	if want := map[string]bool{"0@1": true, "0@2": true}; !maps.Equal(lost, want) {
		t.Errorf("lost records %v, want %v", lost, want)
	}
	a := account(sc.Source(), f.letters, f.forwards, f.events, f.deletes, f.deleteMargin, false)
	if want := map[pos]string{{0, 0}: sc.DLQ(), {1, 0}: tier}; !maps.Equal(a.deleted, want) {
		t.Errorf("deleted by the fault: %v, want %v", a.deleted, want)
	}
}

// A consumer process whose peak resident set is above its bound (the
// margin plus four times what its buffer may hold) is a violation.
func TestOracleRSS(t *testing.T) {
	sc := testScenario()
	sc.MaxMessage = 256 << 10
	sc.Mode.BufferRecords = 10 // 20 records of at most 256 KiB: 5 MiB
	big := src(sc, 0, 0, "k", Value{ID: 0})
	big.Value = make([]byte, 8<<20) // a workload of 8 MiB: the buffer bound is less
	f := &facts{source: []*kgo.Record{big}, outputs: []*kgo.Record{output(0, 0)},
		ends: map[int32]int64{0: 1}, committed: map[int32]int64{0: 1},
		events: []Event{call(sc, 0, 0, "ok", 1, 2),
			{Ev: "stop", Member: 0, RSSKiB: rssMarginKiB + 4*5<<10},     // at the bound
			{Ev: "stop", Member: 1, RSSKiB: rssMarginKiB + 4*5<<10 + 1}, // above it
		}}
	vs := judge(sc, f)
	if len(vs) != 1 || vs[0].Kind != "rss" || !strings.Contains(vs[0].Detail, "member 1 ") {
		t.Fatalf("violations %v, want one rss violation of member 1", vs)
	}
	// Without a buffer limit, the workload bounds what is buffered.
	sc.Mode.BufferRecords = 0
	if got, want := rssBoundKiB(sc, 8<<20), int64(rssMarginKiB+4*8<<10); got != want {
		t.Errorf("bound %d KiB, want %d", got, want)
	}
}

// A record that keeps its partition stuck longer than its tries and the
// scenario's faults explain is a violation.
func TestOracleStuckTooLong(t *testing.T) {
	sc := testScenario()
	sc.Backend = "kfake"
	sc.Mode.BackoffMs = 100
	sc.Faults = []Fault{{Kind: FaultPause, ForMs: 2000}}
	bound := stuckBound(sc) // 3 tries of 100ms, a 2s fault, 15s
	if want := 300*time.Millisecond + 2*time.Second + 15*time.Second; bound != want {
		t.Fatalf("bound %v, want %v", bound, want)
	}
	stuck := func(m int, d time.Duration) Event {
		return Event{Ev: "stuck", Member: m, Topic: sc.Source(), Part: 0, Offset: 7, T0: 1000, T1: 1000 + d.Nanoseconds(), Err: "retrying"}
	}
	vs := stuckViolations(sc, []Event{stuck(0, bound), stuck(1, bound+time.Millisecond)})
	if len(vs) != 1 || vs[0].Kind != "stuck-too-long" || !strings.Contains(vs[0].Detail, "member 1:") {
		t.Fatalf("violations %v, want one stuck-too-long of member 1", vs)
	}
	// Stuck since before a restart of its member (durable attempts keep
	// the first failure's time): counted from the restart, so a kill
	// longer than the margin is not the consumer's (kfake seed 9700094).
	// A restart of another member, or one before the record's time, does
	// not shorten it.
	long := stuck(2, bound+5*time.Second)
	for _, c := range []struct {
		name  string
		start Event
		want  int
	}{
		{"its member restarted", Event{Ev: "start", Member: 2, T0: 1000 + (6 * time.Second).Nanoseconds()}, 0},
		{"another member restarted", Event{Ev: "start", Member: 1, T0: 1000 + (6 * time.Second).Nanoseconds()}, 1},
		{"its member started before", Event{Ev: "start", Member: 2, T0: 500}, 1},
	} {
		if vs := stuckViolations(sc, []Event{c.start, long}); len(vs) != c.want {
			t.Errorf("%s: violations %v, want %d", c.name, vs, c.want)
		}
	}
	// Only the time its member held the partition counts: given it late,
	// after a long join (kfake seed 30000160), it counts from then; taken
	// and given back at a rebalance, the time before counts too.
	at := func(ev string, m int, p int32, d time.Duration) Event {
		return Event{Ev: ev, Member: m, Topic: sc.Source(), Part: p, T0: 1000 + d.Nanoseconds()}
	}
	for _, c := range []struct {
		name string
		own  []Event
		want int
	}{
		{"its partition assigned late", []Event{at("assign", 2, 0, 6*time.Second)}, 0},
		{"another partition assigned late", []Event{at("assign", 2, 1, 6*time.Second)}, 1},
		{"its partition assigned to another member", []Event{at("assign", 1, 0, 6*time.Second)}, 1},
		{"held throughout, given back at a rebalance", []Event{at("assign", 2, 0, 0), at("revoke", 2, 0, 9*time.Second), at("assign", 2, 0, 9*time.Second+time.Millisecond)}, 1},
		{"revoked for 6s meanwhile", []Event{at("assign", 2, 0, 0), at("revoke", 2, 0, 3*time.Second), at("assign", 2, 0, 9*time.Second)}, 0},
	} {
		if vs := stuckViolations(sc, append(c.own, long)); len(vs) != c.want {
			t.Errorf("%s: violations %v, want %d", c.name, vs, c.want)
		}
	}
}

// In exactly-once mode a letter is acknowledged inside a transaction that
// may abort: the record counts as deleted by the fault only if its
// member's next transaction end was a commit, or the group's offset was
// seen past it before the deletion ended. A transaction that commits
// after the deletion, with a letter acknowledged by the deleted topic
// before it, is the fault's doing too (cluster seed 94500023: the commit
// was late behind a broker kill).
func TestOracleLetterDeletedByFaultExactlyOnce(t *testing.T) {
	sc := testScenario() // exactly-once
	sc.Partitions = 5
	seenPast := src(sc, 0, 0, "k", Value{ID: 0, Perm: true})
	unknown := src(sc, 1, 0, "j", Value{ID: 1, Perm: true})
	committedLate := src(sc, 2, 0, "i", Value{ID: 2, Perm: true})
	aborted := src(sc, 3, 0, "h", Value{ID: 3, Perm: true})
	restarted := src(sc, 4, 0, "g", Value{ID: 4, Perm: true})
	ack := func(r *kgo.Record, member int, t0 int64) Event {
		return Event{Ev: "ack", Member: member, Topic: sc.Source(), To: sc.DLQ(), Part: r.Partition, Offset: r.Offset, T0: t0}
	}
	txn := func(ev string, member int, t0 int64) Event { return Event{Ev: ev, Member: member, T0: t0} }
	f := &facts{
		source:    []*kgo.Record{seenPast, unknown, committedLate, aborted, restarted},
		ends:      map[int32]int64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1},
		committed: map[int32]int64{0: 1, 1: 1, 2: 1, 3: 1, 4: 1},
		// Partition 0's offset was seen past its record before the
		// deletion; the others' only after it.
		commits: []commitSample{{At: 12, Partition: 0, Committed: 1}, {At: 500, Partition: 1, Committed: 1},
			{At: 500, Partition: 2, Committed: 1}, {At: 500, Partition: 3, Committed: 1}, {At: 500, Partition: 4, Committed: 1}},
		events: []Event{
			call(sc, 0, 0, "permanent", 1, 2), ack(seenPast, 0, 10),
			call(sc, 1, 0, "permanent", 3, 4), ack(unknown, 0, 11), // member 0 logs no transaction end
			{Ev: "call", Member: 1, Topic: sc.Source(), Part: 2, Offset: 0, Res: "permanent", T0: 5, T1: 6}, ack(committedLate, 1, 13),
			txn("commit", 1, 8), // before the acknowledgement: an earlier transaction
			txn("commit", 1, 300),
			{Ev: "call", Member: 2, Topic: sc.Source(), Part: 3, Offset: 0, Res: "permanent", T0: 5, T1: 6}, ack(aborted, 2, 13),
			txn("abort", 2, 250), txn("commit", 2, 300),
			{Ev: "call", Member: 3, Topic: sc.Source(), Part: 4, Offset: 0, Res: "permanent", T0: 5, T1: 6}, ack(restarted, 3, 13),
			{Ev: "start", Member: 3, T0: 200}, txn("commit", 3, 300),
		},
		deletes:      []deletion{{Topic: sc.DLQ(), Start: 15, End: 20}},
		deleteMargin: 100,
	}
	var lost []string
	for _, v := range judge(sc, f) {
		if v.Kind == "lost" {
			lost = append(lost, strings.Fields(v.Detail)[1])
		}
	}
	slices.Sort(lost)
	if want := []string{"1@0", "3@0", "4@0"}; !slices.Equal(lost, want) {
		t.Errorf("lost %v, want %v", lost, want)
	}
	if d := judgeAccounts(sc, f).deleted; len(d) != 2 || d[pos{0, 0}] == "" || d[pos{2, 0}] == "" {
		t.Errorf("deleted by the fault: %v, want 0@0 and 2@0", d)
	}
}

// Exactly-once: a record parked in a tier (its forward committed), then
// handled from the tier in a transaction that aborted because the fault
// deleted the tier meanwhile, has no output and no copy left: the fault's
// doing, not a missing output. The same record without the deletion is.
func TestOracleEOSTierCopyDeletedByFault(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 1, Protocol: "classic", TiersMs: []int{100}, ExactlyOnce: true}}
	tier := sc.Tiers()[0]
	r := src(sc, 0, 0, "k", Value{ID: 0})
	fw := letterOf(sc, r, 1)
	fw.Topic = tier
	facts := func(dels []deletion) *facts {
		return &facts{
			source:    []*kgo.Record{r},
			forwards:  []*kgo.Record{fw},
			ends:      map[int32]int64{0: 1},
			committed: map[int32]int64{0: 1},
			commits:   []commitSample{{At: 15, Partition: 0, Committed: 1}}, // the forward's transaction
			events: []Event{
				{Ev: "ack", Topic: sc.Source(), To: tier, Part: 0, Offset: 0, T0: 10},
				call(sc, 0, 0, "ok", 20, 21), // from the tier, in the transaction that aborts
			},
			deletes:      dels,
			deleteMargin: 100,
		}
	}
	if vs := judge(sc, facts([]deletion{{Topic: tier, Start: 25, End: 30}})); len(vs) != 0 {
		t.Errorf("tier deleted: violations %v, want none", vs)
	}
	if vs := judge(sc, facts(nil)); byKind(vs)["missing-output"] != 1 {
		t.Errorf("no deletion: violations %v, want one missing-output", vs)
	}
	sc.Mode.ExactlyOnce = false
	if vs := judge(sc, facts([]deletion{{Topic: tier, Start: 25, End: 30}})); len(vs) != 0 {
		t.Errorf("without exactly-once, a processed record is processed: violations %v, want none", vs)
	}
}

// With the kill switch on, a failed record is dead-lettered at once and the
// next record of its key runs; a kill before Kafka acknowledged that letter
// has the record handled again, after the next one (kfake seed 6000357,
// lanes with a retry tier). That is at-least-once, not a broken order. The
// same calls are one when the kill switch was not on where the consumer
// decided what followed the failure, or when a new process ran the next
// record.
func TestOracleKillSwitchReplayIsNoOrderViolation(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "lanes", LanesMax: 3, Tries: 4, Protocol: "classic", TiersMs: []int{500}}}
	prev, next := src(sc, 0, 0, "k", Value{ID: 0, Fail: 3}), src(sc, 0, 1, "k", Value{ID: 1})
	on, off := true, false
	at := func(e Event) Event { e.Member = 1; return e }
	start := func(t0 int64) Event { return Event{Ev: "start", Member: 1, T0: t0} }
	retry := func(t0 int64, v *bool) Event { return Event{Ev: "retry", Member: 1, On: v, T0: t0} }
	replay := []Event{ // failed, the next one ran, killed, both again
		start(1), at(call(sc, 0, 0, "transient", 100, 101)), at(call(sc, 0, 1, "ok", 102, 103)),
		start(200), at(call(sc, 0, 0, "ok", 300, 301)), at(call(sc, 0, 1, "ok", 302, 303)),
	}
	checkOrder(t, sc, []*kgo.Record{prev, next}, []orderCase{
		{"kill switch on at the failure", append([]Event{retry(50, &off), retry(150, &on)}, replay...), false},
		{"kill switch on in the retry wait", append([]Event{retry(101, &off), retry(150, &on)}, replay...), false},
		{"kill switch never on", replay, true},
		{"kill switch on only after the next record began", append([]Event{retry(110, &off), retry(150, &on)}, replay...), true},
		{"kill switch on only during a later try that succeeded", []Event{
			start(1), at(call(sc, 0, 0, "transient", 100, 101)), retry(152, &off), retry(155, &on),
			at(call(sc, 0, 0, "ok", 150, 160)), at(call(sc, 0, 1, "ok", 120, 121)),
		}, true},
		{"a new process ran the next record while the old one's give-up was long gone", []Event{
			start(1), retry(50, &off), at(call(sc, 0, 0, "transient", 100, 101)),
			start(200), // killed with the kill switch on: the span ends here, retrying is on again
			at(call(sc, 0, 0, "transient", 300, 301)), at(call(sc, 0, 1, "ok", 302, 303)), at(call(sc, 0, 0, "ok", 400, 401)),
		}, true},
	})
}

// orderCase is a history of calls, and whether an order violation is
// expected of it.
type orderCase struct {
	name   string
	events []Event
	order  bool
}

// checkOrder judges each case's history of the records src (the last one
// ends its partition, which is committed to its end).
func checkOrder(t *testing.T, sc *Scenario, src []*kgo.Record, cases []orderCase) {
	t.Helper()
	last := src[len(src)-1]
	for _, c := range cases {
		end := map[int32]int64{last.Partition: last.Offset + 1}
		f := &facts{source: src, ends: end, committed: end, events: c.events}
		vs := judge(sc, f)
		if got := byKind(vs)["order"] > 0; got != c.order {
			t.Errorf("%s: order violation %v, want %v: %v", c.name, got, c.order, vs)
		}
	}
}

// A record whose tier copy the delete fault deleted is handled again from
// its source with its attempts counted from 1: the count travelled in the
// copy, so that is the fault's doing, not a lost count (cluster seed
// 8200039). The same calls without the deletion are still a violation.
func TestOracleAttemptsOfADeletedCopy(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 2, Protocol: "classic", TiersMs: []int{250}, DurableAttempts: true}}
	tier := sc.Tiers()[0]
	rec := src(sc, 1, 67, "k", Value{ID: 0, Fail: 4})
	events := []Event{
		call(sc, 1, 67, "transient", 1, 2), call(sc, 1, 67, "transient", 3, 4),
		{Ev: "ack", Topic: sc.Source(), To: tier, Part: 1, Offset: 67, T0: 5},
		call(sc, 1, 67, "transient", 40, 41), call(sc, 1, 67, "transient", 42, 43),
		call(sc, 1, 67, "ok", 44, 45),
	}
	judged := func(dels []deletion) []Violation {
		f := &facts{
			source: []*kgo.Record{rec}, ends: map[int32]int64{1: 68}, committed: map[int32]int64{1: 68},
			events: events, deletes: dels, deleteMargin: 100, durable: true,
		}
		var vs []Violation
		for _, v := range judge(sc, f) {
			if v.Kind == "attempts-lost" {
				vs = append(vs, v)
			}
		}
		return vs
	}
	if vs := judged([]deletion{{Topic: tier, Start: 10, End: 20}}); len(vs) != 0 {
		t.Errorf("its tier copy deleted by the fault: %v, want no attempts-lost", vs)
	}
	if vs := judged(nil); len(vs) != 1 {
		t.Errorf("no deletion: %v, want attempts-lost", vs)
	}
	if vs := judged([]deletion{{Topic: sc.DLQ(), Start: 10, End: 20}}); len(vs) != 1 {
		t.Errorf("another topic deleted: %v, want attempts-lost", vs)
	}
}

// A record skipped by an operator settles it: the next record of its key
// may run at once. A crash before the skip was committed has the record
// handled again, and that replay is at-least-once, not a broken order
// (kfake seed 9700012). The same calls without the skip, or with the skip
// in an earlier process, are still a violation.
func TestOracleSkipThenReplayIsNoOrderViolation(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "lanes", LanesMax: 3, Tries: 2, Protocol: "classic"}}
	prev, next := src(sc, 2, 9, "k", Value{ID: 0, Fail: 1}), src(sc, 2, 10, "k", Value{ID: 1})
	at := func(e Event) Event { e.Member = 1; return e }
	start := func(t0 int64) Event { return Event{Ev: "start", Member: 1, T0: t0} }
	skip := Event{Ev: "skip", Member: 1, Topic: sc.Source(), Part: 2, Offset: 9, T0: 110}
	replay := []Event{ // failed, skipped, the next one ran, killed, both again
		start(1), at(call(sc, 2, 9, "transient", 100, 101)), at(call(sc, 2, 10, "ok", 120, 121)),
		start(200), at(call(sc, 2, 9, "transient", 300, 301)), at(call(sc, 2, 9, "ok", 310, 311)), at(call(sc, 2, 10, "ok", 312, 313)),
	}
	checkOrder(t, sc, []*kgo.Record{prev, next}, []orderCase{
		{"skipped before the next record ran", append([]Event{skip}, replay...), false},
		{"never skipped", replay, true},
		{"skipped after the next record began", append([]Event{{Ev: "skip", Member: 1, Topic: sc.Source(), Part: 2, Offset: 9, T0: 150}}, replay...), true},
		{"skipped by another member", append([]Event{{Ev: "skip", Member: 0, Topic: sc.Source(), Part: 2, Offset: 9, T0: 110}}, replay...), true},
		{"a refused skip", append([]Event{{Ev: "skip", Member: 1, Topic: sc.Source(), Part: 2, Offset: 9, T0: 110, Err: "is not stuck"}}, replay...), true},
		{"skipped, then handled by the same process", []Event{
			start(1), at(call(sc, 2, 9, "transient", 100, 101)), skip, at(call(sc, 2, 10, "ok", 120, 121)), at(call(sc, 2, 9, "ok", 130, 131)),
		}, true},
	})
}

// A skip is committed with the next transaction: a kill of its process
// before that undoes it, and the record handled again with its output
// committed is at-least-once, not a skip undone (kfake seed 9700023). A
// skip undone without a kill, or one whose record was handled again before
// the kill, is still a violation.
func TestOracleSkipUndoneByAKill(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "batch", BatchSize: 8, Tries: 4, Protocol: "classic", ExactlyOnce: true}}
	rec := src(sc, 0, 5, "k", Value{ID: 0, Fail: 3})
	at := func(e Event) Event { e.Member = 0; return e }
	start := func(t0 int64) Event { return Event{Ev: "start", Member: 0, T0: t0} }
	stop := func(t0 int64) Event { return Event{Ev: "stop", Member: 0, T0: t0} }
	skip := Event{Ev: "skip", Member: 0, Topic: sc.Source(), Part: 0, Offset: 5, T0: 110}
	for _, c := range []struct {
		name   string
		events []Event
		undone bool
	}{
		{"killed after the skip", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, start(200), at(call(sc, 0, 5, "ok", 300, 301)), stop(400)}, false},
		{"killed, handled by another member after the restart", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, start(200), {Ev: "call", Member: 1, Topic: sc.Source(), Part: 0, Offset: 5, Res: "ok", T0: 300, T1: 301}}, false},
		{"never restarted, handled by another member", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, {Ev: "call", Member: 1, Topic: sc.Source(), Part: 0, Offset: 5, Res: "ok", T0: 300, T1: 301}}, false},
		{"stopped cleanly after the skip", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, stop(150), start(200), at(call(sc, 0, 5, "ok", 300, 301)), stop(400)}, true},
		{"handled again before the kill", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, at(call(sc, 0, 5, "ok", 120, 121)), start(200), stop(400)}, true},
		{"a try under way when skipped, which succeeded", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)),
			at(call(sc, 0, 5, "ok", 105, 108)), skip, stop(400)}, false},
		{"a try that began after the skip returned", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)),
			skip, at(call(sc, 0, 5, "ok", 111, 112)), stop(400)}, true},
		{"moved to another member before its commit", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip,
			{Ev: "call", Member: 1, Topic: sc.Source(), Part: 0, Offset: 5, Res: "ok", T0: 300, T1: 301, Att: 1}, stop(400)}, false},
		{"moved to another member after its commit", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip,
			{Ev: "call", Member: 1, Topic: sc.Source(), Part: 0, Offset: 5, Res: "ok", T0: 300, T1: 301, Att: 1}, stop(400)}, true},
		{"moved, settled by the other member's forward, then processed from its tier", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip,
			{Ev: "call", Member: 1, Topic: sc.Source(), Part: 0, Offset: 5, Res: "transient", T0: 300, T1: 301, Att: 1},
			{Ev: "call", Member: 1, Topic: sc.Source(), Part: 0, Offset: 5, Res: "ok", T0: 500, T1: 501, Att: 4, Tier: 1}, stop(600)}, false},
		{"committed before the kill", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, start(200), at(call(sc, 0, 5, "ok", 300, 301)), stop(400)}, true},
		{"skipped twice, the second in the new process", []Event{start(1), at(call(sc, 0, 5, "transient", 100, 101)), skip, start(200),
			at(call(sc, 0, 5, "transient", 210, 211)), {Ev: "skip", Member: 0, Topic: sc.Source(), Part: 0, Offset: 5, T0: 220}, at(call(sc, 0, 5, "ok", 300, 301)), stop(400)}, true},
	} {
		f := &facts{source: []*kgo.Record{rec}, outputs: []*kgo.Record{output(0, 5)}, ends: map[int32]int64{0: 6}, committed: map[int32]int64{0: 6}, events: c.events}
		switch c.name {
		case "committed before the kill", "moved to another member after its commit":
			f.commits = []commitSample{{At: 150, Partition: 0, Committed: 6}}
		case "moved, settled by the other member's forward, then processed from its tier":
			f.commits = []commitSample{{At: 400, Partition: 0, Committed: 6}} // the forward's transaction
		}
		vs := judge(sc, f)
		if got := byKind(vs)["skip-undone"] > 0; got != c.undone {
			t.Errorf("%s: skip-undone %v, want %v: %v", c.name, got, c.undone, vs)
		}
	}
}

// Exactly-once: a record forwarded to tier 0 (committed), handled from it
// and forwarded to tier 1 in a transaction that aborted because the fault
// deleted tier 0 meanwhile, is gone with tier 0: the acknowledgement of its
// tier-1 copy, which the reader never saw committed, does not count (kfake
// seed 9900095). The same with the tier-1 copy committed is a record left
// in a tier.
func TestOracleEOSAbortedCopyAfterADeletedOne(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 1, Protocol: "classic", TiersMs: []int{100, 250}, ExactlyOnce: true}}
	tiers := sc.Tiers()
	r := src(sc, 2, 3, "k", Value{ID: 9, Fail: 5})
	in := func(topic string) *kgo.Record { fw := letterOf(sc, r, 1); fw.Topic = topic; return fw }
	facts := func(forwards ...*kgo.Record) *facts {
		return &facts{
			source:    []*kgo.Record{r},
			forwards:  forwards,
			ends:      map[int32]int64{2: 4},
			committed: map[int32]int64{2: 4},
			events: []Event{
				call(sc, 2, 3, "transient", 1, 2),
				{Ev: "ack", Topic: sc.Source(), To: tiers[0], Part: 2, Offset: 3, T0: 10},
				call(sc, 2, 3, "transient", 20, 21), // from tier 0
				{Ev: "ack", Topic: sc.Source(), To: tiers[1], Part: 2, Offset: 3, T0: 40},
			},
			commits:      []commitSample{{At: 15, Partition: 2, Committed: 4}}, // the tier-0 forward's transaction
			deletes:      []deletion{{Topic: tiers[0], Start: 30, End: 35}},
			deleteMargin: 1,
		}
	}
	if vs := judge(sc, facts(in(tiers[0]))); len(vs) != 0 {
		t.Errorf("tier-1 copy aborted: violations %v, want none", vs)
	}
	if vs := judge(sc, facts(in(tiers[0]), in(tiers[1]))); byKind(vs)["unsettled"] != 1 {
		t.Errorf("tier-1 copy committed: violations %v, want one unsettled", vs)
	}
}

// The harness waits for every record to be accounted for before it stops
// the consumers. In exactly-once mode a record handled in a transaction that
// aborted is not: its output was never committed, and it is handled again
// (kfake seed 9800265: the harness stopped the consumers while three tier
// records of a transaction a rebalance aborted waited their turn again, and
// their outputs were judged missing).
func TestUnaccountedExactlyOnce(t *testing.T) {
	sc := testScenario()
	r := src(sc, 0, 0, "k", Value{ID: 0})
	events := []Event{call(sc, 0, 0, "ok", 1, 2)}
	if left := unaccounted([]*kgo.Record{r}, nil, nil, nil, events, nil, 0, true); len(left) != 1 {
		t.Errorf("processed, no output committed: %d unaccounted, want 1", len(left))
	}
	if left := unaccounted([]*kgo.Record{r}, nil, nil, []*kgo.Record{output(0, 0)}, events, nil, 0, true); len(left) != 0 {
		t.Errorf("processed, its output committed: %d unaccounted, want 0", len(left))
	}
	if left := unaccounted([]*kgo.Record{r}, nil, nil, nil, events, nil, 0, false); len(left) != 0 {
		t.Errorf("processed, at least once: %d unaccounted, want 0", len(left))
	}
}

// A record parked in a tier the fault deleted is forgotten by the consumer
// (its copy went with the topic), so the next record of its key may run
// before it is handled from the copy its tier worker had already taken
// (kfake seed 6220103). Without the deletion that is a broken order.
func TestOracleOrderAfterADeletedTier(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "lanes", LanesMax: 2, Tries: 3, Protocol: "classic", TiersMs: []int{250}}}
	tier := sc.Tiers()[0]
	prev, next := src(sc, 1, 99, "k3", Value{ID: 0}), src(sc, 1, 111, "k3", Value{ID: 1})
	events := []Event{
		{Ev: "ack", Topic: sc.Source(), To: tier, Part: 1, Offset: 99, T0: 10}, // parked
		call(sc, 1, 111, "ok", 100, 101),
		call(sc, 1, 99, "ok", 200, 201),
	}
	judged := func(dels []deletion) int {
		end := map[int32]int64{1: 112}
		return byKind(judge(sc, &facts{source: []*kgo.Record{prev, next}, ends: end, committed: end, events: events, deletes: dels, deleteMargin: 1}))["order"]
	}
	if n := judged([]deletion{{Topic: tier, Start: 50, End: 60}}); n != 0 {
		t.Errorf("its tier deleted: %d order violations, want none", n)
	}
	if n := judged(nil); n != 1 {
		t.Errorf("no deletion: %d order violations, want 1", n)
	}
}

// A record parked into a tier after the fault deleted and created it again,
// but before the consumer noticed (its "forget" event), is forgotten with
// the copies of the deleted topic: the next record of its key may run
// before it (kfake seed 84000104). Parked after the consumer noticed, or
// noticed by no process or only by a later one of the member, it is kept,
// and running the next record first is a broken order.
func TestOracleOrderAfterATierCreatedAgain(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "lanes", LanesMax: 2, Tries: 3, Protocol: "classic", TiersMs: []int{250}}}
	tier := sc.Tiers()[0]
	prev, next := src(sc, 1, 99, "k3", Value{ID: 0}), src(sc, 1, 111, "k3", Value{ID: 1})
	judged := func(parked, forgot int64, restart bool) int {
		events := []Event{
			{Ev: "start", Member: 1, T0: 1},
			{Ev: "ack", Member: 1, Topic: sc.Source(), To: tier, Part: 1, Offset: 99, T0: parked},
			call(sc, 1, 111, "ok", 300, 301),
			call(sc, 1, 99, "ok", 400, 401),
		}
		if forgot > 0 {
			events = append(events, Event{Ev: "forget", Member: 1, To: tier, T0: forgot})
		}
		if restart {
			events = append(events, Event{Ev: "start", Member: 1, T0: (parked + forgot) / 2})
		}
		for i := range events {
			events[i].Member = 1
		}
		end := map[int32]int64{1: 112}
		return byKind(judge(sc, &facts{source: []*kgo.Record{prev, next}, ends: end, committed: end, events: events,
			deletes: []deletion{{Topic: tier, Start: 50, End: 60}}, deleteMargin: 1}))["order"]
	}
	if n := judged(100, 200, false); n != 0 {
		t.Errorf("parked before the consumer noticed: %d order violations, want none", n)
	}
	if n := judged(250, 200, false); n != 1 {
		t.Errorf("parked after the consumer noticed: %d order violations, want 1", n)
	}
	if n := judged(100, 0, false); n != 1 {
		t.Errorf("the consumer never noticed: %d order violations, want 1", n)
	}
	if n := judged(100, 200, true); n != 1 {
		t.Errorf("noticed by a later process of the member: %d order violations, want 1", n)
	}
}

// Exactly-once: a record parked into tier 1 (committed, then handled from
// it), forwarded to tier 0 (committed), then forwarded to tier 1 again in a
// transaction that aborted while the fault deleted tier 0, is gone with tier
// 0. Its earlier, committed copy in tier 1 does not make the aborted one
// count: an acknowledgement that names its offset is matched to that copy
// (kfake seed 6510108). With the copy at that offset committed, the record
// is left in a tier.
func TestOracleEOSAbortedCopyBesideACommittedOne(t *testing.T) {
	sc := &Scenario{Seed: 1, Mode: Mode{Dispatch: "one", Tries: 1, Protocol: "classic", TiersMs: []int{250, 500}, ExactlyOnce: true}}
	tiers := sc.Tiers()
	r := src(sc, 2, 3, "k", Value{ID: 9, Fail: 5})
	in := func(topic string, at int64) *kgo.Record {
		fw := letterOf(sc, r, 1)
		fw.Topic, fw.Partition, fw.Offset = topic, 2, at
		return fw
	}
	place := func(p int32, at int64) (*int32, *int64) { return &p, &at }
	ack := func(topic string, at, t0 int64) Event {
		e := Event{Ev: "ack", Topic: sc.Source(), To: topic, Part: 2, Offset: 3, T0: t0}
		e.ToPart, e.At = place(2, at)
		return e
	}
	facts := func(forwards ...*kgo.Record) *facts {
		return &facts{
			source:    []*kgo.Record{r},
			forwards:  forwards,
			ends:      map[int32]int64{2: 4},
			committed: map[int32]int64{2: 4},
			events: []Event{
				ack(tiers[1], 37, 5),                // parked
				call(sc, 2, 3, "transient", 6, 7),   // from tier 1
				ack(tiers[0], 58, 10),               // forwarded
				call(sc, 2, 3, "transient", 20, 21), // from tier 0
				ack(tiers[1], 49, 40),               // forwarded, in a transaction that aborted
			},
			commits:      []commitSample{{At: 15, Partition: 2, Committed: 4}},
			deletes:      []deletion{{Topic: tiers[0], Start: 30, End: 35}},
			deleteMargin: 1,
		}
	}
	if vs := judge(sc, facts(in(tiers[1], 37), in(tiers[0], 58))); len(vs) != 0 {
		t.Errorf("the last copy aborted: violations %v, want none", vs)
	}
	if vs := judge(sc, facts(in(tiers[1], 37), in(tiers[0], 58), in(tiers[1], 49))); byKind(vs)["unsettled"] != 1 {
		t.Errorf("the last copy committed: violations %v, want one unsettled", vs)
	}
}
