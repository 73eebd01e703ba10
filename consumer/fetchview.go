package consumer

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchView is what the poll loop knows of the records the client has
// fetched and not yet handed out: how many of each partition it holds, and
// which broker each partition was last fetched from. franz-go has one
// fetch per broker at a time, sent once the one before it is fully polled,
// and it names every partition that is not paused at that moment; pausing
// a partition drops what the client holds for it. So a full partition can
// be paused without a record fetched twice only while none of its records
// are in the client and its broker's fetch is not fully polled (the fetch
// that follows is then sent with the partition paused). See pollRound.
//
// The hooks run on the client's fetch goroutines (buffered) and on the
// poll goroutine (unbuffered, once a poll has taken records; records
// dropped by a pause or a rebalance, on a goroutine of the client's).
type fetchView struct {
	mu      sync.Mutex                              // serialises adding a partition or a broker
	parts   atomic.Pointer[map[tp]*fetchStat]       // copied on write
	last    atomic.Pointer[fetchStat]               // the last looked up: a fetch's records come by partition
	fetches atomic.Pointer[map[int32]*atomic.Int64] // fetch responses read, by broker; copied on write
	watch   atomic.Pointer[fetchWatch]              // the poll goroutine's wait for a broker's next fetch response
}

// fetchWatch ends a poll's wait (stop) once a fetch response is read
// from broker.
type fetchWatch struct {
	broker int32
	stop   context.CancelFunc
}

type fetchStat struct {
	topic  string
	part   int32
	held   atomic.Int64 // records in the client
	broker atomic.Int32 // the broker it was last fetched from
	fed    atomic.Int64 // its broker's fetch responses read when it last got records (fetchView.fetched)
}

var (
	_ kgo.HookFetchBatchRead        = (*fetchView)(nil)
	_ kgo.HookFetchRecordBuffered   = (*fetchView)(nil)
	_ kgo.HookFetchRecordUnbuffered = (*fetchView)(nil)
	_ kgo.HookBrokerRead            = (*fetchView)(nil)
)

// OnBrokerRead counts the fetch responses read from each broker; it runs
// before the response's batches are read.
func (v *fetchView) OnBrokerRead(meta kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == fetchKey {
		v.fetchCount(meta.NodeID).Add(1)
		if w := v.watch.Load(); w != nil && w.broker == meta.NodeID {
			w.stop()
		}
	}
}

// fetchKey is the Fetch request's key.
const fetchKey = 1

func (v *fetchView) fetchCount(broker int32) *atomic.Int64 {
	return loadOrAdd(&v.mu, &v.fetches, broker, func() *atomic.Int64 { return new(atomic.Int64) })
}

// fetched returns the fetch responses read from broker.
func (v *fetchView) fetched(broker int32) int64 { return v.fetchCount(broker).Load() }

// stat returns the partition's figures. It costs a few nanoseconds for the
// records of the partition looked up last, which is most of them.
func (v *fetchView) stat(topic string, part int32) *fetchStat {
	if s := v.last.Load(); s != nil && s.part == part && s.topic == topic {
		return s
	}
	var s *fetchStat
	if m := v.parts.Load(); m != nil {
		s = (*m)[tp{topic, part}]
	}
	if s == nil {
		s = v.add(topic, part)
	}
	v.last.Store(s)
	return s
}

func (v *fetchView) add(topic string, part int32) *fetchStat {
	return loadOrAdd(&v.mu, &v.parts, tp{topic, part}, func() *fetchStat { return &fetchStat{topic: topic, part: part} })
}

// loadOrAdd returns the value of k in the copy-on-write map at p, adding
// one made by mk (under mu) when it has none: readers load the map without
// a lock.
func loadOrAdd[K comparable, V any](mu *sync.Mutex, p *atomic.Pointer[map[K]*V], k K, mk func() *V) *V {
	if m := p.Load(); m != nil {
		if x := (*m)[k]; x != nil {
			return x
		}
	}
	mu.Lock()
	defer mu.Unlock()
	old := p.Load()
	m := make(map[K]*V, 1)
	if old != nil {
		if x := (*old)[k]; x != nil {
			return x
		}
		m = make(map[K]*V, len(*old)+1)
		for k, x := range *old {
			m[k] = x
		}
	}
	x := mk()
	m[k] = x
	p.Store(&m)
	return x
}

