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

	"github.com/antidote-kafka/antidote/deadletter"
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
	own     func(topic string) bool  // one of the consumer's own topics
	add     func(topics []string)    // subscribe
	matched atomic.Pointer[[]string] // sorted; written by the watch goroutine only
	empty   bool                     // the last listing matched nothing (logged once)
}

// compileTopicPattern anchors p to the whole topic name. p is compiled
// alone first, so that a text such as "a)|(?:b" cannot escape the anchors.
func compileTopicPattern(p string) (*regexp.Regexp, error) {
	if _, err := regexp.Compile(p); err != nil {
		return nil, err
	}
	return regexp.Compile("^(?:" + p + ")$")
}

// ownTopics reports the consumer's own topics: any name the dead-letter
// template gives (for any source topic, listed or not: the letters of a
// deleted topic stay), and the durable-attempts topic.
func ownTopics(dlq deadletter.Template, group, attempts string) func(string) bool {
	parts := strings.Split(dlq.Name("\x00", group), "\x00")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	re := regexp.MustCompile("^" + strings.Join(parts, ".+") + "$")
	return func(t string) bool { return t == attempts && attempts != "" || re.MatchString(t) }
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
		} else if len(w.sources()) == 0 && !w.empty {
			w.empty = true
			log.Warn("no topic matches the topic pattern yet: nothing is read until one does", "pattern", w.re.String(), "listed_topics", len(names), "again_in", w.every)
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

// update takes the cluster's topic names (internal ones left out by the
// listing) and returns the matching topics not subscribed before. The
// consumer's own topics never match, so that a pattern such as "orders.*"
// does not read orders.dlq back.
func (w *topicWatch) update(names []string) []string {
	have := w.sources()
	var added []string
	for _, n := range names {
		if !w.re.MatchString(n) || w.own(n) {
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
