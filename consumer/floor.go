package consumer

import (
	"log/slog"
	"sync"

	"github.com/twmb/franz-go/pkg/kgo"
)

// floors keep the client from handing the workers a record they were
// handed already: the client's position in a partition goes back only
// where the consumer asks for it (an aborted transaction) or a new
// assignment starts from the committed offset. franz-go can move it back
// by itself: a load of a partition's start offset that failed (its topic
// deleted and created again, say) is tried again a second later even when
// a newer assignment loaded the partition meanwhile, and sets the position
// to the start again. Records handed again would be handled twice; in the
// exactly-once mode their outputs would be committed twice. So the poll
// loop drops a fetched record below the partition's floor.
//
// A floor is of one topic id: a topic deleted and created again starts
// afresh (its offsets begin again), as does a partition revoked or lost, a
// topic the consumer consumes afresh, and a log truncated below the
// client's position (franz-go's ErrDataLoss, or a high watermark below the
// floor). A partition assigned starts
// afresh too, at the group's committed offset in the exactly-once mode
// (at). Without topic ids (a broker before Kafka 3.1) there is no floor.
//
// The poll goroutine takes records through it; the rebalance callbacks,
// the transaction's end and the topic watch reset it: its lock serialises
// them.
type floors struct {
	mu  sync.Mutex
	m   map[tp]floor
	log *slog.Logger
}

type floor struct {
	id [16]byte // the topic id of the records taken
	// taken is the offset after the last record handed to the worker.
	taken int64
	// committed is the offset the last transaction of this member
	// committed (-1: none since the partition was assigned): an aborted
	// transaction sends the client back to it, and no further.
	committed int64
	dropped   int64 // records dropped since one was taken: logged once
}

func newFloors(log *slog.Logger) *floors {
	return &floors{m: make(map[tp]floor), log: log}
}

// take returns the records of a fetched partition at or above its floor,
// and raises the floor past the last of them. Records come in offset order;
// hwm is the partition's high watermark in the same fetch. A floor above it
// is forgotten: the log no longer holds what it was made of (a committed
// offset past the log's end, a log truncated), and the records the client
// goes back to are new.
func (f *floors) take(topic string, id [16]byte, part int32, hwm int64, recs []*kgo.Record) []*kgo.Record {
	if id == ([16]byte{}) || len(recs) == 0 {
		return recs
	}
	k := tp{topic, part}
	f.mu.Lock()
	defer f.mu.Unlock()
	fl, ok := f.m[k]
	if !ok || fl.id != id || (hwm >= 0 && fl.taken > hwm) {
		fl = floor{id: id, committed: -1}
	}
	i := 0
	for i < len(recs) && recs[i].Offset < fl.taken {
		i++
	}
	if i > 0 {
		if fl.dropped == 0 {
			f.log.Warn("the client went back to records this member was handed already: they are dropped, not handled again",
				"topic", topic, "partition", part, "from", recs[0].Offset, "taken_up_to", fl.taken)
		}
		fl.dropped += int64(i)
		recs = recs[i:]
	}
	if len(recs) > 0 {
		fl.taken = recs[len(recs)-1].Offset + 1
		fl.dropped = 0
	}
	f.m[k] = fl
	return recs
}

// at sets the floor of a partition just assigned at the group's committed
// offset (the exactly-once mode: what lies below it is done, its outputs
// committed). A failed load of the partition's start offset from an earlier
// assignment, tried again after this one loaded the committed offset, then
// finds a floor even before the first record is taken.
func (f *floors) at(topic string, id [16]byte, part int32, offset int64) {
	if id == ([16]byte{}) || offset <= 0 {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[tp{topic, part}] = floor{id: id, taken: offset, committed: offset}
}

// dataLoss forgets the floor of a partition whose log was truncated below
// the client's position (an unclean leader election): franz-go goes back
// to where the log now ends, and the records written there since are new.
func (f *floors) dataLoss(topic string, part int32) {
	f.forget(map[string][]int32{topic: {part}})
}

// committed records the offsets a transaction committed.
func (f *floors) committed(marks map[tp]kgo.EpochOffset) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, eo := range marks {
		if fl, ok := f.m[k]; ok {
			fl.committed = eo.Offset
			f.m[k] = fl
		}
	}
}

// aborted lowers each floor to what this member committed: the client
// goes back to the committed offsets, and the records after them are
// handled again. A partition this member has not committed has no floor.
func (f *floors) aborted() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k, fl := range f.m {
		if fl.committed < 0 {
			delete(f.m, k)
			continue
		}
		fl.taken, fl.dropped = fl.committed, 0
		f.m[k] = fl
	}
}

// forget drops the floors of partitions assigned, revoked or lost.
func (f *floors) forget(m map[string][]int32) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for t, ps := range m {
		for _, p := range ps {
			delete(f.m, tp{t, p})
		}
	}
}

// forgetTopic drops the floors of a topic consumed afresh.
func (f *floors) forgetTopic(topic string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for k := range f.m {
		if k.topic == topic {
			delete(f.m, k)
		}
	}
}
