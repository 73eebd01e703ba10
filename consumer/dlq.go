package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// dlqWriter writes dead letters. Writes are asynchronous: a partition keeps
// processing while its dead letters are in flight, and marks offsets for
// commit only up to the first letter not yet acknowledged.
//
// Sizing: a letter is its source record plus the failure headers, so a
// source record near its topic's size limit must still fit. When partitions
// are assigned, the writer reads the source topic's max.message.bytes, creates
// the dead-letter topic with that plus [LetterHeadroom] (or reads the limit of
// an existing one), and sizes its produce batches for the dead-letter topic
// (kgo.ProducerBatchMaxBytesFn). A letter over the limit first loses its error
// message; one that still does not fit can never be written.
//
// Compression: letters go out with the client's codec, franz-go's default
// snappy unless ClientOpts set kgo.ProducerBatchCompression. Letters hold
// the record and ~600 bytes of failure headers, which snappy shrinks to a
// quarter (BenchmarkLetterCompression, and the bench's batches) for about
// 0.3 µs of CPU a letter: worth it for a topic that keeps every poison pill,
// some of them large.
type dlqWriter struct {
	cl       *kgo.Client
	adm      *kadm.Client
	tmpl     deadletter.Template
	group    string
	clientID string
	create   bool
	retry    backoff.Policy
	timeout  time.Duration
	log      *slog.Logger
	stats    *stats
	hooks    Hooks // nil when none

	// isTier reports whether a topic is a retry tier (written like a
	// dead-letter topic); nil without retry topics.
	isTier func(string) bool
	// tierGone is told that a retry tier was deleted (and created again):
	// the copies it held went with it. Called before the new topic is
	// written to. Nil without retry topics.
	tierGone func(topic string)

	// txnal: the exactly-once mode, whose letters are written in the
	// transaction by the consumer's client.
	txnal bool
	// side writes the letters whose topic's limit was raised after the
	// client first wrote to it (see cramped).
	sideMu sync.Mutex
	side   *kgo.Client
	// grown is set once a topic's limit was seen raised: until then no
	// letter can be cramped, and send takes no lock to ask.
	grown atomic.Bool

	mu       sync.Mutex
	topics   map[string]*dlqTopic      // by dead-letter (or retry) topic
	srcSize  map[string]int32          // partition counts of source topics
	names    sync.Map                  // source topic -> dead-letter topic
	lastName atomic.Pointer[[2]string] // the newest source topic and its dead-letter topic
	// lastReady is the dead-letter topic that send found ready last, so
	// that the next letter to it takes no lock: once ready, a topic and its
	// limit stay as they are.
	lastReady atomic.Pointer[readyTopic]
}

// readyTopic is a dead-letter topic that is ready, with its source topic
// (whose partition count is known) and its size limit.
type readyTopic struct {
	source, topic string
	limit         int32
	gen           uint64 // dlqTopic.gen
}

// letterLinger is the consumer client's kgo.ProducerLinger. A produce
// request costs the client about 100-150 µs of CPU whatever it holds (its
// encoding, a write and a read on the connection, the goroutines that send
// it and handle the response), so letters that each go out alone cost that
// much apiece: at one poison pill in a hundred records, 5 ms puts about 12
// letters in a request instead of 3, and halves the client's CPU per letter.
// The commit waits for a letter's acknowledgement in any case, and that
// takes longer than the linger on a busy client (its goroutines wait for a
// core).
const letterLinger = 5 * time.Millisecond

// LetterHeadroom is what a dead-letter topic created by the consumer accepts
// beyond its source topic's max.message.bytes: room for the failure headers,
// which stay well under it (see package deadletter's size bounds).
const LetterHeadroom = 64 << 10

// defaultBatchMax is franz-go's default ProducerBatchMaxBytes, used for a
// dead-letter topic whose limit is not known.
const defaultBatchMax = 1_000_012

// dlqTopic is what the writer knows of one dead-letter topic.
type dlqTopic struct {
	name     string
	source   string
	ready    bool  // exists (or was created) and its limit is known
	maxBytes int32 // its max.message.bytes; 0 when unknown
	parts    int32 // its partition count, when ready
	// sized is the batch limit the client took for the topic when it
	// first produced to it (see batchMax), sideSized the side client's.
	sized, sideSized int32
	id               kadm.TopicID // its topic id, when ready
	err              error        // why it is not ready
	checked          time.Time
	tier             bool // a retry tier, not a dead-letter topic
	// The client forgets a topic deleted and created again (recreated)
	// only when its writes fail for the old id it holds, once, and never
	// after a write to the new topic: a purge resets the client's sequence
	// numbers of the topic while its producer id stays, so its next writes
	// would repeat those of the writes already acknowledged by the new
	// topic, and the broker would take them for duplicates and drop them.
	// So a purge runs only in ensure, while the topic is not ready (no
	// write is sent), and gen counts them: a write records the gen it was
	// sent under, and one that fails with UNKNOWN_TOPIC_ID under the
	// current gen says the client still holds an old id (stale), for the
	// next ensure to purge. What this cannot see: franz-go may write a few
	// records to the new topic under the old id before it fails one
	// (its sequence-number recovery); a purge after those still resets
	// their sequence numbers. Stale is one flag for the consumer's client
	// and the side client (cramped): a purge forgets the topic in both.
	gen   uint64
	stale bool
	// written: a write to the topic was let through (ready), ever. A tier
	// never written is forgotten at once when its fetches fail for an old
	// id (staleFetches); one written is forgotten only as above. Not its
	// id: a check can succeed without learning one.
	written  bool
	renewing bool // a new id or a purge is being handled: the topic is not ready until it ends
	// recheckDue: a recheck came while renewing, after the renewal's own
	// check: the topic stays not ready when the renewal ends.
	recheckDue bool
}

