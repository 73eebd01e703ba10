package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// tail reads the run's source, dead-letter and output topics from the
// start, read_committed, while the run goes on: what Kafka holds, for the
// oracle. Control records are kept (and not stored) so that the reader
// knows when it reached the end of a transactional partition.
type tail struct {
	cl     *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}

	mu   sync.Mutex
	recs map[string]map[recKey]*kgo.Record
	next map[string]map[int32]int64 // the offset after the last one read, control records included
	ids  map[string][16]byte        // the topic id the reads of each topic came from
}

func newTail(brokers []string, topics ...string) (*tail, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(topics...),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.KeepControlRecords(), kgo.MetadataMaxAge(time.Second), kgo.MetadataMinAge(100*time.Millisecond),
		kgo.FetchMaxWait(200*time.Millisecond))
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	t := &tail{cl: cl, cancel: cancel, done: make(chan struct{}),
		recs: map[string]map[recKey]*kgo.Record{}, next: map[string]map[int32]int64{}, ids: map[string][16]byte{}}
	go t.loop(ctx)
	return t, nil
}

func (t *tail) loop(ctx context.Context) {
	defer close(t.done)
	for ctx.Err() == nil {
		fs := t.cl.PollFetches(ctx)
		fs.EachError(func(topic string, _ int32, err error) {
			// A topic deleted and created again: the client keeps its
			// old id and fails it until it is purged and added back.
			if errors.Is(err, kerr.UnknownTopicID) {
				t.afresh(topic)
			}
		})
		t.mu.Lock()
		fs.EachTopic(func(ft kgo.FetchTopic) {
			if ft.TopicID != ([16]byte{}) {
				t.ids[ft.Topic] = ft.TopicID
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			if t.next[r.Topic] == nil {
				t.next[r.Topic] = map[int32]int64{}
				t.recs[r.Topic] = map[recKey]*kgo.Record{}
			}
			// A deleted and re-created topic starts again at 0:
			// what was read before it stays (the letters seen), and
			// the position is the newest one.
			t.next[r.Topic][r.Partition] = r.Offset + 1
			if r.Attrs.IsControl() {
				return
			}
			k := recKey{r.Partition, r.Offset, r.Timestamp.UnixMilli(), string(r.Value)}
			if t.recs[r.Topic][k] == nil {
				t.recs[r.Topic][k] = r
			}
		})
		t.mu.Unlock()
	}
}

// afresh makes the reader read topic again from the start of its new
// topic id: what was read of the old one stays (the letters seen), and its
// positions are forgotten, so that caughtUp waits for the new topic.
func (t *tail) afresh(topic string) {
	t.mu.Lock()
	delete(t.next, topic)
	delete(t.ids, topic)
	t.mu.Unlock()
	t.cl.PurgeTopicsFromClient(topic)
	t.cl.AddConsumeTopics(topic)
}

func (t *tail) close() {
	t.cancel()
	<-t.done
	t.cl.Close()
}

// caughtUp reports whether the reader reached the last stable offsets of
// its topics, in the topic each name stands for now: a topic deleted and
// created again is read afresh first (the client would otherwise learn it
// only from fetch errors, after their backoff, and its old positions would
// pass for the new topic's).
func (t *tail) caughtUp(ctx context.Context, adm *kadm.Client, topics ...string) bool {
	tds, err := adm.ListTopics(ctx, topics...)
	if err != nil {
		return false
	}
	for _, td := range tds {
		t.mu.Lock()
		held, ok := t.ids[td.Topic]
		t.mu.Unlock()
		if td.Err == nil && td.ID != (kadm.TopicID{}) && ok && held != [16]byte(td.ID) {
			t.afresh(td.Topic)
			return false
		}
	}
	lso, err := adm.ListCommittedOffsets(ctx, topics...)
	if err != nil {
		return false
	}
	ok := true
	t.mu.Lock()
	defer t.mu.Unlock()
	lso.Each(func(o kadm.ListedOffset) {
		if o.Err != nil {
			if !errors.Is(o.Err, kerr.UnknownTopicOrPartition) { // a topic not created yet is empty
				ok = false
			}
			return
		}
		if o.Offset > 0 && t.next[o.Topic][o.Partition] < o.Offset {
			ok = false
		}
	})
	return ok
}

// recKey tells records apart across a topic's deletion and re-creation.
type recKey struct {
	p     int32
	o     int64
	ts    int64
	value string
}

// snapshot is a copy of what was read so far.
type snapshot map[string][]*kgo.Record

func (t *tail) snapshot() snapshot {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := snapshot{}
	for topic, recs := range t.recs {
		for _, r := range recs {
			s[topic] = append(s[topic], r)
		}
	}
	return s
}

func (s snapshot) all(topic string) []*kgo.Record { return s[topic] }

func (s snapshot) allOf(topics []string) []*kgo.Record {
	var out []*kgo.Record
	for _, t := range topics {
		out = append(out, s[t]...)
	}
	return out
}
