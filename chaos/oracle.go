package main

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// The oracle judges a run from the children's logs and what Kafka holds:
// the source topic, the dead-letter topic and the outputs (read_committed),
// the group's committed offsets. It knows nothing of the consumer's insides.

// Violation is one broken promise, with its evidence.
type Violation struct {
	Kind   string `json:"kind"`
	Detail string `json:"detail"`
}

type pos struct {
	P int32
	O int64
}

func (p pos) String() string { return fmt.Sprintf("%d@%d", p.P, p.O) }

// facts is everything the oracle reads.
type facts struct {
	source    []*kgo.Record
	letters   []*kgo.Record
	outputs   []*kgo.Record
	ends      map[int32]int64 // source end offsets
	committed map[int32]int64 // the group's committed offsets on the source
	events    []Event
	exits     []Violation
	forwards  []*kgo.Record  // copies in the retry tiers (read_committed)
	commits   []commitSample // the group's offsets as they moved
	// deletes are the topics the delete fault deleted, and deleteMargin
	// how long after a deletion's answer a logged acknowledgement may
	// still be of a letter the deletion destroyed (see account).
	deletes      []deletion
	deleteMargin time.Duration
	// durable: the mode keeps attempt counts (DurableAttempts, one
	// record at a time or batches, not exactly-once) and no process or
	// broker was killed, so no count may be lost.
	durable bool
}

// deletion is a topic the delete fault deleted: the request went out at
// Start and was answered at End (unix nanoseconds).
type deletion struct {
	Topic string `json:"topic"`
	Start int64  `json:"start"`
	End   int64  `json:"end"`
}

// deleteMargin is how long after a deletion was answered an "ack" event may
// still be of a letter written to the deleted topic: a child logs the
// acknowledgement when its client hands the promise over, after the broker
// appended the letter (on a loaded machine, late); on the cluster, a leader
// also applies the deletion after the controller answered. A letter written
// to the topic created again is read by the oracle's reader; only a letter
// that is missing is judged by its acknowledgement.
func deleteMargin(backend string) time.Duration {
	if backend == "cluster" {
		return 3 * time.Second
	}
	return time.Second
}

// readEvents reads every child's log in dir; a last line cut by a SIGKILL
// is left out.
func readEvents(dir string) ([]Event, error) {
	files, err := filepath.Glob(filepath.Join(dir, "m*.jsonl"))
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			var e Event
			if json.Unmarshal(sc.Bytes(), &e) == nil {
				out = append(out, e)
			}
		}
		fh.Close()
	}
	return out, nil
}

// letter is what the oracle reads of a dead letter.
type letter struct {
	rec      *kgo.Record
	topic    string
	at       pos
	attempts int
	reason   string
	stage    string
}

func parseLetter(r *kgo.Record) (letter, error) {
	l := letter{rec: r}
	h := map[string]string{}
	for _, x := range r.Headers {
		h[x.Key] = string(x.Value)
	}
	l.topic = h[deadletter.HeaderOriginalTopic]
	p, err1 := strconv.Atoi(h[deadletter.HeaderOriginalPartition])
	o, err2 := strconv.ParseInt(h[deadletter.HeaderOriginalOffset], 10, 64)
	if err1 != nil || err2 != nil {
		return l, fmt.Errorf("letter %d@%d: bad original coordinates %q/%q", r.Partition, r.Offset,
			h[deadletter.HeaderOriginalPartition], h[deadletter.HeaderOriginalOffset])
	}
	l.at = pos{int32(p), o}
	l.attempts, _ = strconv.Atoi(h[deadletter.HeaderAttempts])
	l.reason = h[deadletter.HeaderReason]
	l.stage = h[deadletter.HeaderStage]
	return l, nil
}

// accounts is the fate of each source record, from the logs and letters.
type accounts struct {
	ok      map[pos][]Event
	failed  map[pos]int // failing calls (transient, permanent)
	calls   map[pos][]Event
	skipped map[pos]bool
	skips   map[pos][]Event // the skip events that returned nil, by record
	letters map[pos][]letter
	acks    map[pos][]Event // letters Kafka acknowledged, by source record (the children's "ack" events)
	// deleted are the records that are neither processed, dead-lettered
	// (as read) nor skipped, whose last acknowledged letter went to a topic
	// that the delete fault deleted after it: dead-lettered (or forwarded
	// to a tier), then deleted by the fault, and not lost. The value is the
	// topic. A record whose letter was never acknowledged, or acknowledged
	// after the last deletion of its topic (so in the topic created again,
	// where the oracle's reader finds it), is not here.
	deleted map[pos]string
	// deletedAck is, for each record in deleted, the acknowledgement that
	// put it there.
	deletedAck map[pos]Event
	// copyDeleted are the records with a copy (a forward or a letter,
	// acknowledged) in a topic the delete fault deleted after it, whatever
	// became of them: the attempt count a tier copy carried went with it.
	copyDeleted map[pos]bool
	// copyForgotten are the records with a copy written to a tier the
	// fault deleted and created again, after the deletion but before the
	// writing process's consumer noticed it ("forget" event): per-key
	// order no longer holds behind them.
	copyForgotten map[pos]bool
	badLetter     []Violation
	// retryOff are the spans in which a member's kill switch was on
	// (retrying off), by member: from its "retry" event with on false to
	// the next one with on true, or to the member's next start (a new
	// process retries). None: no operator ever turned retrying off.
	retryOff map[int][]span
	starts   map[int][]int64 // when each member's processes started
	stops    map[int][]int64 // when each member's processes stopped cleanly (a killed one logs no stop)
}

