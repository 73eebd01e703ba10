package consumer

import (
	"context"
	"sync"
	"sync/atomic"

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
	mu    sync.Mutex                        // serialises adding a partition
	parts atomic.Pointer[map[tp]*fetchStat] // copied on write
	last  atomic.Pointer[fetchStat]         // the last looked up: a fetch's records come by partition
}

type fetchStat struct {
	topic  string
	part   int32
	held   atomic.Int64 // records in the client
	broker atomic.Int32 // the broker it was last fetched from
}

var (
	_ kgo.HookFetchBatchRead        = (*fetchView)(nil)
	_ kgo.HookFetchRecordBuffered   = (*fetchView)(nil)
	_ kgo.HookFetchRecordUnbuffered = (*fetchView)(nil)
)

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
	v.mu.Lock()
	defer v.mu.Unlock()
	old := v.parts.Load()
	if old != nil {
		if s := (*old)[tp{topic, part}]; s != nil {
			return s
		}
	}
	m := make(map[tp]*fetchStat, 1)
	if old != nil {
		m = make(map[tp]*fetchStat, len(*old)+1)
		for k, s := range *old {
			m[k] = s
		}
	}
	s := &fetchStat{topic: topic, part: part}
	m[tp{topic, part}] = s
	v.parts.Store(&m)
	return s
}

// OnFetchBatchRead notes the partition's broker; it runs before the
// batch's records are buffered.
func (v *fetchView) OnFetchBatchRead(meta kgo.BrokerMetadata, topic string, part int32, _ kgo.FetchBatchMetrics) {
	v.stat(topic, part).broker.Store(meta.NodeID)
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
// paused without dropping it: the round leaves that record in the client,
// and the partition holds back the poll loop (flow.holdBack), as one given
// two more fetches with no such poll does (several brokers), until it is
// back under half of its bound, or until the member's other flowing
// partitions have no records left (budget.dry). Then the next round first
// pauses it, dropping what the client holds of it (the one record, whose
// batch is fetched again on resume; with several brokers, what its
// broker's fetch brought meanwhile). So a full partition slows the others
// only while they have work, and the member's only partition never drops a
// record. It runs on the poll goroutine, which alone pauses for this
// reason. It returns the last poll's fetches.
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
				p.pauseFull()
				delete(c.wantPause, k)
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
	for k, p := range c.wantPause {
		want, _ := p.wantsStop()
		held := c.view.held(k.topic, k.partition)
		switch {
		case !want: // under its bound, revoked, or paused for another reason
			delete(c.wantPause, k)
		case held == 0 && c.view.brokerHolds(k.topic, k.partition): // drops nothing
			p.pauseFull()
			delete(c.wantPause, k)
		case held == 1 && last:
			p.holdBack()
			hold = true
		}
	}
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
