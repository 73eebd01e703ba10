package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// DurableAttempts keeps the attempt count of a record that is retried in
// place across restarts and rebalances: without it, a record that failed 9 of
// its 10 tries starts again at 1 after a crash.
//
// A compacted topic, keyed by "topic/partition/offset", holds the attempts so
// far and the time of the first failure of each record retrying in place:
// one per partition handling one record at a time, one per key retrying with
// [Concurrency]. An entry is written when a record has failed twice or more,
// and when its partition is revoked or the consumer stops while it retries
// (so the success path, and a record that fails once and then succeeds,
// never write); the writes reach Kafka before a revoked partition is given
// up. It is deleted (a tombstone) once the record is settled. When partitions
// are assigned, the consumer reads the topic, and a record that has an entry
// goes on counting from there. Entries of an earlier version, keyed by
// "topic/partition", are read too.
//
// A try that ends while its partition is revoked or the consumer stops counts
// unless it failed with a context error (an error that wraps
// [context.Canceled] or [context.DeadlineExceeded], or the
// [serde.RetryError] of retries the stop ended): that failure may be the
// stop's own, and the next owner makes the try again. So return the context's
// error, wrapped, when a handler gives up because its context ended. With a
// [BatchHandler], the records a batch fails one by one ([BatchError]) keep
// their counts so; a batch failed as a whole starts again at 1. A record that
// used its tries and has an entry keeps it until its dead letter (or its
// forward to a retry tier) is written, with the failure the letter tells; one
// whose letter follows its first try (a permanent failure, a single try, a
// try in a retry tier) gets such an entry only when its partition is revoked
// or lost, or the consumer stops, while the next owner will get it again (its
// letter, or one before it, not yet written). Should its partition
// move before that, the next owner writes the same
// letter (stage, class, reason, error, attempts and first failure; a forward
// becomes a dead letter if the next owner has no retry tiers) without trying
// the record again. The entry names the record's timestamp too, so that a
// record of a topic created again at the same offset is tried as usual. An
// earlier version cannot read such an entry: it goes on from the count saved
// before it, if that is still in the topic, and makes the last try again.
//
// Not kept in the exactly-once mode: the state is written outside the
// transactions.
//
// Writes are asynchronous and best effort: a lost write only loses count, never
// a record (a failed write is logged).
type DurableAttempts struct {
	// Disable turns durable attempts off.
	Disable bool
	// Topic names the state topic; {group} is replaced by the group.
	// Optional: "{group}.antidote-attempts". It is created (one partition,
	// cleanup.policy=compact) on the first write.
	Topic deadletter.Template
}

const defaultAttemptsTopic = "{group}.antidote-attempts"

// attemptEntry is a record's retry state.
type attemptEntry struct {
	offset   int64
	attempts int
	first    time.Time
	// used is set when the record used its tries: the failure of its last
	// try, which the letter being written tells. The next owner writes
	// that letter again rather than try the record once more.
	used *usedTries
}

// usedTries is the failure that settles a record by a letter: a dead
// letter, or a forward to a retry tier.
type usedTries struct {
	ts       int64 // the record's timestamp (Unix ms): the entry is its, not a recreated topic's record at its offset
	stage    deadletter.Stage
	class    failure.Class
	reason   deadletter.Reason
	forward  bool   // to the next retry tier; a dead letter otherwise
	errType  string // the letter's antidote.error.type
	errStage string // the letter's antidote.error.stage
	msg      string // the letter's antidote.error.message
}

// of tells whether the entry is rec's.
func (u *usedTries) of(rec *kgo.Record) bool { return rec.Timestamp.UnixMilli() == u.ts }

// err is the failure as the letter tells it, marked with its class.
func (u *usedTries) err() error {
	err := error(&savedFailure{typ: u.errType, stage: u.errStage, msg: u.msg})
	switch u.class {
	case failure.ClassTransient:
		err = failure.Transient(err)
	case failure.ClassPermanent:
		err = failure.Permanent(err)
	}
	return err
}