// span is a time span in Unix nanoseconds.
type span struct{ from, to int64 }

// retryOffAt reports whether member m's kill switch was on at some moment
// of [from, to].
func (a *accounts) retryOffAt(m int, from, to int64) bool {
	for _, s := range a.retryOff[m] {
		if s.from <= to && from <= s.to {
			return true
		}
	}
	return false
}

// memberTimes builds accounts.retryOff, accounts.starts and
// accounts.stops (clean stops only) from the children's events.
func memberTimes(events []Event) (retryOff map[int][]span, starts, stops map[int][]int64) {
	byMember := map[int][]Event{}
	for _, e := range events {
		if e.Ev == "retry" || e.Ev == "start" || e.Ev == "stop" {
			byMember[e.Member] = append(byMember[e.Member], e)
		}
	}
	retryOff, starts, stops = map[int][]span{}, map[int][]int64{}, map[int][]int64{}
	for m, es := range byMember {
		slices.SortStableFunc(es, func(x, y Event) int { return cmp.Compare(x.T0, y.T0) })
		open := int64(-1)
		for _, e := range es {
			switch e.Ev {
			case "start":
				starts[m] = append(starts[m], e.T0)
			case "stop":
				// A stop with an error (a halt) is no clean stop: its open
				// transaction was aborted, as at a kill.
				if e.Err == "" {
					stops[m] = append(stops[m], e.T0)
				}
			}
			off := e.Ev == "retry" && e.On != nil && !*e.On
			switch {
			case off && open < 0:
				open = e.T0
			case !off && open >= 0:
				retryOff[m] = append(retryOff[m], span{open, e.T0})
				open = -1
			}
		}
		if open >= 0 {
			retryOff[m] = append(retryOff[m], span{open, math.MaxInt64})
		}
	}
	return retryOff, starts, stops
}

// killedBefore reports whether member m's process that skipped the record
// at at (at t) was killed rather than stopped, before any of the calls oks
// after t began, and before a commit past the record was seen: after t, m's
// next process started before that process logged a clean stop, before
// those calls, and no commit sample past the record falls between. A
// process killed and never restarted gives no time to order the calls by,
// so it does not count.
func (a *accounts) killedBefore(m int, t int64, oks []Event, at pos, commits []commitSample) bool {
	next := func(ts []int64) int64 {
		n := int64(math.MaxInt64)
		for _, x := range ts {
			if x > t && x < n {
				n = x
			}
		}
		return n
	}
	stop, start := next(a.stops[m]), next(a.starts[m])
	if start == math.MaxInt64 || start > stop {
		return false
	}
	if slices.ContainsFunc(commits, func(c commitSample) bool {
		return c.Partition == at.P && c.Committed > at.O && c.At > t && c.At < start
	}) {
		return false // the skip was committed before the kill
	}
	return !slices.ContainsFunc(oks, func(e Event) bool { return e.T0 > t && e.T0 < start })
}

// tryUnderWay reports whether a successful try of the record, by the
// process that skipped it (skip), began before Skip returned: the skip met
// a try under way, which settles the record as processed instead
// (Consumer.Skip).
func (a *accounts) tryUnderWay(skip Event, oks []Event) bool {
	return slices.ContainsFunc(oks, func(o Event) bool {
		return o.Member == skip.Member && o.T0 <= skip.T0 && !a.restarted(skip.Member, o.T0, skip.T0)
	})
}

// movedBefore reports whether the partition of a skipped record moved to
// another member before the skip was committed: another member handled the
// record from its source after the skip (it read the partition from a
// committed offset at or before the record), with no commit past the record
// in between. The skip is then at-least-once (Consumer.Skip). The commit
// that matters is the one before that member's first call, not before its
// first success: the member may settle the record itself (forward it to a
// tier, in a transaction that commits past it) before a later try succeeds
// (kfake seed 6530046).
func movedBefore(skip Event, calls []Event, at pos, commits []commitSample) bool {
	var next *Event
	for i := range calls {
		if o := &calls[i]; o.T0 > skip.T0 && o.Tier == 0 && (next == nil || o.T0 < next.T0) {
			next = o
		}
	}
	if next == nil || next.Member == skip.Member {
		return false
	}
	return !slices.ContainsFunc(commits, func(c commitSample) bool {
		return c.Partition == at.P && c.Committed > at.O && c.At > skip.T0 && c.At < next.T0
	})
}

// restarted reports whether a process of member m started in (from, to].
func (a *accounts) restarted(m int, from, to int64) bool {
	return slices.ContainsFunc(a.starts[m], func(t int64) bool { return t > from && t <= to })
}