// what names the kind of topic, for errors and logs.
func (w *dlqWriter) what(topic string) string {
	if w.isTier != nil && w.isTier(topic) {
		return "retry topic"
	}
	return "dead-letter topic"
}

// writes reports whether the writer writes to topic: a retry tier, or a
// dead-letter topic it checked.
func (w *dlqWriter) writes(topic string) bool {
	if w.isTier != nil && w.isTier(topic) {
		return true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	_, ok := w.topics[topic]
	return ok
}

// topicFor returns the dead-letter topic of a source topic.
func (w *dlqWriter) topicFor(source string) string {
	// The newest topic first: one comparison and no hashing for a consumer
	// of one topic.
	if last := w.lastName.Load(); last != nil && last[0] == source {
		return last[1]
	}
	if n, ok := w.names.Load(source); ok {
		return n.(string)
	}
	n := w.tmpl.Name(source, w.group)
	w.names.Store(source, n)
	w.lastName.Store(&[2]string{source, n})
	return n
}

func newDLQWriter[K, V any](cfg *Config[K, V], log *slog.Logger, st *stats) *dlqWriter {
	return &dlqWriter{
		tmpl: cfg.DeadLetter.Topic, group: cfg.Group,
		create: !cfg.DeadLetter.DisableTopicCreation, retry: cfg.DeadLetter.Retry, timeout: cfg.DeadLetter.WriteTimeout,
		log: log, stats: st, topics: make(map[string]*dlqTopic), srcSize: make(map[string]int32),
	}
}

// attach gives the writer its client, once it exists.
func (w *dlqWriter) attach(cl *kgo.Client) {
	w.cl, w.adm, w.clientID = cl, kadm.NewClient(cl), clientID(cl)
}

// batchMax is the kgo.ProducerBatchMaxBytesFn of the client: the dead-letter
// topic's own limit when it is known. franz-go asks once per partition, on
// the first produce to it, which follows the check at assignment.
func (w *dlqWriter) batchMax(topic string) int32 {
	return w.sizeFor(topic, false)
}

// sizeFor is the batch limit of topic for the client (side false) or the
// side client, recorded as the one the client keeps: franz-go asks once
// per partition and never again.
func (w *dlqWriter) sizeFor(topic string, side bool) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := int32(defaultBatchMax)
	t := w.topics[topic]
	if t != nil && t.maxBytes > 0 {
		n = t.maxBytes
	}
	if t != nil {
		kept := &t.sized
		if side {
			kept = &t.sideSized
		}
		if *kept == 0 || n < *kept {
			*kept = n
		}
	}
	return n
}

// cramped reports whether the client sized its batches for topic too small
// for a letter of size bytes: the topic's limit was raised after the
// client's first write to it. Such a letter is written by the side client
// (not in the exactly-once mode, whose letters are in the transaction).
func (w *dlqWriter) cramped(topic string, size int32) bool {
	return !w.txnal && w.sizedBelow(topic, size)
}