// savedFailure is a failure read back from the attempts topic: its
// message, and the type and serde stage of the error it was.
type savedFailure struct{ typ, stage, msg string }

func (e *savedFailure) Error() string { return e.msg }

func (e attemptEntry) encode() []byte {
	b := []byte("offset=" + strconv.FormatInt(e.offset, 10) + " attempts=" + strconv.Itoa(e.attempts) +
		" first=" + e.first.UTC().Format(deadletter.TimeLayout))
	if u := e.used; u != nil {
		then := "dead-letter"
		if u.forward {
			then = "retry-topic"
		}
		for _, kv := range [...][2]string{{"ts", strconv.FormatInt(u.ts, 10)}, {"stage", string(u.stage)}, {"class", u.class.String()},
			{"reason", string(u.reason)}, {"then", then}, {"type", u.errType}, {"estage", u.errStage}, {"err", u.msg}} {
			b = append(b, " "+kv[0]+"="+url.QueryEscape(kv[1])...)
		}
	}
	return b
}

// decodeAttempt reads an entry: offset, attempts and first, and, for a
// record that used its tries, every field of usedTries.
func decodeAttempt(b []byte) (attemptEntry, error) {
	var e attemptEntry
	var u usedTries
	seen := map[string]bool{}
	for _, f := range strings.Fields(string(b)) {
		k, v, _ := strings.Cut(f, "=")
		if seen[k] {
			return e, fmt.Errorf("field %q twice", k)
		}
		seen[k] = true
		var err error
		switch k {
		case "offset":
			e.offset, err = strconv.ParseInt(v, 10, 64)
		case "attempts":
			e.attempts, err = strconv.Atoi(v)
		case "first":
			e.first, err = time.Parse(deadletter.TimeLayout, v)
			if y := e.first.UTC().Year(); err == nil && (y < 0 || y > 9999) {
				err = errors.New("year out of range")
			}
		case "ts", "stage", "class", "reason", "then", "type", "estage", "err":
			if v, err = url.QueryUnescape(v); err != nil {
				break
			}
			switch k {
			case "ts":
				u.ts, err = strconv.ParseInt(v, 10, 64)
			case "stage":
				u.stage = deadletter.Stage(v)
			case "class":
				err = u.class.UnmarshalText([]byte(v))
			case "reason":
				u.reason = deadletter.Reason(v)
			case "then":
				if v != "dead-letter" && v != "retry-topic" {
					err = fmt.Errorf("%q, want dead-letter or retry-topic", v)
				}
				u.forward = v == "retry-topic"
			case "type":
				u.errType = v
			case "estage":
				u.errStage = v
			case "err":
				u.msg = v
			}
		default:
			err = errors.New("unknown field")
		}
		if err != nil {
			return e, fmt.Errorf("field %q: %w", k, err)
		}
	}
	if !seen["offset"] || !seen["attempts"] || !seen["first"] {
		return e, errors.New("offset, attempts or first missing")
	}
	if e.offset < 0 || e.attempts < 1 {
		return e, errors.New("offset or attempts out of range")
	}
	if len(seen) > 3 {
		for _, k := range [...]string{"ts", "stage", "class", "reason", "then", "type", "estage", "err"} {
			if !seen[k] {
				return e, fmt.Errorf("a used entry without %q", k)
			}
		}
		if u.stage == "" || u.reason == "" {
			return e, errors.New("a used entry without its stage or reason")
		}
		e.used = &u
	}
	return e, nil
}

func attemptKey(topic string, part int32, offset int64) []byte {
	return []byte(topic + "/" + strconv.Itoa(int(part)) + "/" + strconv.FormatInt(offset, 10))
}