// With eos, a processed record counts as processed only through its
// committed output (judge checks), so a record handled from a tier in a
// transaction that aborted can still be one the fault deleted: its copy in
// the tier went with the topic.
//
// In exactly-once mode an acknowledged copy may belong to a transaction that
// aborted: copies (forwards) are the tier records the oracle's reader saw
// read_committed, and an acknowledged copy in a topic the fault did not
// delete after it, which the reader did not see, is taken for aborted.
func account(source string, letterRecs, copies []*kgo.Record, events []Event, dels []deletion, margin time.Duration, eos bool) *accounts {
	a := &accounts{ok: map[pos][]Event{}, failed: map[pos]int{}, calls: map[pos][]Event{},
		skipped: map[pos]bool{}, skips: map[pos][]Event{}, letters: map[pos][]letter{}, acks: map[pos][]Event{}, deleted: map[pos]string{}, deletedAck: map[pos]Event{}, copyDeleted: map[pos]bool{}, copyForgotten: map[pos]bool{}}
	a.retryOff, a.starts, a.stops = memberTimes(events)
	for _, e := range events {
		at := pos{e.Part, e.Offset}
		switch e.Ev {
		case "call":
			if e.Topic != source {
				continue
			}
			a.calls[at] = append(a.calls[at], e)
			switch e.Res {
			case "ok":
				a.ok[at] = append(a.ok[at], e)
			case "transient", "permanent":
				a.failed[at]++
			}
		case "skip":
			if e.Err == "" && e.Topic == source {
				a.skipped[at] = true
				a.skips[at] = append(a.skips[at], e)
			}
		case "ack":
			if e.Topic == source {
				a.acks[at] = append(a.acks[at], e)
			}
		}
	}
	for _, r := range letterRecs {
		l, err := parseLetter(r)
		if err != nil {
			a.badLetter = append(a.badLetter, Violation{"letter-headers", err.Error()})
			continue
		}
		if l.topic != source {
			a.badLetter = append(a.badLetter, Violation{"letter-headers", fmt.Sprintf("letter %d@%d names topic %q, not %q", r.Partition, r.Offset, l.topic, source)})
			continue
		}
		a.letters[l.at] = append(a.letters[l.at], l)
	}
	// The copies the reader saw, by record and topic, and by record and
	// place: an acknowledgement that names its place (Event.ToPart, At)
	// is matched to that copy, not to another copy in the same topic.
	committed := map[copyOf]bool{}
	committedAt := map[copyAt]bool{}
	for _, r := range copies {
		if l, err := parseLetter(r); err == nil && l.topic == source {
			committed[copyOf{l.at, r.Topic}] = true
			committedAt[copyAt{l.at, r.Topic, r.Partition, r.Offset}] = true
		}
	}
	seen := func(at pos, e Event) bool {
		// franz-go acknowledges a write whose offset it does not know
		// (a duplicate of one it sent before) with -1.
		if e.ToPart != nil && e.At != nil && *e.At >= 0 {
			return committedAt[copyAt{at, e.To, *e.ToPart, *e.At}]
		}
		return committed[copyOf{at, e.To}]
	}
	var forgets []Event // the consumers' "forget" events (see forgetTee)
	for _, e := range events {
		if e.Ev == "forget" {
			forgets = append(forgets, e)
		}
	}
	for at, acks := range a.acks {
		for _, ack := range acks {
			for _, d := range dels {
				if d.Topic == ack.To && ack.T0 < d.End+margin.Nanoseconds() {
					a.copyDeleted[at] = true
				}
				if d.Topic == ack.To && a.forgotten(forgets, d, ack) {
					a.copyForgotten[at] = true
				}
			}
		}
		if (len(a.ok[at]) > 0 && !eos) || len(a.letters[at]) > 0 || a.skipped[at] {
			continue
		}
		if eos {
			acks = slices.DeleteFunc(slices.Clone(acks), func(e Event) bool {
				return !seen(at, e) && !deletedAfter(dels, e.To, e.T0-margin.Nanoseconds())
			})
			if len(acks) == 0 {
				continue
			}
		}
		last := slices.MaxFunc(acks, func(x, y Event) int { return cmp.Compare(x.T0, y.T0) })
		for _, d := range dels {
			if d.Topic == last.To && last.T0 < d.End+margin.Nanoseconds() {
				a.deleted[at], a.deletedAck[at] = d.Topic, last
				break
			}
		}
	}
	return a
}

// copyOf is a copy of a source record in a topic.
type copyOf struct {
	at    pos
	topic string
}

// copyAt is a copy of a source record at its place in a topic.
type copyAt struct {
	at     pos
	topic  string
	part   int32
	offset int64
}