// sizedBelow reports whether the client took a batch limit for topic below
// size.
func (w *dlqWriter) sizedBelow(topic string, size int32) bool {
	if !w.grown.Load() {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.topics[topic]
	return t != nil && t.sized > 0 && size > t.sized
}

// sideClient returns the client that writes the letters cramped says the
// consumer's client cannot take, made when first needed, and made again
// when its own batch limit for topic is too small for size (the limit
// grew again). The one it replaces is closed once its writes are done.
func (w *dlqWriter) sideClient(topic string, size int32) (*kgo.Client, error) {
	w.sideMu.Lock()
	defer w.sideMu.Unlock()
	w.mu.Lock()
	var stale bool
	if t := w.topics[topic]; t != nil && t.sideSized > 0 && size > t.sideSized {
		stale = true
		for _, t := range w.topics {
			t.sideSized = 0
		}
	}
	w.mu.Unlock()
	if w.side != nil && !stale {
		return w.side, nil
	}
	cl, err := kgo.NewClient(append(readerOpts(w.cl),
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(w.timeout),
		kgo.RecordPartitioner(newDLQPartitioner(w)),
		kgo.ProducerBatchMaxBytesFn(func(topic string) int32 { return w.sizeFor(topic, true) }),
	)...)
	if err != nil {
		return nil, err
	}
	if old := w.side; old != nil {
		go closeFlushed(old, w.timeout)
	}
	w.side = cl
	return cl, nil
}

// closeFlushed closes cl once its writes are done, or after timeout.
func closeFlushed(cl *kgo.Client, timeout time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	_ = cl.Flush(ctx)
	cl.Close()
}

// close closes the side client, if any, once its writes are done. Run calls
// it when it stops.
func (w *dlqWriter) close() {
	w.sideMu.Lock()
	defer w.sideMu.Unlock()
	if w.side != nil {
		closeFlushed(w.side, w.timeout)
		w.side = nil
	}
}

// letter is one dead letter on its way to the dead-letter topic.
//
// Its first write produces tmpl itself, and a rewrite a fresh copy (see
// [rewrite]): a write's promise is one of two functions, which find the
// write from the record franz-go hands back (tmpl or rewrite.rec, the
// first field of each), so that a send allocates no closure and, the first
// time, nothing but its done channel.
type letter struct {
	tmpl     kgo.Record // the dead letter; first, see promiseFirst
	w        *dlqWriter
	src      *kgo.Record
	f        *deadletter.Failure
	stage    deadletter.Stage
	class    failure.Class
	reason   deadletter.Reason
	cause    error     // the failure that dead-lettered src
	attempts int       // tries of src before it was dead-lettered
	tries    int       // write attempts so far
	first    time.Time // of the first write
	lastWait time.Duration
	shrunk   bool   // the failure headers lost the error message
	size     int32  // letterSize of tmpl; 0 until newLetter or send computes it
	skipped  string // why it was settled as skipped instead ("operator", "unwritable"); set by skip
	kept     bool   // skipped with its family entry kept (family.skip)
	kind     letterKind
	gen      uint64             // dlqTopic.gen of its topic when writable last found it ready
	fam      *famRef            // the family entry of a keyed tier letter (per-key order), or nil
	at       int64              // offset of the fetched record it settles (src is the original of a tier record)
	extra    []kgo.RecordHeader // headers after the failure headers (retry tiers, trace context)
	clears   *kgo.Record        // the fetched record whose durable attempts entry goes once it is settled
	unsaved  *kgo.Record        // the fetched record it settles, without a durable entry (clearsAttempts)
	trace    *letterTrace       // the span of its write, until its first write ends (trace.go)

	cur    *write // the latest write attempt
	write0 write  // the first
	// hdrs holds the first headers of a letter whose source record has at
	// most inlineHeaders-failureHeaders headers.
	hdrs [inlineHeaders]kgo.RecordHeader
}

// clearsAttempts makes l clear the durable attempts entry of rec, the
// fetched record it settles, once l is settled (acknowledged or skipped),
// when rec has one (o.saved): not before, since a letter that is never
// written leaves rec to the next owner. Until then the entry holds the
// failure l tells, so that the next owner writes l again rather than try
// rec once more. A record without an entry (its letter follows its first
// try here) gets one only if its worker stops with l not yet written
// (partition.saveUnwritten), so that the path of a letter stays one write.
func (l *letter) clearsAttempts(a *attempts, rec *kgo.Record, o *origin) {
	switch {
	case o.saved:
		l.clears, o.lettered = rec, true
		a.saveUsed(rec, l)
	case a.on():
		l.unsaved = rec
	}
}

// letterKind is what a letter is for.
type letterKind uint8

const (
	kindDead    letterKind = iota // a dead letter
	kindForward                   // a failed record forwarded to a retry tier
	kindParked                    // a record parked behind an earlier one of its key
)

// write is one attempt to write a letter.
type write struct {
	l     *letter
	start time.Time
	gen   uint64        // dlqTopic.gen of its topic when sent
	sent  bool          // handed to a client (not refused by writable)
	done  chan struct{} // closed when acknowledged or failed
	err   error         // read after done
	at    int64         // the offset written at, when acknowledged
}

// rewrite is a write after the first, with the record it produces: a
// fresh one, since the record of an abandoned write may still be in
// franz-go's hands.
type rewrite struct {
	rec kgo.Record // first, see promiseRewrite
	wr  write
}

// promiseFirst is the promise of a letter's first write, which produces
// its tmpl: a pointer to a letter's first field is a pointer to the letter.
func promiseFirst(r *kgo.Record, err error) {
	l := (*letter)(unsafe.Pointer(r))
	l.write0.at = r.Offset
	l.write0.finish(err)
}

// promiseRewrite is the promise of a later write, which produces the rec
// of a rewrite.
func promiseRewrite(r *kgo.Record, err error) {
	rw := (*rewrite)(unsafe.Pointer(r))
	rw.wr.at = r.Offset
	rw.wr.finish(err)
}

// finish records the outcome of the write and closes done.
func (wr *write) finish(err error) {
	wr.err = err
	l := wr.l
	if r := l.fam; r != nil {
		r.f.sent(r.key, r.offset, r.forwards, wr.at, err)
	}
	if t := l.trace; t != nil {
		l.trace = nil
		t.span.EndLetter(t.ctx, err)
	}
	close(wr.done)
	if h := l.w.hooks; h != nil && l.kind == kindDead {
		h.DeadLetterWritten(WriteEvent{PartitionEvent: PartitionEvent{l.src.Topic, l.src.Partition},
			DeadLetterTopic: l.tmpl.Topic, Latency: time.Since(wr.start), Err: err})
	}
}

// skip settles l as skipped (why), instead of written. A tier copy that may
// yet land keeps its place in its key's order at once (family.skip), before
// its tier's worker can read it.
func (l *letter) skip(why string) {
	l.skipped = why
	if r := l.fam; r != nil && l.kind != kindDead {
		l.kept = r.f.skip(r.key, r.offset, r.forwards)
	}
}

func (l *letter) isDone() bool {
	select {
	case <-l.cur.done:
		return true
	default:
		return false
	}
}

// ok reports whether the latest write was acknowledged; it must be called
// after done was closed.
func (l *letter) ok() bool { return l.cur.err == nil }

// final reports whether l is settled: acknowledged, or skipped.
func (l *letter) final() bool { return l.skipped != "" || (l.isDone() && l.ok()) }

// failed reports whether the latest write failed and l is not skipped.
func (l *letter) failed() bool { return l.skipped == "" && l.isDone() && !l.ok() }

// newLetter builds the dead letter of rec: rec's key, value and headers byte
// for byte, then the failure headers of f, then the trace context of its
// write when rec is traced (t).
func (w *dlqWriter) newLetter(rec *kgo.Record, f *deadletter.Failure, cause error, t *traced) *letter {
	f.ClientID = w.clientID
	l := &letter{
		w: w, src: rec, f: f, stage: f.Stage, reason: f.Reason, cause: cause,
		// The partitioner reads the source partition from Partition.
		tmpl: kgo.Record{Topic: w.topicFor(rec.Topic), Partition: rec.Partition, Key: rec.Key, Value: rec.Value},
	}
	if t != nil {
		l.extra = traceLetter(t, l, OutcomeDeadLettered, nil)
	}
	l.tmpl.Headers = l.headers(l.hdrs[:0])
	if limit := w.limit(l.tmpl.Topic); limit > 0 {
		if l.size = letterSize(&l.tmpl); l.size > limit {
			l.shrink()
		}
	}
	return l
}

// failureHeaders is how many failure headers a letter has at most.
const failureHeaders = 17

// inlineHeaders is how many headers a letter holds in itself.
const inlineHeaders = 4 + failureHeaders

// headers are the source record's headers followed by the failure headers,
// appended in place: deadletter.Header and kgo.RecordHeader have the same
// layout (checked by a test). They are written into to when it has room.
func (l *letter) headers(to []kgo.RecordHeader) []kgo.RecordHeader {
	hs := to[:0:cap(to)]
	if n := len(l.src.Headers) + failureHeaders + len(l.extra); cap(hs) < n {
		hs = make([]kgo.RecordHeader, 0, n)
	}
	hs = append(hs, l.src.Headers...)
	dh := unsafe.Slice((*deadletter.Header)(unsafe.Pointer(unsafe.SliceData(hs))), cap(hs))[:len(hs)]
	dh = l.f.AppendHeaders(dh)
	return append(unsafe.Slice((*kgo.RecordHeader)(unsafe.Pointer(unsafe.SliceData(dh))), len(dh)), l.extra...)
}

// shrink drops the error message from the failure headers: the first thing
// to give up when a letter does not fit. It reports whether anything changed.
func (l *letter) shrink() bool {
	if l.shrunk {
		return false
	}
	l.shrunk = true
	l.f.Message = "(dropped: the dead letter was over the topic's size limit)"
	// Fresh headers: the record of an abandoned write may still read the
	// old ones.
	l.tmpl.Headers = l.headers(nil)
	l.size = letterSize(&l.tmpl)
	return true
}

// letterSize is a record's size in a batch, generously estimated: its bytes
// plus the record and batch framing.
func letterSize(r *kgo.Record) int32 {
	n := len(r.Key) + len(r.Value) + 128
	for _, h := range r.Headers {
		n += len(h.Key) + len(h.Value) + 10
	}
	return int32(min(n, 1<<31-1))
}

// limit is the known size limit of a dead-letter topic, 0 if unknown.
func (w *dlqWriter) limit(topic string) int32 {
	if r := w.lastReady.Load(); r != nil && r.topic == topic {
		return r.limit
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.topics[topic]; t != nil {
		return t.maxBytes
	}
	return 0
}

// ErrLetterTooLarge is the write error of a dead letter that is larger than
// its dead-letter topic accepts even without its error message. It can never
// be written; [DeadLetterConfig.Unwritable] decides what happens.
var ErrLetterTooLarge = errors.New("consumer: dead letter larger than the dead-letter topic accepts")

// send starts writing l without waiting: l.cur.done is closed when the
// broker acknowledged the write or it failed (l.cur.err).
//
// The write does not end with the partition's context: a letter in flight
// at a revoke or a shutdown gets WriteTimeout to be acknowledged, so that
// it is committed rather than written again after the restart. The first
// send produces l.tmpl, a later one a fresh copy: the record of an
// abandoned write may still be in franz-go's hands.
func (w *dlqWriter) send(ctx context.Context, l *letter) {
	rec, promise := &l.tmpl, promiseFirst
	wr := &l.write0
	var start time.Time
	if l.tries == 0 && l.kind == kindDead && l.f != nil && !l.f.Last.IsZero() {
		// A dead letter's first write starts as its failure is settled:
		// the failure's last time (newFailure), read a moment ago.
		start = l.f.Last
	} else {
		start = time.Now()
	}
	if l.tries > 0 {
		rw := &rewrite{rec: kgo.Record{Topic: l.tmpl.Topic, Partition: l.src.Partition, Key: l.tmpl.Key, Value: l.tmpl.Value, Headers: l.tmpl.Headers}}
		rec, promise, wr = &rw.rec, promiseRewrite, &rw.wr
	}
	// The record's timestamp is the write's start, which saves the client
	// its own clock read.
	rec.Timestamp = start
	*wr = write{l: l, start: start, done: make(chan struct{})}
	if l.tries == 0 {
		l.first = wr.start
	}
	l.cur = wr
	l.tries++
	if r := l.fam; r != nil {
		r.f.sending(r.key, r.offset, r.forwards)
	}
	if err := w.writable(ctx, l); err != nil {
		wr.finish(err)
		return
	}
	wr.gen, wr.sent = l.gen, true
	// The client bounds the write with WriteTimeout
	// (kgo.RecordDeliveryTimeout).
	cl := w.cl
	if w.cramped(l.tmpl.Topic, l.size) {
		side, err := w.sideClient(l.tmpl.Topic, l.size)
		if err != nil {
			wr.finish(err)
			return
		}
		cl = side
	}
	if w.txnal && cl == w.cl {
		// The transactional client has no delivery timeout (see New).
		pctx, cancel := context.WithDeadline(context.Background(), start.Add(w.timeout))
		cl.Produce(pctx, rec, func(r *kgo.Record, err error) { cancel(); promise(r, err) })
		return
	}
	cl.Produce(context.Background(), rec, promise)
}

// writable checks, without writing, that l can be written: its topic is
// ready (checked, created if missing) and l fits its size limit.
func (w *dlqWriter) writable(ctx context.Context, l *letter) error {
	limit, gen, ok := w.ready(l.src.Topic, l.tmpl.Topic)
	if !ok {
		sources, err := w.sourcePartitions(ctx, l.src.Topic)
		if err == nil {
			err = w.ensure(ctx, l.src.Topic, l.tmpl.Topic, sources)
		}
		if err != nil {
			return err
		}
		if limit, gen, ok = w.ready(l.src.Topic, l.tmpl.Topic); !ok {
			return fmt.Errorf("%s %s: %w", w.what(l.tmpl.Topic), l.tmpl.Topic, errRefreshing)
		}
	}
	l.gen = gen
	if limit > 0 && l.size == 0 {
		l.size = letterSize(&l.tmpl)
	}
	if limit > 0 && l.size > limit {
		return fmt.Errorf("%w: %d bytes, %s accepts %d (max.message.bytes)", ErrLetterTooLarge, l.size, l.tmpl.Topic, limit)
	}
	if w.txnal && w.sizedBelow(l.tmpl.Topic, l.size) {
		// The transactional client sized its batches for the topic
		// before its limit was raised, and letters must be written by
		// it: the write would fail and abort every partition's
		// transaction. It waits as too large; a restart writes it.
		return fmt.Errorf("%w: %d bytes; %s accepts it now, but this consumer's client sized its batches for the topic's earlier limit: restart the consumer to write it", ErrLetterTooLarge, l.size, l.tmpl.Topic)
	}
	if l.kind != kindDead {
		// A tier record goes to its source partition, never by key: the
		// tier partition's worker is the one that shares its per-key
		// order.
		if n := w.partitionsOf(l.tmpl.Topic); n > 0 && l.tmpl.Partition >= n {
			return fmt.Errorf("%w: %s has %d partitions, the record is of source partition %d", ErrRetryTopicPartitions, l.tmpl.Topic, n, l.tmpl.Partition)
		}
	}
	return nil
}

// ErrRetryTopicPartitions is the write error of a record forwarded to a
// retry tier that has fewer partitions than its source topic: a tier
// partition serves the source partition of the same number, so the record
// has none. Tiers created by the consumer grow with their source topic
// (checked at assignment); others must be grown by an operator, and until
// then [DeadLetterConfig.Unwritable] decides.
var ErrRetryTopicPartitions = errors.New("consumer: retry topic has fewer partitions than its source topic")

// partitionsOf is the known partition count of a dead-letter or retry topic,
// 0 if unknown.
func (w *dlqWriter) partitionsOf(topic string) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.topics[topic]; t != nil {
		return t.parts
	}
	return 0
}

// recheck forgets what the writer knows of a dead-letter or retry topic
// (exists, size limit, partitions) and the partition count of its source
// topic, so that the next write checks them again. It is called when
// partitions are assigned (a source topic may have grown) and after a write
// failed (the topic may have been deleted, or its limit raised).
func (w *dlqWriter) recheck(source, topic string) {
	w.mu.Lock()
	if t := w.topics[topic]; t != nil {
		t.unready()
	}
	delete(w.srcSize, source)
	w.mu.Unlock()
	if r := w.lastReady.Load(); r != nil && (r.topic == topic || r.source == source) {
		w.lastReady.CompareAndSwap(r, nil)
	}
}

// recheckStuck makes the next ensure check topic again, for a letter
// whose write the client cannot end (txn.commit), and reports whether it
// should be checked now: not when the client must forget the topic
// (stale), which a write does. The source's partition count is kept.
func (w *dlqWriter) recheckStuck(topic string) bool {
	w.mu.Lock()
	t := w.topics[topic]
	if t == nil || t.stale {
		w.mu.Unlock()
		return false
	}
	t.unready()
	w.mu.Unlock()
	if r := w.lastReady.Load(); r != nil && r.topic == topic {
		w.lastReady.CompareAndSwap(r, nil)
	}
	return true
}

// unready makes the next ensure check t again; one under way (renewing)
// checks it again when it ends. w.mu is held.
func (t *dlqTopic) unready() {
	if t.ready {
		t.ready, t.err = false, nil
	} else if t.renewing {
		t.recheckDue = true
	}
}

// changed is recheck after a write wr to topic failed with err
// (topicChanged). UNKNOWN_TOPIC_ID says the client held an id the topic no
// longer has: it was deleted and created again, maybe by another member, so
// the writer may never have seen the id that ensure would compare. Unless
// the client forgot the topic since wr was sent (see dlqTopic.gen), the next
// ensure makes it forget the topic, and the next write loads it afresh. Only
// a write a client took says which id it holds: one refused before (by
// writable) marks nothing.
func (w *dlqWriter) changed(source, topic string, err error, wr *write) {
	if errors.Is(err, kerr.UnknownTopicID) {
		w.mu.Lock()
		if t := w.topics[topic]; t != nil && !t.renewing && wr != nil && wr.sent && wr.gen == t.gen {
			t.stale = true
		}
		w.mu.Unlock()
	}
	w.recheck(source, topic)
}

// failed decides on l's failed write (l.cur): whether the write can never
// succeed (unwritable), whether to write it again at once, and the error to
// report. An error that says the topic changed (topicChanged) is decided on
// the topic as it is now, not as it was cached: an operator may have fixed
// it; and a write sent before the client renewed the topic (see
// dlqTopic.gen) is written again at once, so that the letters that failed
// meanwhile do not each wait their backoff in turn.
func (w *dlqWriter) failed(ctx context.Context, l *letter) (never, now bool, err error) {
	err = l.cur.err
	if !topicChanged(err) {
		return unwritable(err), false, err
	}
	w.changed(l.src.Topic, l.tmpl.Topic, err, l.cur)
	werr := w.writable(ctx, l)
	switch {
	case werr == nil:
		return false, l.gen != l.cur.gen, err
	case unwritable(werr):
		return true, false, werr
	}
	return false, false, err
}

// staleFetches is the poll loop's report that fetches of tier topic fail
// with UNKNOWN_TOPIC_ID: the client holds an id the topic no longer has. A
// tier this writer never wrote to is forgotten at once.
// One it wrote to is checked again (ensure), which takes in a new id and
// forgets the topic only if its writes failed for the old one, so that a
// purge never follows writes to the new topic (see dlqTopic.gen); if it did
// not, only the consuming holds the old id: the topic is forgotten for
// consuming only, which keeps the writes' sequence numbers.
func (w *dlqWriter) staleFetches(ctx context.Context, source, topic string) {
	t, before := w.fetchesStale(source, topic)
	w.recheck(source, topic)
	if n, err := w.sourcePartitions(ctx, source); err == nil {
		_ = w.ensure(ctx, source, topic, n) // an error is the next write's to handle
	}
	w.mu.Lock()
	purged := t.gen != before
	w.mu.Unlock()
	if !purged {
		// The family cannot tell the entries of copies in the old topic
		// from those of copies written to the new one: it forgets both,
		// rather than keep one that would park its key forever.
		if w.tierGone != nil {
			w.tierGone(topic)
		}
		w.log.Warn("retry topic was deleted and created again: the client consumes it afresh", "topic", topic)
		w.cl.PurgeTopicsFromConsuming(topic)
		w.cl.AddConsumeTopics(topic)
	}
}

// fetchesStale is the first step of staleFetches: a tier never written is
// marked stale and not ready at once, under one lock, so that no write goes
// through before the purge (a write between the two would be to the new
// topic, and the purge would reset its sequence numbers). It returns the
// tier and its gen.
func (w *dlqWriter) fetchesStale(source, topic string) (*dlqTopic, uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.topics[topic]
	if t == nil {
		t = &dlqTopic{name: topic, source: source, tier: true}
		w.topics[topic] = t
	}
	if !t.written {
		t.stale, t.ready = true, false // never written: forgotten at once
	}
	return t, t.gen
}

// ready returns the size limit of a dead-letter topic when it is ready and
// its source topic's partition count is known: what send checks, under one
// lock.
func (w *dlqWriter) ready(source, topic string) (limit int32, gen uint64, ok bool) {
	if r := w.lastReady.Load(); r != nil && r.topic == topic && r.source == source {
		return r.limit, r.gen, true
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	t := w.topics[topic]
	if _, ok := w.srcSize[source]; !ok || t == nil || !t.ready || t.stale {
		return 0, 0, false // stale: to be purged before any write (ensure)
	}
	// Set whenever a write may follow (some callers only check): the
	// fast path above only follows this one.
	t.written = true
	w.lastReady.Store(&readyTopic{source: source, topic: topic, limit: t.maxBytes, gen: t.gen})
	return t.maxBytes, t.gen, true
}

// nextWait is how long to wait before writing l again. A policy that gives
// up keeps waiting its last wait (at least a second): a dead letter is never
// dropped.
func (w *dlqWriter) nextWait(l *letter) time.Duration {
	if tooLarge(l.cur.err) && l.shrink() {
		return 0 // smaller now: try again at once
	}
	wait, ok := backoff.Next(w.retry, l.tries, 0, l.cur.err)
	if !ok {
		wait = max(l.lastWait, time.Second)
	}
	l.lastWait = wait
	return wait
}

// rewrite waits, then writes l again and waits for the outcome. It returns
// ctx's error when ctx ends first; a write still in flight is abandoned.
func (w *dlqWriter) rewrite(ctx context.Context, l *letter, wait time.Duration) error {
	if err := backoff.Sleep(ctx, wait); err != nil {
		return err
	}
	w.send(ctx, l)
	select {
	case <-l.cur.done:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// topicChanged reports whether a write error may say that the topic is not
// what the writer knows of it: deleted, its limit or its partitions changed.
// The topic is checked again before the next write (recheck).
func topicChanged(err error) bool {
	return tooLarge(err) || errors.Is(err, ErrRetryTopicPartitions) || errors.Is(err, kerr.UnknownTopicOrPartition) ||
		errors.Is(err, kerr.UnknownTopicID) || strings.Contains(err.Error(), "invalid record partitioning choice")
}

// tooLarge reports whether err says a record or batch is too large.
func tooLarge(err error) bool {
	return errors.Is(err, ErrLetterTooLarge) || errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge)
}

// unwritable reports whether a dead-letter write error can never succeed
// however often it is retried: the letter is too large, the topic is not
// authorized or not valid, a policy rejects it.
func unwritable(err error) bool {
	if tooLarge(err) || errors.Is(err, ErrRetryTopicPartitions) {
		return true
	}
	for _, e := range []error{
		kerr.InvalidRecord, kerr.CorruptMessage, kerr.TopicAuthorizationFailed, kerr.ClusterAuthorizationFailed,
		kerr.PolicyViolation, kerr.InvalidTopicException, kerr.InvalidRequiredAcks, kerr.UnsupportedForMessageFormat,
		kerr.InvalidProducerEpoch, kerr.TransactionalIDAuthorizationFailed, kerr.UnsupportedVersion,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// clientID is the client id the client was configured with.
func clientID(cl *kgo.Client) string {
	id, _ := cl.OptValue(kgo.ClientID).(string)
	return id
}

// sourcePartitions returns the partition count of a source topic (cached).
func (w *dlqWriter) sourcePartitions(ctx context.Context, source string) (int32, error) {
	w.mu.Lock()
	n, ok := w.srcSize[source]
	w.mu.Unlock()
	if ok {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	details, err := w.adm.ListTopics(ctx, source)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("source topic %s: metadata: %w", source, err)
	}
	n = int32(len(details[source].Partitions))
	w.mu.Lock()
	w.srcSize[source] = n
	w.mu.Unlock()
	return n, nil
}

// check checks the dead-letter topic of each source topic, creating it if
// it is missing and creation is on, and logs what cannot be written. It runs
// when partitions are assigned, before any record depends on it.
func (w *dlqWriter) check(ctx context.Context, sources []string) {
	for _, src := range sources {
		dlq := w.topicFor(src)
		// Checked again at each assignment: the topic may have been
		// deleted, its limit changed, or its source grown.
		w.recheck(src, dlq)
		n, err := w.sourcePartitions(ctx, src)
		if err == nil {
			err = w.ensure(ctx, src, dlq, n)
		}
		if err != nil && !errors.Is(err, errRefreshing) {
			w.log.Error("dead-letter topic cannot be used: a poison pill of this topic will wait until it can (Stats().DeadLetterTopics)",
				"topic", src, "dlq_topic", dlq, "err", err)
		}
	}
}

// ensure makes sure the dead-letter topic of source exists and knows its
// size limit: it creates a missing one when creation is on, with the source
// topic's partition count, the broker's default replication and
// max.message.bytes = the source topic's limit + LetterHeadroom. The outcome
// is cached when it succeeds; a failure is checked again at most once per
// second.
func (w *dlqWriter) ensure(ctx context.Context, source, topic string, partitions int32) error {
	w.mu.Lock()
	t := w.topics[topic]
	if t == nil {
		t = &dlqTopic{name: topic, source: source, tier: w.isTier != nil && w.isTier(topic)}
		w.topics[topic] = t
	}
	ready, last, lastErr := t.ready, t.checked, t.err
	w.mu.Unlock()
	if ready {
		return nil
	}
	if lastErr != nil && time.Since(last) < time.Second {
		return lastErr
	}
	info, err := w.prepare(ctx, source, topic, partitions)
	w.mu.Lock()
	t.checked, t.err = time.Now(), err
	var grew, newID, purge bool
	if err == nil && t.renewing {
		err = fmt.Errorf("%s %s: %w", w.what(topic), topic, errRefreshing)
	}
	if err == nil {
		grew = t.maxBytes > 0 && info.limit > t.maxBytes
		// Decided once, under the lock: a concurrent ensure sees the new
		// id, or the renewal under way. A new id alone is no reason to
		// purge: the client holds the old one only if it wrote to the old
		// topic, and then its writes fail (stale); if it first wrote to
		// the new topic, a purge would reset the sequence numbers of
		// those writes.
		newID = t.id != (kadm.TopicID{}) && info.id != (kadm.TopicID{}) && info.id != t.id
		purge = t.stale
		t.maxBytes, t.parts, t.id, t.stale = info.limit, info.parts, info.id, false
		if purge {
			// The new gen now, with the topic not ready: every write
			// sent before has an older one, and its failure that comes
			// during or after the purge marks nothing stale.
			t.sized, t.sideSized = 0, 0
			t.gen++
		}
		if newID || purge {
			t.renewing = true
		} else {
			t.ready = true
		}
	}
	w.mu.Unlock()
	if grew {
		w.grown.Store(true)
	}
	if newID || purge {
		// Before the new topic is ready: no write reaches it first.
		if t.tier && w.tierGone != nil {
			w.tierGone(topic) // the copies of the old topic went with it
		}
		if purge {
			w.recreated(topic)
		} else {
			w.log.Warn(w.what(topic)+" was deleted and created again", "topic", topic)
		}
		w.mu.Lock()
		t.renewing, t.ready = false, t.err == nil && !t.stale && !t.recheckDue
		t.recheckDue = false
		w.mu.Unlock()
	} else if grew {
		w.log.Info(w.what(topic)+" accepts larger records now", "topic", topic, "max_message_bytes", info.limit)
	}
	return err
}

// errRefreshing is the error of a write to a topic whose new id is being
// taken in (ensure): the write is tried again.
var errRefreshing = errors.New("the topic was deleted and created again, and its new id is being taken in; the write is tried again")

// recreated makes the clients forget a topic that was deleted and created
// again since they wrote to it: franz-go keeps the old topic id and fails
// every write with UNKNOWN_TOPIC_ID until the topic is purged. The new
// topic has no producer state, so its writes start afresh. A retry tier is
// consumed too: it is added back to the subscription.
func (w *dlqWriter) recreated(topic string) {
	w.log.Warn(w.what(topic)+" was deleted and created again: the client starts afresh with it", "topic", topic)
	if w.isTier != nil && w.isTier(topic) {
		w.cl.PurgeTopicsFromClient(topic)
		w.cl.AddConsumeTopics(topic)
	} else {
		w.cl.PurgeTopicsFromProducing(topic)
	}
	w.sideMu.Lock()
	if w.side != nil {
		w.side.PurgeTopicsFromProducing(topic)
	}
	w.sideMu.Unlock()
}

// topicInfo is what prepare learns of a topic.
type topicInfo struct {
	limit, parts int32
	id           kadm.TopicID
}

// prepare does the work of ensure and returns the topic's max.message.bytes,
// partition count and id. A retry tier with fewer partitions than its source
// is grown when the consumer manages its topics (creation is on), and is an
// error otherwise.
func (w *dlqWriter) prepare(ctx context.Context, source, topic string, partitions int32) (topicInfo, error) {
	var none topicInfo
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	what := w.what(topic)
	details, err := w.adm.ListTopics(ctx, topic)
	if err != nil {
		return none, fmt.Errorf("%s %s: metadata: %w", what, topic, err)
	}
	d, exists := details[topic]
	if exists && d.Err != nil && !errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		return none, fmt.Errorf("%s %s: %w", what, topic, d.Err)
	}
	if !exists || d.Err != nil {
		if !w.create {
			return none, fmt.Errorf("%s %s does not exist and DeadLetterConfig.DisableTopicCreation is set: %w", what, topic, kerr.UnknownTopicOrPartition)
		}
		srcLimit, err := w.maxMessageBytes(ctx, source)
		if err != nil {
			return none, fmt.Errorf("%s %s: reading the limit of %s: %w", what, topic, source, err)
		}
		limit := int32(min(int64(srcLimit)+LetterHeadroom, 1<<30))
		v := strconv.Itoa(int(limit))
		resp, err := w.adm.CreateTopic(ctx, partitions, -1, map[string]*string{"max.message.bytes": &v}, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return none, fmt.Errorf("%s %s: create: %w", what, topic, err)
		}
		if err == nil {
			w.log.Info("created "+what, "topic", topic, "partitions", partitions, "max_message_bytes", limit)
			return topicInfo{limit: limit, parts: partitions, id: resp.ID}, nil
		}
		// Created meanwhile by another member: read it.
		if details, err = w.adm.ListTopics(ctx, topic); err != nil {
			return none, fmt.Errorf("%s %s: metadata: %w", what, topic, err)
		}
		d = details[topic]
	}
	parts := int32(len(d.Partitions))
	if w.isTier != nil && w.isTier(topic) && parts < partitions {
		if !w.create {
			return none, fmt.Errorf("%w: %s has %d, %s has %d; add partitions to it (DeadLetterConfig.DisableTopicCreation is set, so the consumer does not)",
				ErrRetryTopicPartitions, topic, parts, source, partitions)
		}
		// Set, not added: members checking at the same rebalance must
		// not grow it twice.
		resp, err := w.adm.UpdatePartitions(ctx, int(partitions), topic)
		if err == nil {
			err = resp.Error()
		}
		switch {
		case errors.Is(err, kerr.InvalidPartitions):
			// grown to that count meanwhile by another member
		case err != nil:
			return none, fmt.Errorf("%w: %s has %d, %s has %d; adding partitions: %v", ErrRetryTopicPartitions, topic, parts, source, partitions, err)
		default:
			w.log.Info("grew retry topic with its source topic", "topic", topic, "source", source, "partitions_before", parts, "partitions", partitions)
		}
		parts = partitions
		w.cl.ForceMetadataRefresh()
	}
	limit, err := w.maxMessageBytes(ctx, topic)
	if err != nil {
		return none, fmt.Errorf("%s %s: reading its max.message.bytes: %w", what, topic, err)
	}
	return topicInfo{limit: limit, parts: parts, id: d.ID}, nil
}

// maxMessageBytes reads a topic's effective max.message.bytes.
func (w *dlqWriter) maxMessageBytes(ctx context.Context, topic string) (int32, error) {
	rcs, err := w.adm.DescribeTopicConfigs(ctx, topic)
	if err != nil {
		return 0, err
	}
	rc, err := rcs.On(topic, nil)
	if err != nil {
		return 0, err
	}
	if rc.Err != nil {
		return 0, rc.Err
	}
	for _, c := range rc.Configs {
		if c.Key == "max.message.bytes" && c.Value != nil {
			n, err := strconv.ParseInt(*c.Value, 10, 32)
			if err != nil || n <= 0 {
				return 0, fmt.Errorf("max.message.bytes %q is not a size", *c.Value)
			}
			return int32(n), nil
		}
	}
	return 0, fmt.Errorf("max.message.bytes not reported for %s", topic)
}

// states returns what the writer knows of each dead-letter topic (tiers
// false) or of each retry tier (tiers true).
func (w *dlqWriter) states(tiers bool) []DeadLetterTopic {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]DeadLetterTopic, 0, len(w.topics))
	for _, t := range w.topics {
		if t.tier != tiers {
			continue
		}
		s := DeadLetterTopic{Topic: t.name, Source: t.source, Ready: t.ready, MaxMessageBytes: t.maxBytes}
		if t.err != nil {
			s.Error = t.err.Error()
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Topic < out[j].Topic })
	return out
}

// sourcesOf returns the partition count of the source topic of a
// dead-letter topic, 0 for another topic.
func (w *dlqWriter) sourcesOf(topic string) int32 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t := w.topics[topic]; t != nil {
		return w.srcSize[t.source]
	}
	return 0
}

// dlqPartitioner sends a dead letter to its source partition (which send
// puts in Record.Partition) when the dead-letter topic has at least as many
// partitions as the source topic, and otherwise partitions by key (murmur2,
// as the Java client does; records without a key go to the source partition
// modulo the partition count). Records of other topics (the durable attempts)
// are partitioned by key.
type dlqPartitioner struct {
	w     *dlqWriter
	byKey kgo.Partitioner
}

func newDLQPartitioner(w *dlqWriter) kgo.Partitioner {
	return dlqPartitioner{w: w, byKey: kgo.StickyKeyPartitioner(nil)}
}

// ForTopic is called by franz-go on the first produce to a topic, which for
// a dead-letter topic comes after send has learned its source topic.
func (d dlqPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	if d.w.isTier != nil && d.w.isTier(t) {
		return tierPartitioner{}
	}
	return dlqTopicPartitioner{byKey: d.byKey.ForTopic(t), sources: int(d.w.sourcesOf(t))}
}

// tierPartitioner writes a record to a retry tier's partition of the same
// number as its source partition (Record.Partition), where the worker that
// shares its per-key order reads it. A tier with too few partitions fails
// the write (franz-go: an invalid partitioning choice): never another
// partition.
type tierPartitioner struct{}

func (tierPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (tierPartitioner) Partition(r *kgo.Record, n int) int {
	if int(r.Partition) >= n {
		return -1
	}
	return int(r.Partition)
}

type dlqTopicPartitioner struct {
	byKey   kgo.TopicPartitioner
	sources int // of the source topic; 0 for a topic that holds no letters
}

func (p dlqTopicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (p dlqTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if p.sources > 0 {
		if src := int(r.Partition); n >= p.sources && src < n {
			return src
		} else if r.Key == nil {
			return src % n
		}
	}
	return p.byKey.Partition(r, n)
}
