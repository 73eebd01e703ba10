package consumer

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// RetryTopics configures non-blocking retries: a failed record whose
// [Rule] says [ActionRetryTopic] is forwarded to a delay tier, a topic such as
// "orders.retry.30s", and its partition moves on. The consumer reads the tiers
// in the same group; a tier partition whose head record is not due yet has its
// fetching paused until it is, and the record is then tried again. Each time
// it fails again it goes to the next tier; after the last one it gets Then
// (the dead-letter topic by default).
//
// A forwarded record keeps its key, value and headers byte for byte, plus the
// failure headers of a dead letter (the attempts so far, the first and last
// failure time, the original topic, partition and offset, the last error) and
// [HeaderRetryTier], [HeaderRetryDue] and [HeaderRetryParked]. The attempt
// count and the first failure time travel in the record, so they survive
// restarts and rebalances. The handler sees a record read from a tier as its
// original: Record.Raw has the source topic, partition, offset, timestamp and
// headers; Record.Attempt counts every try and Record.Tier says which tier
// it came from.
//
// Tier topics are created like dead-letter topics: the source topic's
// partition count (tier partition = source partition) and room for the
// headers. A forward is acknowledged before the source offset moves on, like a
// dead letter.
//
// # Per-key order
//
// On by default: while a key has a record in the tiers, later records of that
// key from the same source partition are not processed ahead of it. They are
// parked: forwarded behind it (HeaderRetryParked), and processed in source
// order once it is settled (processed, dead-lettered or skipped). A park waits
// while the first copy of an earlier record of the key is still being written
// to a tier, or its write failed: lost, that record would be back at its
// source while the parked one was in a tier. Keys without a record in the
// tiers are not delayed at all. Records without a key (a nil
// key) are not ordered: each is retried on its own, and later unkeyed records
// go ahead of it.
//
// A parked record is written to the tiers once. When a tier partition reads
// it while an earlier record of its key is still in the tiers (that record
// failed again and moved on to a later tier), it is held: it waits in memory
// until that record is settled, and is then handled before the partition's
// next records (within Concurrency.Max: one at a time without it), while
// the tier partition goes on with its other records (they leave its buffer,
// and Concurrency.Ahead, at least 10,000 here, and AheadBytes bound them).
// Its tier partition commits below it: after a crash, a rebalance or a
// restart, the next owner reads that partition again from it, and the
// records settled behind it are handled again (at-least-once; a copy
// forwarded on meanwhile may be forwarded again). A held record is parked
// again, into the tier of the record it waits for, when its partition is at
// that bound, when a letter behind it fails to be written (it is written
// again only once the records before it are settled), or after twice the
// longest tier's delay plus ten seconds (the record it waits for may be a
// copy in a tier topic deleted meanwhile, which a write there would find);
// and it is parked at once when that record's tier partition is not
// assigned to this member (or stops being). A held record is not stuck: it is not
// in Stats.Stuck and cannot be skipped; an operator's Pause stops it before
// it is handled. Two copies of one record in a tier partition (a write
// repeated) may be handled at once. With [ExactlyOnce], held records are
// parked again instead: a transaction writes a partition's forwards in
// offset order, so a forward behind a held record would wait for it.
// Stats.Held counts the holds.
//
// The parked keys of a source partition are rebuilt when it is assigned, from
// the records its tier partitions hold past the group's committed offsets;
// its records wait until that is done. To find them, a source partition and its
// tier partitions must be assigned to the same member: with retry topics the
// consumer uses the range assignor, which gives partition N of every topic
// with the same partition count to one member (with [GroupConsumer], the
// broker's range assignor). Every member of the group must run with the same
// topics and tiers; turning retry topics on for an existing group changes its
// assignor, so restart all its members together. MaxParked bounds the records of
// one source partition that are in the tiers; at the bound the source
// partition stops (a warning, and Partition.Paused is PauseParked) until its
// tiers drain below it.
type RetryTopics struct {
	// Tiers are the delays, in order: a record forwarded for the first time
	// goes to the first tier, and to the next each time it fails again.
	// Empty: no retry topics. Each is at least 10ms, in whole milliseconds,
	// and different from the others.
	Tiers []time.Duration
	// Topic names the tier topics. It may use {topic}, {group} and {delay}
	// (the tier's delay: 250ms, 1s, 30s, 5m, 1h30m). Optional:
	// "{topic}.retry.{delay}".
	Topic deadletter.Template
	// Then is what happens to a record that fails in the last tier.
	// Optional: ActionDeadLetter. It cannot be ActionRetryTopic.
	Then Action
	// Unordered turns per-key order off: later records of a key go ahead
	// of one in the tiers, as with Spring Kafka's retry topics.
	Unordered bool
	// MaxParked bounds the records of one source partition in the tiers
	// (failed or parked) that per-key order tracks. Optional: 10000.
	MaxParked int
}

// Retry headers of a record in a tier, besides the failure headers of a
// dead letter.
const (
	// HeaderRetryTier is the number of tiers the record has been forwarded
	// to after failing: 1 in the first tier.
	HeaderRetryTier = "antidote.retry.tier"
	// HeaderRetryDue is when the record is due to be tried again (RFC 3339,
	// UTC, milliseconds).
	HeaderRetryDue = "antidote.retry.due"
	// HeaderRetryParked is "true" on a record forwarded only to keep it
	// behind an earlier record of its key.
	HeaderRetryParked = "antidote.retry.parked"
	// HeaderRetryForwards counts the forwards of the record to a tier,
	// failed or parked: the copy with the highest count is the current
	// one, an older copy read again after a crash is passed over.
	HeaderRetryForwards = "antidote.retry.forwards"
)

// Reasons of the failure headers of a record in a tier.
const (
	// ReasonRetryTopic: the record failed and waits in a tier.
	ReasonRetryTopic deadletter.Reason = "retry-topic"
	// ReasonParked: the record waits behind an earlier record of its key.
	ReasonParked deadletter.Reason = "parked"
)

const (
	defaultRetryTopic = "{topic}.retry.{delay}"
	defaultMaxParked  = 10000
)

func (r RetryTopics) on() bool { return len(r.Tiers) > 0 }

// DelayName is how a delay appears in a tier topic's name: 250ms, 1s, 30s,
// 5m, 1h30m.
func DelayName(d time.Duration) string {
	var b strings.Builder
	for _, u := range []struct {
		d time.Duration
		s string
	}{{time.Hour, "h"}, {time.Minute, "m"}, {time.Second, "s"}, {time.Millisecond, "ms"}} {
		if n := d / u.d; n > 0 {
			b.WriteString(strconv.FormatInt(int64(n), 10))
			b.WriteString(u.s)
			d -= n * u.d
		}
	}
	if b.Len() == 0 {
		return "0ms"
	}
	return b.String()
}

// TierTopic returns the name of the tier topic with the given delay for a
// source topic and group.
func (r RetryTopics) TierTopic(topic, group string, delay time.Duration) string {
	t := string(r.Topic)
	if t == "" {
		t = defaultRetryTopic
	}
	return deadletter.Template(strings.ReplaceAll(t, "{delay}", DelayName(delay))).Name(topic, group)
}