// forgotten reports whether the process that wrote the copy ack stands for
// forgot it: its consumer noticed the deletion d of the copy's topic (the
// first "forget" event of that member and topic after d began, with no
// restart of the member in between) after the copy was acknowledged. A copy
// written to the topic created again before the consumer noticed is
// forgotten with those of the deleted topic: the consumer cannot tell them
// apart (docs/modes.md), and the later records of its key no longer wait
// for it. Without such an event, nothing is forgotten.
func (a *accounts) forgotten(forgets []Event, d deletion, ack Event) bool {
	if ack.T0 < d.Start {
		return false
	}
	first := int64(math.MaxInt64)
	for _, f := range forgets {
		if f.Member == ack.Member && f.To == d.Topic && f.T0 >= d.Start {
			first = min(first, f.T0)
		}
	}
	return first != math.MaxInt64 && ack.T0 < first && !a.restarted(ack.Member, ack.T0, first)
}

// deletedAfter reports whether the fault deleted topic after t (its
// deletion ended after t).
func deletedAfter(dels []deletion, topic string, t int64) bool {
	return slices.ContainsFunc(dels, func(d deletion) bool { return d.Topic == topic && d.End > t })
}

// unaccounted lists the source records that are neither processed,
// dead-lettered nor skipped (nor dead-lettered or forwarded, then deleted by
// the delete fault). In exactly-once mode (eos) a record is processed only
// once its output is committed (outputs, read_committed): one handled in a
// transaction that aborted is still to be handled again.
func unaccounted(src, letterRecs, copies, outputs []*kgo.Record, events []Event, dels []deletion, margin time.Duration, eos bool) []*kgo.Record {
	if len(src) == 0 {
		return nil
	}
	a := account(src[0].Topic, letterRecs, copies, events, dels, margin, eos)
	out := outputsBySource(outputs)
	var left []*kgo.Record
	for _, r := range src {
		at := pos{r.Partition, r.Offset}
		processed := len(a.ok[at]) > 0 && (!eos || out[at] > 0)
		if !processed && len(a.letters[at]) == 0 && !a.skipped[at] && a.deleted[at] == "" {
			left = append(left, r)
		}
	}
	return left
}

func (s snapshot) records(topic string) []*kgo.Record { return s.all(topic) }
func (s snapshot) letters(topic string) []*kgo.Record { return s.all(topic) }

