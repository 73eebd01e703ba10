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
	parts sync.Map // tp -> *fetchStat
}

type fetchStat struct {
	held   atomic.Int64 // records in the client
	broker atomic.Int32 // the broker it was last fetched from
}

var (
	_ kgo.HookFetchBatchRead        = (*fetchView)(nil)
	_ kgo.HookFetchRecordBuffered   = (*fetchView)(nil)
	_ kgo.HookFetchRecordUnbuffered = (*fetchView)(nil)
)

func (v *fetchView) stat(topic string, part int32) *fetchStat {
	k := tp{topic, part}
	if s, ok := v.parts.Load(k); ok {
		return s.(*fetchStat)
	}
	s, _ := v.parts.LoadOrStore(k, new(fetchStat))
	return s.(*fetchStat)
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
	holds := false
	v.parts.Range(func(_, s any) bool {
		st := s.(*fetchStat)
		if st.broker.Load() == b && st.held.Load() > 0 {
			holds = true
			return false
		}
		return true
	})
	return holds
}

// pollRound polls what the client has fetched and hands it to the
// partitions (each). A partition that holds its bound keeps taking its part
// of the fetches under way; the round pauses its fetching where that drops
// nothing: when some partitions want a pause, it polls all but the last
// record the client holds (first waiting for a fetch, of which it takes
// one record), pauses those whose records were all taken while their
// broker's fetch is not fully polled, then polls the rest. It runs on the
// poll goroutine, which alone pauses for this reason. It returns the last
// poll's fetches.
func (c *Consumer[K, V]) pollRound(ctx context.Context, each func(kgo.Fetches)) kgo.Fetches {
	c.round++
	if len(c.wantPause) == 0 {
		fs := c.cl.PollFetches(ctx)
		each(fs)
		return fs
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
		for k, p := range c.wantPause {
			switch {
			case !p.wantsStop(): // under its bound, revoked, or paused for another reason
				delete(c.wantPause, k)
			case c.view.held(k.topic, k.partition) == 0 && c.view.brokerHolds(k.topic, k.partition):
				p.pauseFull()
				delete(c.wantPause, k)
			}
		}
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