func (r RetryTopics) validate() error {
	if !r.on() {
		return nil
	}
	seen := map[time.Duration]int{}
	for i, d := range r.Tiers {
		key := "RetryTopics.Tiers[" + strconv.Itoa(i) + "]"
		if d < 10*time.Millisecond || d%time.Millisecond != 0 {
			return configErr(key, fmt.Sprintf("%v: a delay is at least 10ms, in whole milliseconds", d))
		}
		if j, dup := seen[d]; dup {
			return configErr(key, fmt.Sprintf("%v: the same delay as Tiers[%d]; each tier has its own topic", d, j))
		}
		seen[d] = i
	}
	t := string(r.Topic)
	if t != "" {
		if !strings.Contains(t, "{delay}") {
			return configErr("RetryTopics.Topic", fmt.Sprintf("%q: use {delay}, so that each tier has a topic of its own", t))
		}
		if err := deadletter.Template(strings.ReplaceAll(t, "{delay}", "30s")).Validate(); err != nil {
			return configErr("RetryTopics.Topic", err.Error()+" ({delay} is known too)")
		}
	}
	switch r.Then {
	case ActionRetryTopic:
		return configErr("RetryTopics.Then", "ActionRetryTopic: after the last tier comes ActionDeadLetter, ActionSkip or ActionHalt")
	case ActionDeadLetter, ActionSkip, ActionHalt:
	default:
		return configErr("RetryTopics.Then", fmt.Sprintf("unknown action %d", r.Then))
	}
	if r.MaxParked < 0 {
		return configErr("RetryTopics.MaxParked", "negative")
	}
	return nil
}

// tiers is what the consumer knows of the retry topics: the tier topics of
// each source topic, and the per-key order of each source partition.
type tiers struct {
	cfg     RetryTopics
	ordered bool
	group   string
	byTopic map[string]tierOf   // tier topic -> its source and index
	names   map[string][]string // source topic -> tier topics, in order
	opts    []kgo.Opt           // to read the tiers with a client of its own
	adm     *kadm.Client

	mu   sync.Mutex
	fams map[tp]*family // by source topic and partition
}

type tierOf struct {
	source string
	index  int // 0-based
}

func newTiers(cfg RetryTopics, sources []string, group string) *tiers {
	if cfg.MaxParked == 0 {
		cfg.MaxParked = defaultMaxParked
	}
	t := &tiers{cfg: cfg, ordered: !cfg.Unordered, group: group, byTopic: map[string]tierOf{}, names: map[string][]string{}, fams: map[tp]*family{}}
	for _, src := range sources {
		for i, d := range cfg.Tiers {
			n := cfg.TierTopic(src, group, d)
			t.byTopic[n] = tierOf{source: src, index: i}
			t.names[src] = append(t.names[src], n)
		}
	}
	return t
}

// topics returns every tier topic, sorted.
func (t *tiers) topics() []string {
	out := make([]string, 0, len(t.byTopic))
	for n := range t.byTopic {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// checkNames rejects tier topics that collide with a source topic or with
// each other.
func (t *tiers) checkNames(sources []string) error {
	if n := len(sources) * len(t.cfg.Tiers); len(t.byTopic) != n {
		return configErr("RetryTopics.Topic", "two tiers (or two source topics) get the same topic name: use {topic} and {delay}")
	}
	for _, s := range sources {
		if _, clash := t.byTopic[s]; clash {
			return configErr("RetryTopics.Topic", fmt.Sprintf("tier topic %s is also a source topic", s))
		}
	}
	return nil
}

// family returns the per-key order of a source partition, creating it (not
// ready: whoever created it rebuilds it) when missing.
func (t *tiers) family(source string, part int32) (f *family, created bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	k := tp{source, part}
	f = t.fams[k]
	if f == nil {
		f = newFamily(source, part, t.cfg.MaxParked)
		t.fams[k] = f
		created = true
	}
	return f, created
}

// reset replaces every family with one rebuilt from the tiers: after an
// aborted transaction (ExactlyOnce), what the old ones knew of the forwards
// is void. The workers are stopped; the new ones take the new families.
func (t *tiers) reset(ctx context.Context, log func(msg string, args ...any)) {
	if !t.ordered {
		return
	}
	t.mu.Lock()
	fams := make(map[tp]*family, len(t.fams))
	for k := range t.fams {
		f := newFamily(k.topic, k.partition, t.cfg.MaxParked)
		t.fams[k], fams[k] = f, f
	}
	t.mu.Unlock()
	if len(fams) > 0 {
		go t.rebuild(ctx, fams, log)
	}
}

// gone forgets the copies that tier topic held: it was deleted (an
// operator's doing), and they went with it, and so did the records they
// stood for. An entry left for one would be a ghost (see family). Without
// per-key order there is nothing to forget.
func (t *tiers) gone(topic string) {
	to, ok := t.byTopic[topic]
	if !ok || !t.ordered {
		return
	}
	t.mu.Lock()
	var fams []*family
	for k, f := range t.fams {
		if k.topic == to.source {
			fams = append(fams, f)
		}
	}
	t.mu.Unlock()
	for _, f := range fams {
		f.gone(to.index)
	}
}

// drop forgets the families of revoked source partitions, but for those
// some of whose tier partitions this member still owns (held reports it):
// their workers go on using the family, which is rebuilt when the source
// partition comes back (assignTiers). The records held behind a copy in a
// revoked tier partition are woken: another member (or nobody, if its topic
// was deleted) settles that copy now, so they are parked.
func (t *tiers) drop(m map[string][]int32, held func(topic string, part int32) bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for topic, ps := range m {
		if ti, tier := t.byTopic[topic]; tier {
			// The records held behind a copy in it look again: they
			// are parked now (partition.hold).
			for _, p := range ps {
				if f := t.fams[tp{ti.source, p}]; f != nil {
					f.mu.Lock()
					f.wakeKeys()
					f.mu.Unlock()
				}
			}
			continue
		}
	next:
		for _, p := range ps {
			for _, n := range t.names[topic] {
				if held(n, p) {
					continue next
				}
			}
			delete(t.fams, tp{topic, p})
		}
	}
}

// family is the per-key order of one source partition and its tier
// partitions: for each key with records in the tiers, their source offsets,
// in order. It is shared by the workers of the source partition and of its
// tier partitions.
//
// An entry must not outlive its record: one left for a record settled
// elsewhere (a ghost) would park every later record of its key, and a tier
// worker would park them again and again. So a rebuild never starts from
// nothing while workers run: it adds what the tiers hold past the group's
// committed offsets, but not what this member's tier workers have taken
// (seen: each got its entry when taken, kept until it is settled), then drops the
// entries whose copy lies below a committed offset (consumed and committed,
// here or by another member) and those whose write failed for good.
type family struct {
	source string // the source topic and partition
	part   int32
	mu     sync.Mutex
	ready  chan struct{} // closed when rebuilt; replaced by reset
	keys   map[string][]entry
	n      int
	max    int
	room   chan struct{} // closed when n drops under max; nil while nobody waits
	// changed is closed at the next end of a write or removal of an entry;
	// nil while nobody waits (see unwritten).
	changed chan struct{}
	// seen is, by tier index, the offset after the last record this
	// member's worker of the tier partition has taken.
	seen map[int]int64
	// freed is, by key and offset, a channel closed when the record of key
	// at that offset, held behind its key, may go on: the entries before
	// it went, or the earliest one's copy is lost (blocked). nil while
	// nobody waits.
	freed map[string]map[int64]chan struct{}
}

type entry struct {
	offset   int64 // in the source partition
	tier     int   // index of the tier that holds its current copy
	forwards int   // HeaderRetryForwards of its current copy
	// at is the offset of its current copy in the tier partition, -1 until
	// the write of that copy is acknowledged; writing counts the writes of
	// the copy in flight, and by is closed when the worker that writes it
	// stops (nil for a copy read from the tiers).
	at      int64
	writing int32
	by      <-chan struct{}
	// prev is the copy before the current one (a tier record forwarded or
	// parked again): where the record still is if the current copy is
	// never written. prev.at is -1 when there is none (a source forward).
	prev copyAt
	// skipped: an operator skipped the record while its copy could still
	// land (see skip).
	skipped bool
}

// copyAt is where one copy of a record is: its tier, offset and forwards.
type copyAt struct {
	tier     int
	at       int64
	forwards int
}

// lost reports whether the current copy will never be written: its write
// failed, or never started, and its writer stopped.
func (e *entry) lost() bool { return e.at < 0 && e.writing == 0 && closed(e.by) }

// firstInFlight reports whether the record's first copy is not
// acknowledged yet and may still be: were it lost, the record would be back
// at its source (see unwritten).
func (e *entry) firstInFlight() bool { return e.at < 0 && e.prev.at < 0 && !e.lost() }

// fallBack handles a lost copy: the record is where its previous copy is
// (true), or, without one, back at its source, uncommitted (false: the entry
// stays, holding its key's later records, until the source's committed
// offset passes it).
func (e *entry) fallBack() bool {
	if e.prev.at < 0 {
		return false
	}
	e.tier, e.at, e.forwards, e.by = e.prev.tier, e.prev.at, e.prev.forwards, nil
	e.prev = copyAt{at: -1}
	return true
}

func newFamily(source string, part int32, max int) *family {
	return &family{source: source, part: part, ready: make(chan struct{}), keys: map[string][]entry{}, max: max, seen: map[int]int64{}}
}

// closed reports whether the writer of a copy has stopped: it writes no more.
func closed(by <-chan struct{}) bool {
	if by == nil {
		return true
	}
	select {
	case <-by:
		return true
	default:
		return false
	}
}

func (f *family) markReady() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.ready:
	default:
		close(f.ready)
	}
}