// judge checks the promises.
func judge(sc *Scenario, f *facts) []Violation {
	var vs []Violation
	add := func(kind, format string, args ...any) {
		vs = append(vs, Violation{kind, fmt.Sprintf(format, args...)})
	}
	vs = append(vs, f.exits...)
	src := f.source
	slices.SortFunc(src, func(a, b *kgo.Record) int {
		return cmp.Or(cmp.Compare(a.Partition, b.Partition), cmp.Compare(a.Offset, b.Offset))
	})
	a := judgeAccounts(sc, f)
	vs = append(vs, a.badLetter...)
	byPos := map[pos]*kgo.Record{}
	for _, r := range src {
		byPos[pos{r.Partition, r.Offset}] = r
	}
	forwarded := map[pos]int{} // copies in the tiers, by source record
	for _, r := range f.forwards {
		if l, err := parseLetter(r); err == nil && l.topic == sc.Source() {
			forwarded[l.at]++
		}
	}
	outputs := outputsBySource(f.outputs)

	for _, r := range src {
		at := pos{r.Partition, r.Offset}
		v, perr := ParseValue(r.Value)
		pill := perr != nil
		ls := a.letters[at]
		oks := a.ok[at]
		// Nothing lost. A record whose letter Kafka acknowledged before
		// the delete fault deleted its topic was dead-lettered (or
		// forwarded), then deleted by the fault: the run's doing.
		if len(oks) == 0 && len(ls) == 0 && !a.skipped[at] && a.deleted[at] == "" {
			if fw := forwarded[at]; fw > 0 {
				add("unsettled", "record %s (value %.40q) is in a retry tier (%d copies), not yet processed, dead-lettered or skipped by the end of the run; calls: %s",
					at, r.Value, fw, calls(a.calls[at]))
			} else if c, ok := f.committed[r.Partition]; ok && c > r.Offset {
				add("lost", "record %s (value %.40q) was never processed, dead-lettered or skipped, and the group committed %d past it; calls: %s",
					at, r.Value, c, calls(a.calls[at]))
			} else {
				add("unsettled", "record %s (value %.40q) was never processed, dead-lettered or skipped by the end of the run (committed %d); calls: %s",
					at, r.Value, f.committed[r.Partition], calls(a.calls[at]))
			}
		}
		// No letter without a permanent failure or an exhausted policy.
		for _, l := range ls {
			if !bytes.Equal(l.rec.Key, r.Key) || !bytes.Equal(l.rec.Value, r.Value) || (l.rec.Key == nil) != (r.Key == nil) {
				add("letter-content", "letter %d@%d of record %s: key/value differ from the source", l.rec.Partition, l.rec.Offset, at)
			}
			if pill {
				continue
			}
			switch {
			case v.Perm:
			case v.Fail >= sc.Mode.TotalTries():
			case len(a.retryOff) > 0 && l.reason == "retry-disabled":
			default:
				add("unexpected-letter", "record %s fails %d times, fewer than the %d tries the policy gives, yet it was dead-lettered (reason %q, attempts %d); calls: %s",
					at, v.Fail, sc.Mode.TotalTries(), l.reason, l.attempts, calls(a.calls[at]))
			}
			// Attempts never ahead of the failures made.
			if l.stage == string(deadletter.StageProcess) && l.attempts > a.failed[at] {
				add("attempts-ahead", "letter of record %s says %d attempts, the handler failed it %d times; calls: %s",
					at, l.attempts, a.failed[at], calls(a.calls[at]))
			}
		}
		if !pill && !v.Perm && v.Fail >= sc.Mode.TotalTries() && len(oks) > 0 {
			add("tried-beyond-policy", "record %s fails on its first %d tries, the policy gives %d, yet a try succeeded: %s",
				at, v.Fail, sc.Mode.TotalTries(), calls(a.calls[at]))
		}
		// Durable attempts: without a crash, a record is tried no more
		// often than its policy says, across rebalances and clean stops;
		// unless the fault deleted a tier copy of it, with the attempt
		// count it carried (the record is then handled again from an
		// earlier copy, or from its source).
		if !pill && !v.Perm && f.durable && a.failed[at] > sc.Mode.TotalTries() && !a.copyDeleted[at] {
			add("attempts-lost", "record %s failed %d times, the policy gives %d tries, and no process crashed: the attempt count was lost; calls: %s",
				at, a.failed[at], sc.Mode.TotalTries(), calls(a.calls[at]))
		}
		if !pill && len(oks) > 0 && v.Perm {
			add("processed-rejected", "record %s is rejected by the handler but shows as processed", at)
		}
		// Exactly-once outputs.
		if sc.Mode.ExactlyOnce {
			n := outputs[at]
			switch {
			case n > 1:
				add("duplicate-output", "record %s has %d outputs read_committed; calls: %s", at, n, calls(a.calls[at]))
			case n == 1 && len(ls) > 0:
				add("output-and-letter", "record %s has an output and a letter, both read_committed; calls: %s", at, calls(a.calls[at]))
			case n == 1 && a.skipped[at] && slices.ContainsFunc(a.skips[at], func(e Event) bool {
				return !a.killedBefore(e.Member, e.T0, oks, at, f.commits) && !a.tryUnderWay(e, oks) && !movedBefore(e, a.calls[at], at, f.commits)
			}):
				// Consumer.Skip returned nil, yet the record was
				// processed and its output committed: the skip was
				// undone (by an aborted transaction, say). A skip that
				// a kill of its process undid, before a transaction
				// committed it, is at-least-once: the record was not
				// settled yet (kfake seed 9700023). A skip that met a
				// try of the record under way, which succeeded, is a
				// record processed (kfake seed 9830085). So is a skip
				// whose partition moved to another member before it
				// was committed (seeds 6500041, 6530046).
				add("skip-undone", "record %s was skipped by an operator (Skip returned nil), then processed with its output committed; calls: %s", at, calls(a.calls[at]))
			case n == 0 && len(oks) > 0 && len(ls) == 0 && !a.skipped[at] && a.deleted[at] == "":
				add("missing-output", "record %s was processed but has no committed output; calls: %s", at, calls(a.calls[at]))
			}
			if len(ls) > 1 {
				add("duplicate-letter", "record %s has %d letters read_committed", at, len(ls))
			}
		}
	}
	// Every output belongs to a source record.
	for at := range outputs {
		if byPos[at] == nil {
			add("stray-output", "output for %s, which is not a source record", at)
		}
	}
	// The group's offsets reach the end of every source partition.
	for p, end := range f.ends {
		if c := f.committed[p]; end > 0 && c < end {
			add("commit-behind", "partition %d: committed %d, end %d", p, c, end)
		}
	}
	vs = append(vs, orderViolations(sc, src, a)...)
	vs = append(vs, commitAhead(src, a, f)...)
	vs = append(vs, rssViolations(sc, src, f.events)...)
	vs = append(vs, stuckViolations(sc, f.events)...)
	return vs
}

// stuckBound is how long a partition may stay stuck on one record: its
// tries in place (each with its backoff and the handler's latency), plus
// the longest fault of the scenario (a hung broker, a cut, a deleted topic
// and its letters waiting, an operator's pause), plus a margin for the
// client to find its way back (reconnects, metadata, a rebalance): 15 s on
// kfake, 45 s on the cluster.
func stuckBound(sc *Scenario) time.Duration {
	d := time.Duration(sc.Mode.Tries) * ms(sc.Mode.BackoffMs+sc.LatencyMs)
	longest := 0
	for _, f := range sc.Faults {
		longest = max(longest, f.ForMs)
	}
	margin := 15 * time.Second
	if sc.Backend == "cluster" {
		margin = 45 * time.Second
	}
	return d + ms(longest) + margin
}