// OnFetchBatchRead notes the partition's broker; it runs before the
// batch's records are buffered.
func (v *fetchView) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, part int32, m kgo.FetchBatchMetrics) {
	s := v.stat(topic, part)
	s.broker.Store(meta.NodeID)
	if m.NumRecords > 0 {
		s.fed.Store(v.fetched(meta.NodeID))
	}
}

// OnFetchRecordBuffered runs before the fetch can be polled.
func (v *fetchView) OnFetchRecordBuffered(r *kgo.Record) {
	v.stat(r.Topic, r.Partition).held.Add(1)
}

// OnFetchRecordUnbuffered runs for records polled (before the poll
// returns) and for records dropped.
func (v *fetchView) OnFetchRecordUnbuffered(r *kgo.Record, _ bool) {
	v.stat(r.Topic, r.Partition).held.Add(-1)
}

// held returns the records of topic/part in the client.
func (v *fetchView) held(topic string, part int32) int64 {
	return v.stat(topic, part).held.Load()
}

// brokerHolds reports whether the client holds records of any partition
// last fetched from the broker of topic/part: its fetch is then not fully
// polled, and no other is sent to it until it is.
func (v *fetchView) brokerHolds(topic string, part int32) bool {
	b := v.stat(topic, part).broker.Load()
	m := v.parts.Load()
	if m == nil {
		return false
	}
	for _, s := range *m {
		if s.broker.Load() == b && s.held.Load() > 0 {
			return true
		}
	}
	return false
}

// pollRound polls what the client has fetched and hands it to the
// partitions (each). A partition that holds its bound keeps taking its part
// of the fetches under way; the round pauses its fetching where that drops
// the least. When some partitions want a pause, it polls all but the last
// record the client holds (first waiting for a fetch, of which it takes
// one record), and pauses those whose records were all taken while their
// broker's fetch is not fully polled: that drops nothing. A partition whose
// record is the last (its records are the last of its broker's fetch: a
// broker keeps the order of a fetch session's partitions while they all
// have data, and a partition alone on its broker is always last) cannot be
// paused without dropping it: the round starts a rotation (see rotation),
// which moves another partition of that broker after it, and lets the
// fetches go on. When none can be made, or it failed, the round leaves
// that record in the client, and the partition holds back the poll loop
// (flow.holdBack), as one given two more fetches with no such poll does
// (several brokers), until it is back under half of its bound, or until
// the member's other flowing partitions have no records left (budget.dry).
// Then the next round tries a rotation, or else pauses it, dropping what
// the client holds of it (the one record, whose batch is fetched again on
// resume; with several brokers, what its broker's fetch brought
// meanwhile). So a full partition slows the others only while they have
// work, and a partition no other flowing partition waits for never drops a
// record. It runs on the poll goroutine, which alone pauses for this
// reason and owns the rotation. It returns the last poll's fetches.
func (c *Consumer[K, V]) pollRound(ctx context.Context, each func(kgo.Fetches)) kgo.Fetches {
	c.round++
	if len(c.wantPause) == 0 {
		fs := c.cl.PollFetches(ctx)
		each(fs)
		return fs
	}
	if c.budget.dry() {
		// The others have nothing left: pause the partitions that hold
		// back the poll loop, before a poll feeds them more.
		for k, p := range c.wantPause {
			if _, blocking := p.wantsStop(); blocking {
				if c.rotateFor(k, p) {
					continue // it goes on, no longer holding back the poll loop
				}
				c.log.Debug("pausing a full partition that holds back the poll loop: what the client holds of it is fetched again on resume",
					"topic", k.topic, "partition", k.partition)
				p.pauseFull()
				c.unwant(k)
			}
		}
	}
	var fs kgo.Fetches
	if c.cl.BufferedFetchRecords() == 0 {
		fs = c.cl.PollRecords(ctx, 1)
		each(fs)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return fs
		}
	}
	if n := c.cl.BufferedFetchRecords(); n >= 2 {
		fs = c.cl.PollRecords(ctx, int(n-1))
		each(fs)
		if ctx.Err() != nil || fs.IsClientClosed() {
			return fs
		}
	}
	last, hold := c.cl.BufferedFetchRecords() == 1, false
	c.advanceRotation()
	for k, p := range c.wantPause {
		want, _ := p.wantsStop()
		held := c.view.held(k.topic, k.partition)
		switch {
		case !want: // under its bound, revoked, or paused for another reason
			c.unwant(k)
		case held == 0 && c.view.brokerHolds(k.topic, k.partition): // drops nothing
			p.pauseFull()
			c.unwant(k)
		case held == 1 && last:
			if c.rotateFor(k, p) {
				continue // its broker's next fetches go out
			}
			p.holdBack()
			hold = true
		}
	}
	c.rotationFed()
	if hold {
		return fs // its broker's next fetch waits for the last record
	}
	if fs != nil && c.cl.BufferedFetchRecords() == 0 {
		// Records were handed out: do not wait for more, which would
		// hold back a rebalance.
		return fs
	}
	fs = c.cl.PollFetches(ctx)
	each(fs)
	return fs
}