// reset makes the family not ready, to be rebuilt: the workers that share it
// wait for the rebuild.
func (f *family) reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	select {
	case <-f.ready:
		f.ready = make(chan struct{})
	default: // not ready: its waiters wait for this channel
	}
	f.wakeKeys() // a held record waits for the rebuild, then looks again
}

// await waits until the family is rebuilt. It returns false when ctx ends.
func (f *family) await(ctx context.Context) bool {
	f.mu.Lock()
	ready := f.ready
	f.mu.Unlock()
	select {
	case <-ready:
		return true
	case <-ctx.Done():
		return false
	}
}

// Routes of a source record.
const (
	routeProcess   = iota // process it
	routePark             // an earlier record of its key is in the tiers
	routeForwarded        // it is in the tiers already (forwarded before a restart)
)

// route decides what happens to a source record of key at offset: process
// it, park it behind the earliest record of its key in the tiers (in that
// record's tier, returned), or nothing (it was forwarded already). A park
// may have to wait first: wait is then not nil (see unwritten), and the
// record is routed again once it is closed.
func (f *family) route(key string, offset int64) (route, tier int, wait <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	es := f.keys[key]
	if len(es) == 0 {
		return routeProcess, 0, nil
	}
	for _, e := range es {
		// In a tier already, if that copy was acknowledged; one not
		// acknowledged yet may never be written, so the record is
		// handled again (a copy that lands later is a repeat).
		if e.offset == offset && e.at >= 0 {
			return routeForwarded, e.tier, nil
		}
	}
	if es[0].offset < offset {
		return routePark, es[0].tier, f.unwritten(es, offset)
	}
	return routeProcess, 0, nil
}

// unwritten returns, when a source record at offset is to be parked, a
// channel closed at the family's next change if an earlier record of its
// key (in es) would be back at its source should its copy be lost: that
// copy, the record's first, is not acknowledged yet (in flight, or failed
// and to be written again). It returns nil otherwise. Parked now, the
// record could be in the tiers while the earlier one is not: the next owner
// of the partitions would handle both at once, one at its source and one in
// a tier. Not even a write to the same tier partition is ordered before
// this one: the producer fails only the records it holds with a failed one,
// and a large letter goes through another client. f.mu is held.
func (f *family) unwritten(es []entry, offset int64) <-chan struct{} {
	for i := range es {
		e := &es[i]
		if e.offset >= offset {
			break
		}
		if e.firstInFlight() {
			if f.changed == nil {
				f.changed = make(chan struct{})
			}
			return f.changed
		}
	}
	return nil
}

// blocked reports whether a record of key earlier than offset is in the
// tiers, the tier of the earliest one and whether its copy is lost. For a
// tier record that may be held behind its key (wait; partition.hold), it
// also returns a channel closed when that may change (an entry of key goes,
// or a copy of it is lost), taken under the same lock as the answer so that
// no change is missed.
func (f *family) blocked(key string, offset int64, wait bool) (tier int, lost, ok bool, freed <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	es := f.keys[key]
	if len(es) == 0 || es[0].offset >= offset {
		return 0, false, false, nil
	}
	if !wait || es[0].lost() {
		return es[0].tier, es[0].lost(), true, nil
	}
	if f.freed == nil {
		f.freed = map[string]map[int64]chan struct{}{}
	}
	w := f.freed[key]
	if w == nil {
		w = map[int64]chan struct{}{}
		f.freed[key] = w
	}
	ch := w[offset]
	if ch == nil {
		ch = make(chan struct{})
		w[offset] = ch
	}
	return es[0].tier, es[0].lost(), true, ch
}

// wakeKey wakes every record held behind key (blocked). f.mu is held.
func (f *family) wakeKey(key string) {
	for _, ch := range f.freed[key] {
		close(ch)
	}
	delete(f.freed, key)
}

// wakeFreed wakes, after an entry of key went, the records held behind key
// that may go on: those no entry precedes now, or all of them when the
// earliest entry's copy is lost (they are parked, see hold). Waking only
// those keeps a key with many held records from waking each of them at
// every record of the key settled. f.mu is held.
func (f *family) wakeFreed(key string) {
	es := f.keys[key]
	if len(es) == 0 || es[0].lost() {
		f.wakeKey(key)
		return
	}
	w := f.freed[key]
	for off, ch := range w {
		if off <= es[0].offset {
			close(ch)
			delete(w, off)
		}
	}
	if len(w) == 0 {
		delete(f.freed, key)
	}
}