// stuckViolations checks that no record kept its partition stuck (as
// Stats().Stuck showed it, read every 250ms by the children) for longer
// than the scenario explains (stuckBound). A record stuck since before the
// process that showed it started (durable attempts carry the time of its
// first failure across a kill) counts from that start: the kill's downtime
// is the fault's, not the consumer's (kfake seed 9700094). Only the time
// the member held the partition counts (its "assign" and "revoke" events):
// the time a process spent joining the group, or the partition spent with
// another member, is the group's (kfake seed 30000160, where a join took
// 21 s). Logs without those events count the whole time.
func stuckViolations(sc *Scenario, events []Event) []Violation {
	bound := stuckBound(sc)
	_, starts, _ := memberTimes(events)
	owned := map[memberPart][]Event{}
	for _, e := range events {
		if e.Ev == "assign" || e.Ev == "revoke" || e.Ev == "start" {
			k := memberPart{e.Member, e.Topic, e.Part}
			if e.Ev == "start" {
				k = memberPart{member: e.Member}
			}
			owned[k] = append(owned[k], e)
		}
	}
	var vs []Violation
	for _, e := range events {
		if e.Ev != "stuck" || e.T0 == 0 {
			continue
		}
		from := e.T0
		for _, t := range starts[e.Member] {
			if t > from && t <= e.T1 {
				from = t
			}
		}
		d := time.Duration(e.T1 - from)
		if own := owned[memberPart{e.Member, e.Topic, e.Part}]; len(own) > 0 {
			d = held(append(slices.Clone(owned[memberPart{member: e.Member}]), own...), from, e.T1)
		}
		if d > bound {
			vs = append(vs, Violation{"stuck-too-long", fmt.Sprintf("member %d: %s/%d stuck on offset %d (%s) for %v, more than the %v its tries and the scenario's faults explain",
				e.Member, e.Topic, e.Part, e.Offset, e.Err, d.Round(time.Millisecond), bound)})
		}
	}
	return vs
}

// held is how long, within [from, to], a member held a partition, from its
// starts and the partition's assignments and revokes (a start holds
// nothing until the next assignment).
func held(es []Event, from, to int64) time.Duration {
	slices.SortStableFunc(es, func(x, y Event) int { return cmp.Compare(x.T0, y.T0) })
	var d time.Duration
	since := int64(-1) // held since, or -1
	for _, e := range es {
		if e.T0 > to {
			break
		}
		switch e.Ev {
		case "assign":
			if since < 0 {
				since = e.T0
			}
		default: // revoke, start
			if since >= 0 {
				d += overlap(since, e.T0, from, to)
			}
			since = -1
		}
	}
	if since >= 0 {
		d += overlap(since, to, from, to)
	}
	return d
}

// overlap is the length of [a, b] within [from, to].
func overlap(a, b, from, to int64) time.Duration {
	return time.Duration(max(0, min(b, to)-max(a, from)))
}

// memberPart is a partition as one member holds it.
type memberPart struct {
	member int
	topic  string
	part   int32
}

// rssMarginKiB is the resident set a consumer process may have beside what
// it buffers: the Go runtime, its franz-go clients (the consumer's, and
// those of the tiers, the durable attempts and large letters) and the
// child's log.
const rssMarginKiB = 64 << 10

// rssBoundKiB is the peak resident set a consumer process may reach: the
// margin, plus four copies (fetched, decompressed, buffered, in a letter)
// of what its buffer may hold, which is the configured bound
// (Config.Buffer: TotalBytes, or TotalRecords records of the topic's
// largest size) or the whole workload when that is less.
func rssBoundKiB(sc *Scenario, workload int64) int64 {
	// The consumer's defaults (BufferLimits), and TotalRecords as
	// Scenario.config sets it.
	total, records := int64(64<<20), int64(80000)
	if sc.Mode.BufferRecords > 0 {
		records = 2 * int64(sc.Mode.BufferRecords)
	}
	buffered := min(total, records*int64(sc.MaxMessage), workload)
	return rssMarginKiB + 4*buffered>>10
}

// rssViolations checks the peak resident set of every consumer process that
// stopped cleanly (its "stop" event; a killed one logs none).
func rssViolations(sc *Scenario, src []*kgo.Record, events []Event) []Violation {
	var workload int64
	for _, r := range src {
		workload += int64(len(r.Key) + len(r.Value))
		for _, h := range r.Headers {
			workload += int64(len(h.Key) + len(h.Value))
		}
	}
	bound := rssBoundKiB(sc, workload)
	var vs []Violation
	for _, e := range events {
		if e.Ev == "stop" && e.RSSKiB > bound {
			vs = append(vs, Violation{"rss", fmt.Sprintf("member %d peaked at %d KiB resident, above its bound of %d KiB (%d KiB margin, four times what its buffer may hold of a %d-byte workload)",
				e.Member, e.RSSKiB, bound, rssMarginKiB, workload)})
		}
	}
	return vs
}