// parseAttemptKey splits a state key: "topic/partition/offset", or
// "topic/partition" (an earlier version's, whose offset is in the value;
// offset -1). Topic names hold no "/".
func parseAttemptKey(k string) (prefix string, offset int64, ok bool) {
	topic, rest, ok := strings.Cut(k, "/")
	if !ok || topic == "" {
		return "", 0, false
	}
	part, off, hasOff := strings.Cut(rest, "/")
	if _, err := strconv.ParseInt(part, 10, 32); err != nil {
		return "", 0, false
	}
	if !hasOff {
		return k, -1, true
	}
	o, err := strconv.ParseInt(off, 10, 64)
	if err != nil || o < 0 {
		return "", 0, false
	}
	return topic + "/" + part, o, true
}

// attempts writes and reads the state topic.
type attempts struct {
	topic string // "" when off
	cl    *kgo.Client
	adm   *kadm.Client
	opts  []kgo.Opt // to read the topic with a client of its own
	log   *slog.Logger

	// createMu serialises the creation of the topic; it is held during an
	// admin request, so it is not mu, which the poll goroutine takes.
	createMu sync.Mutex
	created  bool

	mu     sync.Mutex
	resume map[tp]map[int64]attemptEntry // read at assignment, taken by new partition workers

	// started and finished count this state's writes. Its topic has one
	// partition, whose writes franz-go finishes in order, so a flush waits
	// until finished reaches the count started before it, on these writes
	// only: the client's other writes (a dead letter that a hung broker
	// never answers) are not the revoke's to wait for, nor writes started
	// after it.
	pendMu   sync.Mutex
	started  uint64
	finished uint64
	waiters  []flushWaiter
}

// save records that rec has failed attempts times since first.
func (a *attempts) save(rec *kgo.Record, attempts int, first time.Time) {
	if a.topic == "" {
		return
	}
	a.produce(&kgo.Record{Topic: a.topic, Key: attemptKey(rec.Topic, rec.Partition, rec.Offset),
		Value: attemptEntry{offset: rec.Offset, attempts: attempts, first: first}.encode()})
}

// on reports whether durable attempts are kept.
func (a *attempts) on() bool { return a.topic != "" }

// saveUsed records that rec used its tries and that l, being written,
// settles it.
func (a *attempts) saveUsed(rec *kgo.Record, l *letter) {
	if a.topic == "" {
		return
	}
	e := attemptEntry{offset: rec.Offset, attempts: l.attempts, first: l.f.First, used: &usedTries{
		ts: rec.Timestamp.UnixMilli(), stage: l.f.Stage, class: l.class, reason: l.f.Reason, forward: l.kind == kindForward,
		errType: l.f.ErrorType, errStage: l.f.ErrorStage, msg: deadletter.Truncate(l.f.Message, deadletter.MaxMessageBytes)}}
	a.produce(&kgo.Record{Topic: a.topic, Key: attemptKey(rec.Topic, rec.Partition, rec.Offset), Value: e.encode()})
}

// clear deletes the entry of rec: it is settled.
func (a *attempts) clear(rec *kgo.Record) {
	if a.topic == "" {
		return
	}
	a.produce(&kgo.Record{Topic: a.topic, Key: attemptKey(rec.Topic, rec.Partition, rec.Offset)}) // a tombstone
}

func (a *attempts) produce(r *kgo.Record) {
	if err := a.ensure(); err != nil {
		a.log.Warn("attempts topic cannot be written: the attempt count of a retrying record will restart after a restart", "attempts_topic", a.topic, "err", err)
		return
	}
	a.pendMu.Lock()
	a.started++
	a.pendMu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	a.cl.Produce(ctx, r, func(_ *kgo.Record, err error) {
		cancel()
		a.pendMu.Lock()
		a.finished++
		kept := a.waiters[:0]
		for _, w := range a.waiters {
			if a.finished >= w.upTo {
				close(w.done)
			} else {
				kept = append(kept, w)
			}
		}
		a.waiters = kept
		a.pendMu.Unlock()
		if err != nil {
			a.log.Warn("attempts write failed: the attempt count of a retrying record may restart after a restart", "attempts_topic", a.topic, "err", err)
		}
	})
}

