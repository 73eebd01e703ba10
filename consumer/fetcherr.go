package consumer

import (
	"errors"
	"log/slog"
	"time"

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
		f.log.Warn("topic was deleted and created again: the client consumes it afresh", "topic", t)
		f.cl.PurgeTopicsFromClient(t)
		f.cl.AddConsumeTopics(t)
	}
	f.stale = f.stale[:0]
}