// wakeKeys wakes every record held behind a key (blocked). f.mu is held.
func (f *family) wakeKeys() {
	for key := range f.freed {
		f.wakeKey(key)
	}
}

// find returns the entries of key and the index of the one at offset.
func (f *family) find(key string, offset int64) (es []entry, i int, found bool) {
	es = f.keys[key]
	i, found = slices.BinarySearchFunc(es, offset, func(e entry, o int64) int { return cmpInt(e.offset, o) })
	return es, i, found
}

// put records that the record of key at offset is being written to tier,
// forwarded forwards times, by the worker whose stop closes by; the copy
// forwarded most is the current one.
func (f *family) put(key string, offset int64, tier, forwards int, by <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.wakeChanged()
	es, i, found := f.find(key, offset)
	e := entry{offset: offset, tier: tier, forwards: forwards, at: -1, by: by, prev: copyAt{at: -1}}
	if found {
		old := es[i]
		switch {
		case forwards == old.forwards:
			e.writing, e.prev = old.writing, old.prev // the same copy, written again
		case forwards > old.forwards && old.at >= 0:
			e.prev = copyAt{old.tier, old.at, old.forwards}
		case forwards > old.forwards:
			e.prev = old.prev
		default:
			return
		}
		es[i] = e
		return
	}
	f.keys[key] = slices.Insert(es, i, e)
	f.n++
}

// restore records a copy read from tier at offset at of its partition,
// unless this member's worker of that partition took it already.
func (f *family) restore(key string, offset int64, tier, forwards int, at int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if at >= f.seen[tier] {
		f.add(key, offset, tier, forwards, at)
	}
}

// add records a copy in tier at offset at of its partition. f.mu is held.
func (f *family) add(key string, offset int64, tier, forwards int, at int64) {
	defer f.wakeChanged()
	es, i, found := f.find(key, offset)
	switch {
	case !found:
		f.keys[key] = slices.Insert(es, i, entry{offset: offset, tier: tier, forwards: forwards, at: at, prev: copyAt{at: -1}})
		f.n++
	case forwards > es[i].forwards:
		es[i] = entry{offset: offset, tier: tier, forwards: forwards, at: at, prev: copyAt{at: -1}}
	case forwards == es[i].forwards:
		es[i].at = max(es[i].at, at) // a copy written twice: the later one counts
	}
}

// sending counts a write of the current copy of the record of key at offset.
func (f *family) sending(key string, offset int64, forwards int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if es, i, found := f.find(key, offset); found && es[i].forwards == forwards {
		es[i].writing++
	}
}

// sent records the end of a write: acknowledged at offset at, or failed
// (err). A copy that failed and that no worker will write again is gone.
func (f *family) sent(key string, offset int64, forwards int, at int64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.wakeChanged()
	es, i, found := f.find(key, offset)
	if !found || es[i].forwards != forwards {
		return
	}
	e := &es[i]
	e.writing--
	if err == nil {
		e.at = max(e.at, at)
		return
	}
	if e.skipped && e.writing == 0 && e.at < 0 {
		f.remove(key, es, i) // skipped, and its copy never landed
		return
	}
	if e.lost() {
		e.fallBack()
		f.wakeKey(key)
	}
}

// skip records that an operator skipped the record of key at offset, whose
// copy (forwarded forwards times) is being written or was acknowledged: it
// may be in its tier, where the later records of its key are parked behind
// it, so the entry stays, and the copy is settled as skipped where it lands
// (skippedCopy); a write that fails drops it (sent). It reports whether the
// entry stays; otherwise the caller settles it.
func (f *family) skip(key string, offset int64, forwards int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	es, i, found := f.find(key, offset)
	if !found || es[i].forwards != forwards || (es[i].writing == 0 && es[i].at < 0) {
		return false
	}
	es[i].skipped = true
	f.wakeChanged() // a park waiting for it shows it (awaitCopy)
	return true
}

// unskip drops the entry of the record of key at offset, skipped while its
// copy was being written, if that write has not ended: an operator skipped
// it again (awaitCopy). It reports whether it did.
func (f *family) unskip(key string, offset int64) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	es, i, found := f.find(key, offset)
	if !found || !es[i].skipped || es[i].at >= 0 {
		return false
	}
	f.remove(key, es, i)
	return true
}

// skippedCopy reports whether the tier copy of the record of key at offset,
// forwarded forwards times, is of a record an operator skipped while it was
// being written (skip): it is settled without being handled.
func (f *family) skippedCopy(key string, offset int64, forwards int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	es, i, found := f.find(key, offset)
	return found && es[i].forwards == forwards && es[i].skipped
}

// skippedBefore returns the offset of the earlier record of key than offset
// whose copy a park of offset waits for (unwritten), if an operator skipped
// it while that copy was being written (skip).
func (f *family) skippedBefore(key string, offset int64) (int64, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.keys[key] {
		if e.offset >= offset {
			break
		}
		if e.firstInFlight() {
			return e.offset, e.skipped
		}
	}
	return 0, false
}

// took records that this member's worker of tier's partition has taken
// recs (in offset order): each gets its entry, kept until it is settled, so
// that a rebuild need not read them again.
func (f *family) took(tier int, recs []*kgo.Record) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range recs {
		if r.Key == nil {
			continue
		}
		if st, err := parseRetry(r.Headers); err == nil && st.f.Topic == f.source && st.f.Partition == f.part {
			f.add(string(r.Key), st.f.Offset, tier, st.forwards, r.Offset)
		}
	}
	f.seen[tier] = max(f.seen[tier], recs[len(recs)-1].Offset+1)
}

// stopped forgets a worker that stopped: what it took of a tier partition
// (tier < 0 for the source partition), and the copies it was to write but
// never did.
func (f *family) stopped(tier int, by <-chan struct{}) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if tier >= 0 {
		delete(f.seen, tier)
	}
	f.wakeChanged()
	for key, es := range f.keys {
		for i := range es {
			if e := &es[i]; e.by == by && e.lost() {
				e.fallBack()
				f.wakeKey(key)
			}
		}
	}
}

// gone drops the entries whose current copy the deleted tier held, and the
// previous copies it held of records being written elsewhere: those fall
// back to nothing should their write fail. The tier's new topic starts
// afresh, so what this member's worker took of it is forgotten too.
func (f *family) gone(tier int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.seen, tier)
	f.sweep(func(e *entry) bool {
		if e.prev.at >= 0 && e.prev.tier == tier {
			e.prev = copyAt{at: -1}
		}
		return e.tier == tier && e.at >= 0
	})
}

// prune drops, after a rebuild read the tiers, the entries whose copy lies
// below floor, the committed (or first) offset of its tier partition (by
// tier index): consumed and committed, here or by another member, or gone.
// An entry whose copy is newer is read again or in a worker's hands. A lost
// copy falls back to the previous one; without one, the entry goes once the
// source partition's committed offset (floor[-1]) passes its record.
func (f *family) prune(floor map[int]int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.sweep(func(e *entry) bool {
		if e.writing > 0 {
			return false
		}
		if e.lost() && !e.fallBack() {
			src, ok := floor[-1]
			return ok && e.offset < src
		}
		if e.at < 0 {
			return false // being written
		}
		lo, ok := floor[e.tier]
		return ok && e.at < lo
	})
}

