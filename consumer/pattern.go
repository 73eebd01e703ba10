package consumer

import (
	"context"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
)

// defaultTopicRefresh is how often the topics of a TopicPattern are listed.
const defaultTopicRefresh = 30 * time.Second

// topicWatch subscribes the consumer to the topics that match its
// TopicPattern, as they are created. Its goroutine owns the set of matched
// topics; others read the published copy (sources).
type topicWatch struct {
	re      *regexp.Regexp
	every   time.Duration
	adm     *kadm.Client
	own     func(source string) []string // the consumer's own topics of a source
	fixed   []string                     // own topics not tied to a source (attempts)
	add     func(topics []string)        // subscribe
	matched atomic.Pointer[[]string]     // sorted; written by the watch goroutine only
}

// compileTopicPattern anchors p to the whole topic name.
func compileTopicPattern(p string) (*regexp.Regexp, error) {
	return regexp.Compile("^(?:" + p + ")$")
}

// sources are the topics subscribed so far, sorted.
func (w *topicWatch) sources() []string {
	if m := w.matched.Load(); m != nil {
		return *m
	}
	return nil
}

// run lists the cluster's topics now and then every w.every until ctx ends.
func (w *topicWatch) run(ctx context.Context, log *slog.Logger) {
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		lctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		names, err := w.list(lctx)
		cancel()
		if err != nil {
			if ctx.Err() == nil {
				log.Warn("listing topics for the topic pattern failed; trying again", "pattern", w.re.String(), "err", err, "in", w.every)
			}
		} else if added := w.update(names); len(added) > 0 {
			log.Info("topics matching the topic pattern subscribed", "pattern", w.re.String(), "topics", added)
			w.add(added)
		}
		t.Reset(w.every)
	}
}

func (w *topicWatch) list(ctx context.Context) ([]string, error) {
	td, err := w.adm.ListTopics(ctx)
	if err != nil {
		return nil, err
	}
	return td.Names(), nil
}

// update takes the cluster's topic names and returns the matching topics
// not subscribed before. A topic is never matched when it is internal
// (__consumer_offsets), or one of the consumer's own: the dead-letter topic
// of a listed topic, or the durable-attempts topic, so that a pattern such
// as "orders.*" does not read orders.dlq back.
func (w *topicWatch) update(names []string) []string {
	own := map[string]bool{}
	for _, t := range w.fixed {
		own[t] = true
	}
	for _, n := range names {
		for _, t := range w.own(n) {
			if t != n {
				own[t] = true
			}
		}
	}
	have := w.sources()
	var added []string
	for _, n := range names {
		if strings.HasPrefix(n, "__") || own[n] || !w.re.MatchString(n) {
			continue
		}
		if _, found := slices.BinarySearch(have, n); !found {
			added = append(added, n)
		}
	}
	if len(added) == 0 {
		return nil
	}
	next := append(slices.Clone(have), added...)
	slices.Sort(next)
	w.matched.Store(&next)
	return added
}

// sourceTopics are the topics the consumer reads records of: Topics, or
// those TopicPattern matched so far.
func (c *Consumer[K, V]) sourceTopics() []string {
	if c.pattern != nil {
		return c.pattern.sources()
	}
	return c.cfg.Topics
}