// flush waits up to timeout for the state's writes in flight, and for no
// other write of the client. Run calls it before it closes the client,
// whose Close would drop them, and the revoke before it gives partitions
// up.
func (a *attempts) flush(timeout time.Duration) {
	a.pendMu.Lock()
	if a.finished >= a.started {
		a.pendMu.Unlock()
		return
	}
	w := flushWaiter{upTo: a.started, done: make(chan struct{})}
	a.waiters = append(a.waiters, w)
	n := a.started - a.finished
	a.pendMu.Unlock()
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-w.done:
	case <-t.C:
		a.log.Warn("attempts writes not flushed: the next owner may repeat an attempt", "attempts_topic", a.topic, "in_flight", n, "waited", timeout)
	}
}

// flushWaiter is a flush waiting for the writes started before it.
type flushWaiter struct {
	upTo uint64
	done chan struct{}
}

// ensure creates the state topic once.
func (a *attempts) ensure() error {
	a.createMu.Lock()
	defer a.createMu.Unlock()
	if a.created {
		return nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	compact := "compact"
	resp, err := a.adm.CreateTopic(ctx, 1, -1, map[string]*string{"cleanup.policy": &compact}, a.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return err
	}
	a.created = true
	return nil
}

// load reads the state topic up to its end and keeps the entries of the
// given partitions for their workers. It runs when partitions are assigned.
func (a *attempts) load(ctx context.Context, assigned map[string][]int32) {
	if a.topic == "" || len(assigned) == 0 {
		return
	}
	want := map[string]tp{}
	for t, ps := range assigned {
		for _, p := range ps {
			want[t+"/"+strconv.Itoa(int(p))] = tp{t, p}
		}
	}
	found, err := a.read(ctx, want)
	if err != nil {
		a.log.Warn("attempts topic cannot be read: retrying records count their attempts from 1", "attempts_topic", a.topic, "err", err)
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.resume == nil {
		a.resume = make(map[tp]map[int64]attemptEntry)
	}
	for k, es := range found {
		a.resume[k] = es
	}
}

// read returns the entries of the partitions in want (by "topic/partition"),
// by record offset.
func (a *attempts) read(ctx context.Context, want map[string]tp) (map[tp]map[int64]attemptEntry, error) {
	ends, err := a.adm.ListEndOffsets(ctx, a.topic)
	if err != nil {
		return nil, err
	}
	end, ok := ends.Lookup(a.topic, 0)
	if !ok || errors.Is(end.Err, kerr.UnknownTopicOrPartition) || end.Offset <= 0 {
		return nil, nil // no state yet
	}
	if end.Err != nil {
		return nil, end.Err
	}
	cl, err := kgo.NewClient(append(append([]kgo.Opt(nil), a.opts...),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{a.topic: {0: kgo.NewOffset().AtStart()}}))...)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	found := map[tp]map[int64]attemptEntry{}
	for {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("read to offset %d: %w", end.Offset, err)
		}
		done := false
		fs.EachRecord(func(r *kgo.Record) {
			if r.Offset >= end.Offset-1 {
				done = true
			}
			prefix, off, ok := parseAttemptKey(string(r.Key))
			k, wanted := want[prefix]
			if !ok || !wanted {
				return
			}
			if r.Value == nil {
				if off < 0 {
					delete(found, k) // an earlier version's: one entry per partition
				} else {
					delete(found[k], off)
				}
				return
			}
			e, err := decodeAttempt(r.Value)
			if err != nil || (off >= 0 && e.offset != off) {
				return
			}
			if found[k] == nil {
				found[k] = map[int64]attemptEntry{}
			}
			found[k][e.offset] = e
		})
		if done {
			return found, nil
		}
	}
}

// take returns, and forgets, the entries of a partition, by offset.
func (a *attempts) take(t string, p int32) map[int64]attemptEntry {
	a.mu.Lock()
	defer a.mu.Unlock()
	es := a.resume[tp{t, p}]
	delete(a.resume, tp{t, p})
	return es
}