// rotation moves a partition to the end of its broker's fetch session, so
// that a full partition whose records are the last of that broker's fetch
// can be paused without a record fetched twice. A broker lists a fetch
// session's partitions in the order they joined it (each one that returns
// records moves to the end, so that those that keep returning records keep
// their order), and franz-go takes a paused partition out of the session
// (ForgottenTopics). So the poll goroutine pauses another partition of that
// broker (q) whose records it has all taken, which drops nothing while the
// broker's fetch is not fully polled; lets that fetch be polled (the full
// partition takes its last record) and the next one go out without q;
// resumes q once that one is read: the fetch after it lists q again, last,
// after the full partition. That fetch's records of the full partition
// are then all taken while q's last record holds the broker's fetch, and
// the full partition is paused (pollRound). While q is paused, a poll
// waits only until the broker's next fetch response is read
// (rotationWait): q may be the only partition with records left. The full
// partition is given up to three more fetches meanwhile (the one without
// q, perhaps one more sent before q was resumed, and the one with q at the
// end), and q misses one or two. When the fetch that lists q again leaves
// the full partition last (q had no records to return), the rotation
// failed: the full partition holds back the poll loop as before, until it
// is back under half of its bound or the others have no records left. A
// rotation also fails when a partition moves to another broker, when the
// full partition was given four fetches without a pause (several brokers:
// rotationFed), or after rotationLimit. One rotation is under way at a time,
// one each time a partition fills; when none could be started, it is tried
// again once the others have no records left. Only the poll goroutine
// reads or changes it. The broker of q is the one that last returned its
// records: if its leader moved since and a fetch of it is under way
// elsewhere, its pause drops what that fetch brings (fetched again).
type rotation[K, V any] struct {
	full    tp
	p, q    *partition[K, V] // the full partition, and the one paused for a fetch
	broker  int32
	at      int64 // the broker's fetch responses read when q was paused
	resumed int64 // ... when q was resumed; 0 before
	qStat   *fetchStat
	until   time.Time // it fails then (rotationLimit)
	fed0    int       // the full partition's feeds when it began (rotationFed)
}

// qFed reports whether q got records in a fetch read after its resume.
func (r *rotation[K, V]) qFed() bool { return r.qStat.fed.Load() > r.resumed }

// rotateFor reports whether a rotation is under way for the full partition
// p at k, whose record is the last the client holds, starting one if it
// can: the poll round then lets its broker's fetch be fully polled.
func (c *Consumer[K, V]) rotateFor(k tp, p *partition[K, V]) bool {
	if r := c.rot; r != nil {
		if r.full != k {
			return false // one at a time
		}
		if r.p != p {
			c.endRotation(k) // of a partition revoked since
			return c.rotateFor(k, p)
		}
		if n := c.view.fetched(r.broker); r.resumed == 0 || n <= r.resumed || n == r.resumed+1 && !r.qFed() {
			// Under way: the fetch that lists q again is not read yet
			// (one read after the resume may have been sent before it).
			return true
		}
		c.failRotation("the full partition is still the last of its broker's fetch")
		return false
	}
	if c.rotTried[k] {
		return false
	}
	if c.view.held(k.topic, k.partition) == 0 || !c.view.brokerHolds(k.topic, k.partition) {
		return false // its broker's next fetch may be under way: a pause could drop what it brings
	}
	q, b := c.rotationPeer(k)
	if q == nil {
		c.log.Debug("a full partition is the last of its broker's fetch, and no other of that broker can go after it",
			"topic", k.topic, "partition", k.partition)
		return false
	}
	q.setRotate(true)
	p.setRotating(true)
	c.rotTried[k] = true
	c.rot = &rotation[K, V]{full: k, p: p, q: q, broker: b, at: c.view.fetched(b), qStat: c.view.stat(q.topic, q.part),
		until: time.Now().Add(rotationLimit), fed0: p.feeds()}
	return true
}