// sweep removes the entries drop chooses. f.mu is held.
func (f *family) sweep(drop func(*entry) bool) {
	for key, es := range f.keys {
		kept := es[:0]
		for i := range es {
			if drop(&es[i]) {
				f.n--
				continue
			}
			kept = append(kept, es[i])
		}
		if len(kept) < len(es) {
			f.wakeKey(key)
		}
		if len(kept) == 0 {
			delete(f.keys, key)
		} else {
			f.keys[key] = kept
		}
	}
	f.wakeRoom()
}

// remove removes entry i of key's entries es. f.mu is held.
func (f *family) remove(key string, es []entry, i int) {
	defer f.wakeFreed(key)
	if len(es) == 1 {
		delete(f.keys, key)
	} else {
		f.keys[key] = slices.Delete(es, i, i+1)
	}
	f.n--
	f.wakeRoom()
}

// wakeRoom wakes who waits for room when the family is under its bound,
// and who waits for a change (entries went). f.mu is held.
func (f *family) wakeRoom() {
	if f.room != nil && f.n < f.max {
		close(f.room)
		f.room = nil
	}
	f.wakeChanged()
}

// wakeChanged wakes who waits for a change (unwritten). f.mu is held.
func (f *family) wakeChanged() {
	if f.changed != nil {
		close(f.changed)
		f.changed = nil
	}
}

// stale reports whether a tier copy of the record of key at offset, forwarded
// forwards times, is older than its current copy: read again after a crash.
func (f *family) stale(key string, offset int64, forwards int) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	es, i, found := f.find(key, offset)
	return found && es[i].forwards > forwards && es[i].at >= 0
}

// settle forgets the record of key at offset: it is processed,
// dead-lettered or skipped.
func (f *family) settle(key string, offset int64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if es, i, found := f.find(key, offset); found {
		f.remove(key, es, i)
	}
}

// full returns a channel closed when the family is back under its bound,
// or nil when it is under it.
func (f *family) full() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.n < f.max {
		return nil
	}
	if f.room == nil {
		f.room = make(chan struct{})
	}
	return f.room
}

func (f *family) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// retryState is what the retry headers of a record in a tier say.
type retryState struct {
	f        *deadletter.Failure
	forwards int // HeaderRetryForwards
	tiers    int // HeaderRetryTier
	due      time.Time
	parked   bool
}

// errNotTier is the error of a record in a tier topic without valid retry
// headers: not written by a consumer (or damaged).
var errNotTier = errors.New("consumer: not a retry-tier record")

// parseRetry reads the retry headers of a record read from a tier. It never
// panics on malformed input.
func parseRetry(hs []kgo.RecordHeader) (retryState, error) {
	var s retryState
	f, err := deadletter.ParseHeaders(deadletterHeaders(hs))
	if err != nil {
		return s, fmt.Errorf("%w: %w", errNotTier, err)
	}
	s.f = f
	var haveTier, haveDue bool
	for _, h := range hs {
		switch h.Key {
		case HeaderRetryTier:
			n, err := strconv.Atoi(string(h.Value))
			if err != nil || n < 0 || n > 1000 {
				return s, fmt.Errorf("%w: header %s: bad value %q", errNotTier, HeaderRetryTier, deadletter.Truncate(string(h.Value), 64))
			}
			s.tiers, haveTier = n, true
		case HeaderRetryDue:
			t, err := time.Parse(time.RFC3339Nano, string(h.Value))
			if err != nil {
				return s, fmt.Errorf("%w: header %s: bad value %q", errNotTier, HeaderRetryDue, deadletter.Truncate(string(h.Value), 64))
			}
			s.due, haveDue = t, true
		case HeaderRetryParked:
			s.parked = string(h.Value) == "true"
		case HeaderRetryForwards:
			n, err := strconv.Atoi(string(h.Value))
			if err != nil || n < 0 {
				return s, fmt.Errorf("%w: header %s: bad value %q", errNotTier, HeaderRetryForwards, deadletter.Truncate(string(h.Value), 64))
			}
			s.forwards = n
		}
	}
	if !haveTier || !haveDue {
		return s, fmt.Errorf("%w: missing %s or %s", errNotTier, HeaderRetryTier, HeaderRetryDue)
	}
	return s, nil
}

// original is the record a tier record stands for, as the handler sees it:
// the source topic, partition, offset and timestamp, the original headers.
func (s retryState) original(rec *kgo.Record) *kgo.Record {
	n := min(s.f.OriginalHeaders, len(rec.Headers))
	return &kgo.Record{
		Topic: s.f.Topic, Partition: s.f.Partition, Offset: s.f.Offset, Timestamp: s.f.Timestamp,
		Key: rec.Key, Value: rec.Value, Headers: rec.Headers[:n:n],
		LeaderEpoch: rec.LeaderEpoch, ProducerID: rec.ProducerID, ProducerEpoch: rec.ProducerEpoch,
	}
}

// retryHeaders are the retry headers of a forward.
func retryHeaders(tiers, forwards int, due time.Time, parked bool) []kgo.RecordHeader {
	buf := make([]byte, 0, 16+len(deadletter.TimeLayout)+3)
	buf = strconv.AppendInt(buf, int64(tiers), 10)
	n := len(buf)
	buf = strconv.AppendInt(buf, int64(forwards), 10)
	m := len(buf)
	buf = due.UTC().AppendFormat(buf, deadletter.TimeLayout)
	hs := []kgo.RecordHeader{{Key: HeaderRetryTier, Value: buf[:n:n]}, {Key: HeaderRetryForwards, Value: buf[n:m:m]}, {Key: HeaderRetryDue, Value: buf[m:]}}
	if parked {
		hs = append(hs, kgo.RecordHeader{Key: HeaderRetryParked, Value: []byte("true")})
	}
	return hs
}

// rebuild reads the records the tier partitions of the given source
// partitions hold past the group's committed offsets, adds them to their
// families and drops the entries that are gone (see family). A family is
// ready when done; on an error it is retried until ctx ends, and meanwhile
// its records wait.
func (t *tiers) rebuild(ctx context.Context, fams map[tp]*family, log func(msg string, args ...any)) {
	for attempt := 1; ; attempt++ {
		n, err := t.read(ctx, fams)
		if err == nil {
			for k, f := range fams {
				f.markReady()
				if s := f.size(); s > 0 {
					log("per-key order rebuilt from the retry tiers", "topic", k.topic, "partition", k.partition, "records_in_tiers", s)
				}
			}
			if n > 0 {
				log("retry tiers read", "records", n)
			}
			return
		}
		if ctx.Err() != nil {
			return
		}
		log("retry tiers cannot be read: the records of these partitions wait (per-key order)", "attempt", attempt, "err", err)
		if backoff.Sleep(ctx, min(time.Duration(attempt)*time.Second, 10*time.Second)) != nil {
			return
		}
	}
}