// judgeAccounts is account for the judge. In exactly-once mode a letter is
// acknowledged inside a transaction that may still abort (and its record be
// handled again), so a record counts as deleted by the fault only when
// either that transaction committed and the acknowledgement came before
// the deletion ended (the member's next transaction end after the
// acknowledgement is a commit: txnCommitted; the topic may be deleted
// before the commit, which Kafka does not refuse), or the group's offset
// was seen past it (committed in that transaction, or a later one) before
// the deletion ended.
func judgeAccounts(sc *Scenario, f *facts) *accounts {
	a := account(sc.Source(), f.letters, f.forwards, f.events, f.deletes, f.deleteMargin, sc.Mode.ExactlyOnce)
	if !sc.Mode.ExactlyOnce {
		return a
	}
	outputs := outputsBySource(f.outputs)
	for at, topic := range a.deleted {
		if outputs[at] > 0 {
			delete(a.deleted, at) // processed after all: its output committed
			continue
		}
		last := a.deletedAck[at]
		if txnCommitted(f.events, last) && acknowledgedBefore(f.deletes, topic, last.T0) {
			continue
		}
		ok := false
		for _, d := range f.deletes {
			end := d.End + f.deleteMargin.Nanoseconds()
			if d.Topic != topic || last.T0 >= end {
				continue
			}
			for _, c := range f.commits {
				ok = ok || (c.Partition == at.P && c.Committed > at.O && c.At <= end)
			}
		}
		if !ok {
			delete(a.deleted, at)
		}
	}
	return a
}

// acknowledgedBefore reports whether an acknowledgement at t0 came before
// a deletion of topic ended: the letter was in the topic deleted, not in
// the one created again after it (account allows a margin for that).
func acknowledgedBefore(dels []deletion, topic string, t0 int64) bool {
	for _, d := range dels {
		if d.Topic == topic && t0 < d.End {
			return true
		}
	}
	return false
}

// txnCommitted reports whether the transaction that acknowledged letter
// ack committed: the first transaction end its member logged after it is a
// commit (the consumer tells a transaction's end after the
// acknowledgements of its letters), with no restart of the member between.
func txnCommitted(events []Event, ack Event) bool {
	var next *Event
	for i := range events {
		e := &events[i]
		if e.Member != ack.Member || e.T0 <= ack.T0 || next != nil && e.T0 >= next.T0 {
			continue
		}
		switch e.Ev {
		case "commit", "abort", "start", "stop":
			next = e
		}
	}
	return next != nil && next.Ev == "commit"
}

// outputsBySource counts the exactly-once outputs of each source record
// (an output's value is "partition/offset").
func outputsBySource(outs []*kgo.Record) map[pos]int {
	n := map[pos]int{}
	for _, o := range outs {
		var p int32
		var off int64
		if _, err := fmt.Sscanf(string(o.Value), "%d/%d", &p, &off); err == nil {
			n[pos{p, off}]++
		}
	}
	return n
}

// commitAhead checks that no commit passed a record before it was settled:
// processed (a successful call ended), skipped, dead-lettered or forwarded
// to a tier (the letter's or copy's timestamp is its write's start). One
// violation per partition, the first.
func commitAhead(src []*kgo.Record, a *accounts, f *facts) []Violation {
	settled := map[pos]int64{}
	at := func(p pos, t int64) {
		if old, ok := settled[p]; !ok || t < old {
			settled[p] = t
		}
	}
	for p, es := range a.ok {
		t, _ := minT1(es)
		at(p, t)
	}
	for _, e := range f.events {
		if e.Ev == "skip" && e.Err == "" {
			at(pos{e.Part, e.Offset}, e.T0)
		}
	}
	for p, ls := range a.letters {
		for _, l := range ls {
			at(p, l.rec.Timestamp.UnixNano())
		}
	}
	for _, r := range f.forwards {
		if l, err := parseLetter(r); err == nil {
			at(l.at, r.Timestamp.UnixNano())
		}
	}
	// A letter acknowledged settled its record too, even when a delete
	// fault destroyed it before the oracle's reader saw it.
	for p, es := range a.acks {
		t, _ := minT0(es)
		at(p, t)
	}
	byPart := map[int32][]*kgo.Record{}
	for _, r := range src {
		byPart[r.Partition] = append(byPart[r.Partition], r)
	}
	var vs []Violation
	reported := map[int32]bool{}
	for _, c := range f.commits {
		if reported[c.Partition] {
			continue
		}
		for _, r := range byPart[c.Partition] { // sorted by offset
			if r.Offset >= c.Committed {
				break
			}
			p := pos{r.Partition, r.Offset}
			if t, ok := settled[p]; !ok || t > c.At {
				vs = append(vs, Violation{"commit-ahead", fmt.Sprintf("partition %d: offset %d was committed (seen at %d) before record %s was settled (at %d, 0: never); calls: %s",
					c.Partition, c.Committed, c.At, p, t, calls(a.calls[p]))})
				reported[c.Partition] = true
				break
			}
		}
	}
	return vs
}