// rotationLimit bounds a rotation: a few fetches take far less.
const rotationLimit = 10 * time.Second

// failRotation ends the rotation under way without its pause: q flows
// again, and the full partition holds back the poll loop as before.
func (c *Consumer[K, V]) failRotation(why string) {
	r := c.rot
	c.log.Debug("a rotation failed: "+why, "topic", r.full.topic, "partition", r.full.partition)
	c.endRotation(r.full)
}

// rotationPeer returns a partition of the broker of the full partition at
// k that the poll goroutine may pause for a rotation without a drop: it
// flows, under its bound, and none of its records is in the client. One
// that had records in the broker's last fetch comes first: it is likelier
// to have more, and only a partition with records goes after the full one
// in a fetch.
func (c *Consumer[K, V]) rotationPeer(k tp) (*partition[K, V], int32) {
	b := c.view.stat(k.topic, k.partition).broker.Load()
	n := c.view.fetched(b)
	m := c.view.parts.Load()
	if m == nil {
		return nil, 0
	}
	var other *partition[K, V]
	for key, s := range *m {
		if key == k || s.broker.Load() != b || s.held.Load() != 0 {
			continue
		}
		if _, full := c.wantPause[key]; full {
			continue
		}
		c.mu.Lock()
		q := c.parts[key]
		c.mu.Unlock()
		if q == nil || !q.rotatable() {
			continue
		}
		if s.fed.Load() == n {
			return q, b
		}
		other = q
	}
	return other, b
}

// rotationWait returns the context of a poll round: while the partition
// of a rotation is paused, its poll waits only until the next fetch
// response from the rotation's broker is read, so that the round can
// resume the partition: it may be the only one with records left, and no
// fetch would bring any until it is resumed. done ends the wait.
func (c *Consumer[K, V]) rotationWait(ctx context.Context) (_ context.Context, done func()) {
	c.advanceRotation()
	r := c.rot
	if r == nil || r.resumed != 0 {
		return ctx, func() {}
	}
	wctx, cancel := context.WithDeadline(ctx, r.until)
	c.view.watch.Store(&fetchWatch{broker: r.broker, stop: cancel})
	if c.view.fetched(r.broker) > r.at {
		cancel() // read before the watch was set
	}
	return wctx, func() {
		c.view.watch.Store(nil)
		cancel()
	}
}

// advanceRotation resumes the paused partition of the rotation under way
// once a fetch sent without it was read: its broker has taken it out of
// the fetch session.
func (c *Consumer[K, V]) advanceRotation() {
	r := c.rot
	if r == nil {
		return
	}
	switch {
	case time.Now().After(r.until):
		c.failRotation("it took too long")
		return
	case c.view.stat(r.full.topic, r.full.partition).broker.Load() != r.broker || r.qStat.broker.Load() != r.broker:
		c.failRotation("a partition moved to another broker")
		return
	}
	if n := c.view.fetched(r.broker); r.resumed == 0 && n > r.at {
		r.q.setRotate(false)
		r.resumed = n
	}
}

// rotationFed fails the rotation under way when its full partition was
// given records in four poll rounds since it began and is still not
// paused: the rest of the fetch it was last of, the fetch without q, one
// more sent before q's resume and the fetch that lists q again are all it
// needs (with several brokers, the last record the client holds may be
// another broker's, and no round pauses it). It runs after a round's
// polls, which alone feed a partition: a fetch read but not yet polled
// does not count.
func (c *Consumer[K, V]) rotationFed() {
	if r := c.rot; r != nil && r.p.feeds()-r.fed0 >= 4 {
		c.failRotation("it was given four fetches without a pause")
	}
}

// unwant drops the full partition at k from those the poll goroutine
// pauses: it is paused, or no longer wants it. Its rotation ends, and it
// may have another when it fills again.
func (c *Consumer[K, V]) unwant(k tp) {
	delete(c.wantPause, k)
	delete(c.rotTried, k)
	c.endRotation(k)
}

// endRotation ends the rotation of the full partition at k, if any.
func (c *Consumer[K, V]) endRotation(k tp) {
	r := c.rot
	if r == nil || r.full != k {
		return
	}
	if r.resumed == 0 {
		r.q.setRotate(false)
	}
	r.p.setRotating(false)
	c.rot = nil
}