// read does the work of rebuild and returns the records read.
func (t *tiers) read(ctx context.Context, fams map[tp]*family) (int, error) {
	var topics []string
	for k := range fams {
		topics = append(topics, t.names[k.topic]...)
	}
	if len(topics) == 0 {
		return 0, nil
	}
	committed, err := t.adm.FetchOffsets(ctx, t.group)
	if err == nil {
		err = committed.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("committed offsets: %w", err)
	}
	starts, err := t.adm.ListStartOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("start offsets: %w", err)
	}
	ends, err := t.adm.ListEndOffsets(ctx, topics...)
	if err != nil {
		return 0, fmt.Errorf("end offsets: %w", err)
	}
	from := map[string]map[int32]kgo.Offset{}
	until := map[tp]int64{}
	floors := map[tp]map[int]int64{} // by family: the floor of each tier partition
	defer func() {
		if ctx.Err() == nil {
			for k, fl := range floors {
				fams[k].prune(fl)
			}
		}
	}()
	for k, f := range fams {
		floors[k] = map[int]int64{}
		if c, ok := committed.Lookup(k.topic, k.partition); ok && c.At >= 0 {
			floors[k][-1] = c.At
		}
		for i, topic := range t.names[k.topic] {
			end, ok := ends.Lookup(topic, k.partition)
			if !ok || end.Err != nil {
				continue // missing: nothing in it yet
			}
			at := int64(0)
			if s, ok := starts.Lookup(topic, k.partition); ok && s.Err == nil {
				at = s.Offset
			}
			if c, ok := committed.Lookup(topic, k.partition); ok && c.At > at {
				at = c.At
			}
			floors[k][i] = at
			f.mu.Lock()
			at = max(at, f.seen[i]) // what this member's worker took is not read again
			f.mu.Unlock()
			if at >= end.Offset {
				continue
			}
			if from[topic] == nil {
				from[topic] = map[int32]kgo.Offset{}
			}
			from[topic][k.partition] = kgo.NewOffset().At(at)
			until[tp{topic, k.partition}] = end.Offset
		}
	}
	if len(until) == 0 {
		return 0, nil
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), t.opts...), kgo.ConsumePartitions(from))...)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	read := 0
	for len(until) > 0 {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return read, err
		}
		var ferr error
		fs.EachError(func(_ string, _ int32, err error) { ferr = err })
		if ferr != nil {
			return read, ferr
		}
		fs.EachRecord(func(r *kgo.Record) {
			k := tp{r.Topic, r.Partition}
			end, ok := until[k]
			if !ok {
				return
			}
			if r.Offset >= end-1 {
				// The end is reached. With read_committed, the record at
				// end-1 may be one of an aborted transaction, which is
				// never returned: its marker, at end or later, is.
				delete(until, k)
			}
			if r.Offset >= end {
				return
			}
			if r.Attrs.IsControl() {
				return // a transaction marker (ExactlyOnce): kept to see the end
			}
			read++
			if r.Key == nil {
				return
			}
			tier := t.byTopic[r.Topic]
			st, err := parseRetry(r.Headers)
			if err != nil {
				return // handled (dead-lettered) when it is consumed
			}
			if f := fams[tp{tier.source, r.Partition}]; f != nil && st.f.Topic == tier.source && st.f.Partition == r.Partition {
				f.restore(string(r.Key), st.f.Offset, tier.index, st.forwards, r.Offset)
			}
		})
	}
	return read, nil
}

// deadletterHeaders reinterprets franz-go headers as deadletter headers:
// both are struct{Key string; Value []byte} (checked by a test).
func deadletterHeaders(h []kgo.RecordHeader) []deadletter.Header {
	if len(h) == 0 {
		return nil
	}
	return unsafe.Slice((*deadletter.Header)(unsafe.Pointer(unsafe.SliceData(h))), len(h))
}

// handleTiered handles a record of a consumer with retry topics: a source
// record may be parked behind an earlier record of its key; a tier record
// waits until it is due, may be parked again, and is then tried.
func (p *partition[K, V]) handleTiered(rec *kgo.Record) bool {
	t := p.c.tiers
	if p.fam != nil && !p.fam.await(p.ctx) {
		return false
	}
	if p.tier < 0 {
		o := &origin{rec: rec}
		if p.fam != nil && rec.Key != nil {
			if !p.awaitRoom() {
				return false
			}
			route, tier, ok := p.routeSource(rec)
			if !ok {
				return false
			}
			switch route {
			case routeForwarded:
				return p.settledInTier(rec) // in a tier already: forwarded before a restart
			case routePark:
				return p.park(rec, o, nil, tier)
			}
		}
		return p.process(rec, o, 1, time.Time{})
	}
	st, err := parseRetry(rec.Headers)
	if err == nil && (st.f.Topic != p.source || st.f.Partition != p.part) {
		err = fmt.Errorf("%w: it names %s/%d, not %s/%d", errNotTier, deadletter.Truncate(st.f.Topic, 249), st.f.Partition, p.source, p.part)
	}
	if err != nil {
		// Not written by a consumer: settled as a permanent failure of
		// the tier topic itself, never forwarded again.
		o := &origin{rec: rec, tiers: len(t.cfg.Tiers)}
		return p.settleFailure(rec, o, deadletter.StageDeserializeValue, failure.Permanent(err), 1, time.Time{})
	}
	if p.fam != nil && rec.Key != nil && p.fam.stale(string(rec.Key), st.f.Offset, st.forwards) {
		return p.settledInTier(rec) // an older copy, read again after a crash: no need to wait for it
	}
	if !p.waitDue(st.due) {
		return false
	}
	o := &origin{rec: st.original(rec), tiers: st.tiers, forwards: st.forwards}
	if p.fam != nil && rec.Key != nil {
		o.keyed = true
		key := string(rec.Key)
		var since time.Time // when it started to wait behind its key (hold)
		gaveUp := false
		for {
			if p.fam.stale(key, o.rec.Offset, st.forwards) {
				return p.settledInTier(rec) // an older copy, read again after a crash
			}
			if p.fam.skippedCopy(key, o.rec.Offset, st.forwards) {
				p.log.info("copy of a record skipped while it was being written: not handled", o.rec)
				p.fam.settle(key, o.rec.Offset)
				return p.settledInTier(rec)
			}
			tier, lost, blocked, freed := p.fam.blocked(key, o.rec.Offset, p.lanes.hold && !gaveUp)
			if !blocked {
				break
			}
			if freed != nil && p.c.isMine(p.c.tiers.names[p.source][tier], p.part) {
				if since.IsZero() {
					since = time.Now()
				}
				switch p.hold(rec, freed, since) {
				case holdStop:
					return false
				case holdGiveUp:
					gaveUp = true // parked, into the tier its blocker is in now
				case holdFreed:
					if !p.fam.await(p.ctx) || !p.awaitResumed() {
						return false
					}
				}
				continue // its key may be free: look again
			}
			if lost {
				// Its blocker went back to its source, where another
				// member may hold it: no hurry to read this again.
				o.parkDelay = lostBlockerDelay
			}
			return p.park(rec, o, st.f, tier)
		}
	}
	return p.process(rec, o, st.f.Attempts+1, st.f.First)
}

