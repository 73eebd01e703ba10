package consumer

import (
	"hash/maphash"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// With a BatchHandler and Concurrency, a partition's records are split by key
// into Concurrency.Max shards, each running batches of its own: all records of
// a key go to one shard, in offset order, so that batches of different shards
// run at once while a key's records are never handled at once. Records without
// a key go to the first shard. What the shards settle goes through the lanes'
// slots to the worker, which gives it to the settler in offset order
// (takeSettled), as with one record per lane.

// shard is one of a partition's batch loops; its queue is filled by the
// worker.
type shard[K, V any] struct {
	p    *partition[K, V]
	wake chan struct{} // signalled when records are queued

	mu sync.Mutex
	q  []*kgo.Record
}

func (s *shard[K, V]) push(rec *kgo.Record) {
	s.mu.Lock()
	s.q = append(s.q, rec)
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *shard[K, V]) take() []*kgo.Record {
	s.mu.Lock()
	defer s.mu.Unlock()
	q := s.q
	s.q = nil
	return q
}

func (s *shard[K, V]) idle() bool {
	select {
	case <-s.wake:
		return true
	case <-s.p.ctx.Done():
		return false
	}
}

func (s *shard[K, V]) linger(due time.Time) bool { return wakeBefore(s.p.ctx, s.wake, due) }

// resumed waits out an operator pause; unlike the worker's, it marks
// nothing for commit (the worker does).
func (s *shard[K, V]) resumed() bool { return s.p.awaitResumed() }

// runShards is the worker loop with a BatchHandler and Concurrency: it takes
// records in offset order, gives each a slot and queues it to its key's
// shard.
func (p *partition[K, V]) runShards() {
	defer close(p.done)
	defer p.drain()
	ln := &p.lanes
	shards := make([]*shard[K, V], ln.cfg.Max)
	for i := range shards {
		s := &shard[K, V]{p: p, wake: make(chan struct{}, 1)}
		shards[i] = s
		ln.wg.Add(1)
		go func() {
			defer ln.wg.Done()
			p.batches(s)
		}()
	}
	defer func() {
		// Before drain: the shards stop with the partition's context,
		// and what they settled goes to the settler.
		ln.wg.Wait()
		p.takeSettled()
	}()
	seed := maphash.MakeSeed()
	for {
		recs := p.take()
		if len(recs) == 0 {
			if !p.idleLanes() {
				return
			}
			continue
		}
		for _, rec := range recs {
			if p.ctx.Err() != nil || !p.waitResumed() || !p.awaitLaneRoom() {
				return
			}
			ln.mu.Lock()
			ln.slots = append(ln.slots, slot{rec: rec})
			ln.bytes += size(rec)
			ln.mu.Unlock()
			i := 0
			if rec.Key != nil {
				i = int(maphash.Bytes(seed, rec.Key) % uint64(len(shards)))
			}
			shards[i].push(rec)
		}
		p.flush()
	}
}
