package consumer

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// fetchErrWindow is how often one partition's fetch errors are logged: a
// fetch that fails at once is polled again at once, and logging each would
// write hundreds of thousands of lines a minute.
const fetchErrWindow = 10 * time.Second

// forgetEvery is how often a topic whose id changed is forgotten again
// while its fetches still fail with UNKNOWN_TOPIC_ID.
const forgetEvery = 5 * time.Second

// fetchErrs is what the poll loop remembers of fetch errors. Only the poll
// goroutine uses it.
//
// A topic deleted and created again under the same name gets a new topic id;
// franz-go keeps the id it holds and fails every fetch of the topic with
// UNKNOWN_TOPIC_ID until the topic is purged from the client and consumed
// again. The dead-letter writer does that for a topic it created itself
// (dlqWriter.recreated), but the client may hold an id the writer never saw:
// a retry tier deleted before this process first checked it, then created
// again by the writer, or by another member. So the poll loop does it too,
// for any consumed topic whose fetches fail so, at most every forgetEvery.
type fetchErrs struct {
	log    *slog.Logger
	cl     *kgo.Client
	logged map[tp]time.Time // when the partition's error was last logged
	quiet  map[tp]int       // errors not logged since
	forgot map[string]time.Time
	stale  []string // topics to forget after this poll
	// writer takes a topic that the consumer also writes to (a retry
	// tier), and reports true: the dead-letter writer decides whether to
	// forget it (dlqWriter.staleFetches). Nil without retry tiers.
	writer func(topic string) bool
	// afresh is told of each topic the client is made to consume afresh.
	afresh func(topic string)
}

func newFetchErrs(log *slog.Logger, cl *kgo.Client) *fetchErrs {
	return &fetchErrs{log: log, cl: cl, logged: map[tp]time.Time{}, quiet: map[tp]int{}, forgot: map[string]time.Time{}}
}

// seen takes one fetch error of a poll.
func (f *fetchErrs) seen(topic string, part int32, err error) {
	if errors.Is(err, kerr.UnknownTopicID) {
		if last, ok := f.forgot[topic]; !ok || time.Since(last) >= forgetEvery {
			f.forgot[topic] = time.Now()
			f.stale = append(f.stale, topic)
		}
	}
	k := tp{topic, part}
	if last, ok := f.logged[k]; ok && time.Since(last) < fetchErrWindow {
		f.quiet[k]++
		return
	}
	f.logged[k] = time.Now()
	attrs := []any{"topic", topic, "partition", part, "err", err}
	if n := f.quiet[k]; n > 0 {
		attrs = append(attrs, "not_logged_since", n)
		delete(f.quiet, k)
	}
	f.log.Warn("fetch error", attrs...)
}

// forget makes the client forget and consume again each topic whose id
// changed. Called by the poll goroutine after a poll, with the rebalance
// it blocked allowed again: purging a group's topic may rebalance.
func (f *fetchErrs) forget() {
	if len(f.stale) == 0 {
		return
	}
	for _, t := range f.stale {
		if f.writer != nil && f.writer(t) {
			continue
		}
		f.log.Warn("topic was deleted and created again: the client consumes it afresh", "topic", t)
		if f.afresh != nil {
			f.afresh(t)
		}
		f.cl.PurgeTopicsFromConsuming(t) // the consuming only: see watchTopicIDs
		f.cl.AddConsumeTopics(t)
	}
	f.stale = f.stale[:0]
}

// heldIDs are the topic ids of the records the client fetched: the ids it
// holds. The poll goroutine writes them; watchTopicIDs reads them.
type heldIDs struct {
	mu  sync.Mutex
	ids map[string][16]byte
}

// saw records the ids of a poll's topics.
func (h *heldIDs) saw(fs kgo.Fetches) {
	fs.EachTopic(func(ft kgo.FetchTopic) {
		if ft.TopicID == ([16]byte{}) {
			return // a broker before Kafka 3.1
		}
		h.mu.Lock()
		if h.ids == nil {
			h.ids = map[string][16]byte{}
		}
		h.ids[ft.Topic] = ft.TopicID
		h.mu.Unlock()
	})
}

// changed reports whether the client holds an id of topic other than id,
// and forgets it if so: the client is to consume the topic afresh.
func (h *heldIDs) changed(topic string, id [16]byte) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	held, ok := h.ids[topic]
	if !ok || held == id {
		return false
	}
	delete(h.ids, topic)
	return true
}

// watchTopicIDs makes the client consume afresh a source topic deleted and
// created again, within about forgetEvery of its new id showing in the
// metadata: it compares the metadata's id with the one of the records the
// client fetched. The fetch errors that tell the poll loop (fetchErrs)
// come only after franz-go's backoff, 13 s after the new record here on a
// quiet machine and more than a minute on a busy one. It checks the source
// topics only: the retry tiers and dead-letter topics are the writer's
// (dlqWriter.recreated). From the same metadata it keeps each source
// topic's partition count for Stats.Topics.
func (c *Consumer[K, V]) watchTopicIDs(ctx context.Context) {
	adm := kadm.NewClient(c.cl)
	t := time.NewTicker(forgetEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		topics := c.sourceTopics()
		if len(topics) == 0 {
			continue
		}
		mctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		md, err := adm.Metadata(mctx, topics...)
		cancel()
		if err != nil {
			continue // checked again at the next tick
		}
		parts := make([]Topic, 0, len(md.Topics))
		for _, td := range md.Topics.Sorted() {
			if td.Err == nil {
				parts = append(parts, Topic{Topic: td.Topic, Partitions: len(td.Partitions), CheckedAt: time.Now()})
			}
		}
		c.topicParts.Store(&parts)
		for _, td := range md.Topics {
			if td.Err != nil || td.ID == (kadm.TopicID{}) {
				continue // gone for now: its id is compared once it is back
			}
			if c.held.changed(td.Topic, td.ID) {
				c.consumeAfresh(td.Topic)
				c.log.Warn("topic was deleted and created again: the client consumes it afresh", "topic", td.Topic)
				// For consuming only: forgetting the producing
				// too would start its sequence numbers again, and in
				// the exactly-once mode a topic consumed may also be
				// an output, written to the new topic already in the
				// open transaction (outputs to it that fail for the
				// old id are the transaction's to handle, see
				// txn.forgetRecreated).
				c.cl.PurgeTopicsFromConsuming(td.Topic)
				c.cl.AddConsumeTopics(td.Topic)
			}
		}
	}
}