// How a hold ends.
const (
	holdFreed  = iota // its key may be free: look again
	holdGiveUp        // parked as before: the partition is at its bound, or it waited holdLimit
	holdStop          // the worker stops
)

// holdLimit bounds how long a tier record waits in memory behind an
// earlier record of its key (hold) before it is parked again: the earlier
// record should be settled within its tiers' delays, so one that takes far
// longer may be settled where this member does not see it.
func (t *tiers) holdLimit() time.Duration {
	return 2*slices.Max(t.cfg.Tiers) + 10*time.Second
}

// hold keeps rec, a record of a retry tier whose key has an earlier record
// in the tiers, on its lane until that record is settled (freed closes),
// instead of writing it to that record's tier again: a record held behind a
// failing key is written to the tiers once. Meanwhile the partition goes on
// with other keys, and commits below rec: after a crash, a rebalance or a
// restart, its next owner reads the partition again from rec. It gives up
// (rec is then parked as before) when the partition is holdAhead records or
// AheadBytes past it, when a letter behind it fails (giveUpBeforeFailed),
// or after holdLimit from since.
func (p *partition[K, V]) hold(rec *kgo.Record, freed <-chan struct{}, since time.Time) int {
	p.c.stats.held.Add(1)
	giveUp := p.lanes.held(rec.Offset)
	defer p.lanes.unheld(rec.Offset, p.ctx.Done())
	t := time.NewTimer(time.Until(since.Add(p.c.tiers.holdLimit())))
	defer t.Stop()
	select {
	case <-freed:
		return holdFreed
	case <-giveUp:
		return holdGiveUp
	case <-t.C:
		return holdGiveUp
	case <-p.ctx.Done():
		return holdStop
	}
}

// routeSource routes a keyed source record (family.route), after waiting,
// when it is to be parked, for the copies of earlier records of its key that
// must be written first (family.unwritten). ok is false when the worker
// must stop.
func (p *partition[K, V]) routeSource(rec *kgo.Record) (route, tier int, ok bool) {
	for {
		route, tier, wait := p.fam.route(string(rec.Key), rec.Offset)
		if wait == nil {
			return route, tier, true
		}
		// On the worker, its own letters are waited for in turn (a failed
		// one is written again, a long wait shows in Stats.Stuck and an
		// operator can skip it); on a lane or shard, the worker does it.
		if !p.lanes.on() {
			p.ledger.flush()
			l, ok := p.reap()
			if !ok {
				return 0, 0, false
			}
			if l != nil {
				if !p.awaitLetter(l, nil) {
					return 0, 0, false
				}
				continue
			}
		}
		if !p.awaitCopy(rec, wait) {
			return 0, 0, false
		}
	}
}

// errSkippedCopy is why a partition waits for the copy of a skipped record
// (awaitCopy).
var errSkippedCopy = errors.New("this record was skipped while its copy was being written to a retry tier; " +
	"a later record of its key waits until that write ends: skip it again to let the key go on (a copy that lands is then handled)")

// awaitCopy waits for the family to change (wait), for rec's park. When that
// lasts stuckAfter for the copy of a record an operator skipped while it was
// being written (family.skip), the partition shows as stuck on that record:
// skipped again, it no longer holds its key, and its copy, should it land,
// is handled. It returns false when the worker must stop.
func (p *partition[K, V]) awaitCopy(rec *kgo.Record, wait <-chan struct{}) bool {
	t := time.NewTimer(stuckAfter)
	defer t.Stop()
	select {
	case <-wait:
		return true
	case <-p.ctx.Done():
		return false
	case <-t.C:
	}
	key := string(rec.Key)
	at, ok := p.fam.skippedBefore(key, rec.Offset)
	if !ok {
		select {
		case <-wait:
			return true
		case <-p.ctx.Done():
			return false
		}
	}
	rctx, rcancel := context.WithCancelCause(p.ctx)
	defer rcancel(nil)
	p.setStuck(stuck{offset: at, reason: StuckDeadLetter, lastErr: errSkippedCopy, cancel: rcancel})
	defer p.clearStuck(at)
	for {
		select {
		case <-wait:
		case <-rctx.Done():
		}
		switch {
		case errors.Is(context.Cause(rctx), errSkipped):
			if p.fam.unskip(key, at) { // not if its copy landed meanwhile: then it is settled as skipped there
				p.c.log.Warn("record skipped again: the later records of its key no longer wait for its copy, which is handled should it land",
					"topic", p.topic, "partition", p.part, "offset", at, "waiting_offset", rec.Offset)
			}
			return true
		case p.ctx.Err() != nil:
			return false
		}
		// Woken by another change of the family: still waiting for that
		// copy, the partition stays stuck on it.
		_, _, w := p.fam.route(key, rec.Offset)
		if still, ok := p.fam.skippedBefore(key, rec.Offset); w == nil || !ok || still != at {
			return true
		}
		wait = w
	}
}

// untrack tells the family that o is settled.
func (p *partition[K, V]) untrack(o *origin) {
	if o.keyed && p.fam != nil {
		p.fam.settle(string(o.rec.Key), o.rec.Offset)
	}
}

// forward sends rec (o.rec as the handler sees it) to its next retry tier,
// and settles rec once the forward is acknowledged.
func (p *partition[K, V]) forward(rec *kgo.Record, o *origin, stage deadletter.Stage, class failure.Class, err error, attempts int, first time.Time) bool {
	c := p.c
	if ok, skipped := p.guardFlood(rec); skipped {
		return p.skip(rec, o, stage, err, attempts, "operator")
	} else if !ok {
		return false
	}
	p.floodAdd(true)
	tier := o.tiers // the index of the next tier
	o.trace.settledAs(OutcomeForwarded, stage, class, err, attempts)
	f := newFailure(c.cfg.Group, o.rec, stage, class, ReasonRetryTopic, err, attempts, first)
	due := f.Last.Add(c.tiers.cfg.Tiers[tier])
	l := p.tierLetter(o, f, err, tier, retryHeaders(tier+1, o.forwards+1, due, false), kindForward)
	l.class, l.attempts = class, attempts
	l.clearsAttempts(&c.attempts, rec, o)
	if p.fam != nil && o.rec.Key != nil {
		o.keyed = true
		p.track(l, o, tier)
	}
	return p.settleLetter(rec, l)
}

// park forwards rec (o.rec as the handler sees it) to tier, behind the
// earliest record of its key in the tiers; prev are its failure headers
// when it failed before.
func (p *partition[K, V]) park(rec *kgo.Record, o *origin, prev *deadletter.Failure, tier int) bool {
	var f deadletter.Failure
	if prev != nil {
		f = *prev
	} else {
		r := o.rec
		f = deadletter.Failure{Reason: ReasonParked, Topic: r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
			OriginalHeaders: len(r.Headers), Group: p.c.cfg.Group}
	}
	l := p.tierLetter(o, &f, nil, tier, retryHeaders(o.tiers, o.forwards+1, time.Now().Add(o.parkDelay), true), kindParked)
	p.track(l, o, tier)
	return p.settleLetter(rec, l)
}

// lostBlockerDelay is how long a tier record parked behind a record whose
// copy was lost (back at its source) waits before it is read again.
const lostBlockerDelay = time.Second