// orderViolations checks per-key order within each source partition where
// the mode promises it: the first successful call of a record begins after
// the first successful call of the previous record of its key ended (or,
// for a previous record that never succeeded, after it was first tried).
func orderViolations(sc *Scenario, src []*kgo.Record, a *accounts) []Violation {
	keys, nullKeys := sc.Mode.OrderedKeys()
	if !keys {
		return nil
	}
	type lane struct {
		p   int32
		key string
		nil bool
	}
	last := map[lane]*kgo.Record{}
	var vs []Violation
	for _, r := range src { // sorted by partition and offset
		if r.Key == nil && !nullKeys {
			continue
		}
		l := lane{r.Partition, string(r.Key), r.Key == nil}
		prev := last[l]
		last[l] = r
		if prev == nil {
			continue
		}
		bt, ok := minT0(a.ok[pos{r.Partition, r.Offset}])
		if !ok {
			continue
		}
		pp := pos{prev.Partition, prev.Offset}
		m := firstOK(a.ok[pos{r.Partition, r.Offset}]).Member
		if a.givenUp(pp, m, bt) || a.skippedBefore(pp, m, bt) {
			continue
		}
		if a.copyDeleted[pp] || a.copyForgotten[pp] {
			// A copy of it was in a topic the fault deleted, or was
			// written to the topic created again before the consumer
			// noticed: the consumer forgot it, and the later records
			// of its key no longer wait for it (docs/modes.md; kfake
			// seeds 6220103, 84000104).
			continue
		}
		if at, ok := minT1(a.ok[pp]); ok {
			if bt < at {
				vs = append(vs, Violation{"order", fmt.Sprintf("key %q partition %d: record %d began (%d) before record %d first succeeded (%d); calls of %d: %s; of %d: %s",
					r.Key, r.Partition, r.Offset, bt, prev.Offset, at, prev.Offset, calls(a.calls[pp]), r.Offset, calls(a.calls[pos{r.Partition, r.Offset}]))})
			}
			continue
		}
		if t0, ok := minT0(a.calls[pp]); ok && bt < t0 {
			vs = append(vs, Violation{"order", fmt.Sprintf("key %q partition %d: record %d succeeded before record %d was first tried", r.Key, r.Partition, r.Offset, prev.Offset)})
		}
	}
	return vs
}

// skippedBefore reports whether member m skipped the record at pp (Skip
// returned nil) before bt, with no restart of m in between: the skip
// settled it, so the next record of its key was free to run. A success of
// pp after that is the record handled again after a crash undid the skip
// (it was never committed: at-least-once), not a broken order; so m must
// have restarted before it (a skipped record handled by the same process
// is no excuse).
func (a *accounts) skippedBefore(pp pos, m int, bt int64) bool {
	for _, e := range a.skips[pp] {
		if e.Member != m || e.T0 > bt || a.restarted(m, e.T0, bt) {
			continue
		}
		var again int64 = math.MaxInt64 // pp's first success after the skip
		for _, o := range a.ok[pp] {
			if o.T0 > e.T0 && o.T0 < again {
				again = o.T0
			}
		}
		if again == math.MaxInt64 || a.restarted(m, e.T0, again) {
			return true
		}
	}
	return false
}

// givenUp reports whether member m gave up on the record at pp before bt:
// a call of it failed, and m's kill switch was on at some moment between
// the end of that call and m's next call of it (or bt), the span in which
// the consumer decides what follows a failure (at once, or in the retry
// wait, which the kill switch ends), with no restart of m in between. The
// consumer then dead-lettered it at once and the next record of its key was
// free to run; a success of pp after that is the record handled again after
// its letter was lost with the member (a kill before Kafka acknowledged it,
// at-least-once), not a broken order.
func (a *accounts) givenUp(pp pos, m int, bt int64) bool {
	for _, e := range a.calls[pp] {
		if e.Member != m || (e.Res != "transient" && e.Res != "permanent") || e.T1 > bt {
			continue
		}
		end := bt
		for _, n := range a.calls[pp] {
			if n.Member == m && n.T0 > e.T1 && n.T0 < end {
				end = n.T0
			}
		}
		if a.restarted(m, e.T1, bt) {
			continue // a new process: the decision after e was not the one that let bt run
		}
		if a.retryOffAt(m, e.T1, end) {
			return true
		}
	}
	return false
}

// firstOK is the call of es that began first.
func firstOK(es []Event) Event {
	return slices.MinFunc(es, func(x, y Event) int { return cmp.Compare(x.T0, y.T0) })
}

func minT0(es []Event) (int64, bool) {
	if len(es) == 0 {
		return 0, false
	}
	m := es[0].T0
	for _, e := range es[1:] {
		m = min(m, e.T0)
	}
	return m, true
}

func minT1(es []Event) (int64, bool) {
	if len(es) == 0 {
		return 0, false
	}
	m := es[0].T1
	for _, e := range es[1:] {
		m = min(m, e.T1)
	}
	return m, true
}

// calls summarises the handler calls of a record, for the evidence.
func calls(es []Event) string {
	if len(es) == 0 {
		return "none"
	}
	var b strings.Builder
	for i, e := range es {
		if i == 8 {
			fmt.Fprintf(&b, " ... (%d calls)", len(es))
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "m%d att%d tier%d %s", e.Member, e.Att, e.Tier, e.Res)
	}
	return b.String()
}