// track puts o.rec in the family, as written to tier by letter l, whose
// writes tell the family when its copy is acknowledged or lost.
func (p *partition[K, V]) track(l *letter, o *origin, tier int) {
	key := string(o.rec.Key)
	p.fam.put(key, o.rec.Offset, tier, o.forwards+1, p.ctx.Done())
	l.fam = &famRef{f: p.fam, key: key, offset: o.rec.Offset, forwards: o.forwards + 1}
}

// famRef names the family entry a tier letter writes the copy of.
type famRef struct {
	f        *family
	key      string
	offset   int64
	forwards int
}

// tierLetter is the letter that writes o.rec to a tier: its key, value and
// original headers, the failure headers of f, then the retry headers (and
// the trace context of a traced forward).
func (p *partition[K, V]) tierLetter(o *origin, f *deadletter.Failure, cause error, tier int, extra []kgo.RecordHeader, kind letterKind) *letter {
	w := p.c.dlq
	f.ClientID = w.clientID
	l := &letter{w: w, src: o.rec, f: f, stage: f.Stage, reason: f.Reason, cause: cause, kind: kind, extra: extra,
		// The partitioner reads the source partition from Partition.
		tmpl: kgo.Record{Topic: p.c.tiers.names[o.rec.Topic][tier], Partition: o.rec.Partition, Key: o.rec.Key, Value: o.rec.Value}}
	if o.trace != nil && kind == kindForward {
		l.extra = traceLetter(o.trace, l, OutcomeForwarded, extra)
	}
	l.tmpl.Headers = l.headers(l.hdrs[:0])
	if limit := w.limit(l.tmpl.Topic); limit > 0 && letterSize(&l.tmpl) > limit {
		l.shrink()
	}
	return l
}

// waitDue waits until a tier record is due, with the partition's fetching
// paused (PauseDue): the records it holds wait with it, nothing is fetched
// again. The kill switch ends the wait: with retrying off, a record is tried
// once more and then settled by RetryTopics.Then. It returns false when the
// worker must stop.
func (p *partition[K, V]) waitDue(due time.Time) bool {
	d := time.Until(due)
	if d <= 0 || p.c.retryOff.Load() {
		return true
	}
	if !p.beforeWait() {
		return false
	}
	p.setWaiting(PauseDue, true)
	defer p.setWaiting(PauseDue, false)
	for d > 0 && !p.c.retryOff.Load() {
		if sleep(p.ctx, d, p.c.wakeSignal()) != nil {
			return false
		}
		d = time.Until(due)
	}
	return true
}

// awaitRoom waits while the family of a source partition holds
// RetryTopics.MaxParked records: the partition stops (PauseParked) until its
// tiers drain. It returns false when the worker must stop.
func (p *partition[K, V]) awaitRoom() bool {
	ch := p.fam.full()
	if ch == nil {
		return true
	}
	if !p.beforeWait() {
		return false
	}
	p.c.log.Warn("per-key order: the retry tiers hold RetryTopics.MaxParked records of this partition; it stops until they drain",
		"topic", p.topic, "partition", p.part, "max_parked", p.c.tiers.cfg.MaxParked)
	p.setWaiting(PauseParked, true)
	defer p.setWaiting(PauseParked, false)
	for ch != nil {
		select {
		case <-ch:
		case <-p.ctx.Done():
			return false
		}
		ch = p.fam.full()
	}
	return true
}

// setWaiting counts a record that waits (PauseDue, PauseParked) or no
// longer does; the partition's fetching is paused while any waits.
func (p *partition[K, V]) setWaiting(reason PauseReason, on bool) {
	p.mu.Lock()
	p.flow.setWaiting(reason, on)
	p.mu.Unlock()
}

// checkTiers makes sure the tier topics of the assigned source topics exist
// (creating them like dead-letter topics) and makes the client see new ones.
func (c *Consumer[K, V]) checkTiers(ctx context.Context, sources []string) {
	created := false
	for _, src := range sources {
		names := c.tiers.names[src]
		if names == nil {
			continue
		}
		for _, topic := range names {
			c.dlq.recheck(src, topic) // deleted, or its source grew
		}
		n, err := c.dlq.sourcePartitions(ctx, src)
		for _, topic := range names {
			if err == nil {
				// Refreshed after each check: the client must see a tier
				// created or grown (ensure forgets nothing it found).
				if err = c.dlq.ensure(ctx, src, topic, n); err == nil {
					created = true
				}
			}
			if err != nil {
				if !errors.Is(err, errRefreshing) { // another check is taking in its new id
					c.log.Error("retry topic cannot be used: a record forwarded to it waits until it can (Stats().RetryTopics)", "topic", src, "retry_topic", topic, "err", err)
				}
				err = nil
			}
		}
	}
	if created {
		c.cl.ForceMetadataRefresh()
	}
}

// assignTiers starts rebuilding the per-key order of newly assigned
// partitions, in one read for all of them.
func (c *Consumer[K, V]) assignTiers(assigned map[string][]int32) {
	t := c.tiers
	if !t.ordered {
		return
	}
	fams := map[tp]*family{}
	c.warnSplit(assigned)
	for topic, ps := range assigned {
		src := topic
		_, tier := t.byTopic[topic]
		if tier {
			src = t.byTopic[topic].source
		}
		for _, p := range ps {
			f, created := t.family(src, p)
			if !created {
				// A partition of a family kept here comes back (or
				// joins): while another member had it, that member
				// forwarded, parked and settled records this family
				// does not know of. Rebuilt in place: the workers
				// that share it wait for it.
				f.reset()
			}
			fams[tp{src, p}] = f
		}
	}
	if len(fams) > 0 {
		go t.rebuild(c.runCtx, fams, c.log.Info)
	}
}

// warnSplit logs when a source partition is assigned without its tier
// partitions, or the other way round (the range assignor assigns them
// together when every member has the same topics; KIP-848 reconciles them
// one after the other). Order still holds: a tier record is processed only
// when no earlier record of its key is known to be in the tiers, and records
// are forwarded in order; but the member with the source partition never
// learns that the other settled a key, so it parks that key's records until
// it loses the partition.
func (c *Consumer[K, V]) warnSplit(assigned map[string][]int32) {
	t := c.tiers
	has := map[tp]bool{}
	for topic, ps := range assigned {
		for _, p := range ps {
			has[tp{topic, p}] = true
		}
	}
	c.mu.Lock()
	for k := range c.parts {
		has[k] = true
	}
	c.mu.Unlock()
	for k := range has {
		src := k.topic
		if ti, ok := t.byTopic[k.topic]; ok {
			src = ti.source
		}
		for _, n := range append([]string{src}, t.names[src]...) {
			if !has[tp{n, k.partition}] && (n == src || c.dlq.limit(n) > 0) { // a tier not checked yet may not exist
				c.log.Info("retry topics: a source partition and its tier partitions are not assigned together (yet); while another member works on them, records of keys in the tiers may be parked longer (do all members run with the same topics and tiers?)",
					"assigned", k.topic, "partition", k.partition, "missing", n)
				return
			}
		}
	}
}
