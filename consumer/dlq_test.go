package consumer

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// TestLetterSizeAndReadyCache: a letter's size is computed once and again
// after it shrinks; a letter that cannot fit its dead-letter topic fails
// with ErrLetterTooLarge before any produce; the topic found ready is
// cached for the next letters, and a topic that is not ready is never
// taken for one that is. A dead letter's record is stamped with its
// failure's last time.
func TestLetterSizeAndReadyCache(t *testing.T) {
	w := &dlqWriter{group: "billing", clientID: "billing-7",
		topics:  map[string]*dlqTopic{"orders.dlq": {name: "orders.dlq", source: "orders", ready: true, maxBytes: 2000}},
		srcSize: map[string]int32{"orders": 4}}
	last := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	newRec := func(value []byte) (*kgo.Record, *deadletter.Failure) {
		rec := &kgo.Record{Topic: "orders", Partition: 2, Offset: 7, Value: value}
		return rec, &deadletter.Failure{Stage: deadletter.StageDeserializeValue, Reason: deadletter.ReasonPermanent,
			Message: string(bytes.Repeat([]byte("m"), 900)), Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, First: last, Last: last}
	}

	// Fits once its message is dropped.
	rec, f := newRec(bytes.Repeat([]byte("v"), 1000))
	l := w.newLetter(rec, f, errors.New("bad"), nil)
	if !l.shrunk || l.size != letterSize(&l.tmpl) || l.size > 2000 {
		t.Fatalf("letter of %d bytes for a limit of 2000: shrunk %v, size %d; want shrunk and its size", letterSize(&l.tmpl), l.shrunk, l.size)
	}

	// Too large even without its message: fails at send, and the ready
	// topic is cached.
	rec, f = newRec(bytes.Repeat([]byte("v"), 3000))
	l = w.newLetter(rec, f, errors.New("bad"), nil)
	w.send(context.Background(), l)
	select {
	case <-l.cur.done:
	default:
		t.Fatal("send of a letter over the limit did not finish at once")
	}
	if !errors.Is(l.cur.err, ErrLetterTooLarge) || l.size != letterSize(&l.tmpl) {
		t.Fatalf("letter over the limit: err %v, size %d (computed %d)", l.cur.err, l.size, letterSize(&l.tmpl))
	}
	if !l.tmpl.Timestamp.Equal(last) || !l.first.Equal(last) {
		t.Fatalf("letter stamped %v, first write %v; want the failure's last time %v", l.tmpl.Timestamp, l.first, last)
	}
	if r := w.lastReady.Load(); r == nil || r.topic != "orders.dlq" || r.source != "orders" || r.limit != 2000 {
		t.Fatalf("ready cache %+v, want orders.dlq of orders with limit 2000", r)
	}
	if limit, _, ok := w.ready("orders", "orders.dlq"); !ok || limit != 2000 {
		t.Fatalf("ready(orders.dlq) = %d, %v; want 2000, true", limit, ok)
	}
	// Another topic, not ready: neither the cache nor its absence lies.
	if _, _, ok := w.ready("payments", "payments.dlq"); ok {
		t.Fatal("a topic the writer does not know is ready")
	}
	if _, _, ok := w.ready("payments", "orders.dlq"); ok {
		t.Fatal("the cached topic is ready for a source whose partition count is not known")
	}
	if w.limit("payments.dlq") != 0 || w.limit("orders.dlq") != 2000 {
		t.Fatalf("limits %d and %d, want 0 and 2000", w.limit("payments.dlq"), w.limit("orders.dlq"))
	}
}

// TestChangedMarksStaleOncePerPurge: a write that fails with
// UNKNOWN_TOPIC_ID marks its topic stale, for the next ensure to make the
// client forget it (while the topic is not ready, so that no write reaches
// the new topic first), unless the client forgot the topic since the write
// was sent: several letters in flight to a topic deleted and created again
// all fail so, and a purge after writes to the new topic had gone through
// reset the client's sequence numbers under the same producer id, so that
// the broker took the next letters for duplicates of those and dropped them
// (acknowledged, never written; kfake chaos seed 6000038).
func TestChangedMarksStaleOncePerPurge(t *testing.T) {
	topic := &dlqTopic{name: "orders.dlq", source: "orders", ready: true, gen: 1}
	w := &dlqWriter{topics: map[string]*dlqTopic{"orders.dlq": topic}, srcSize: map[string]int32{"orders": 4}}
	if _, gen, ok := w.ready("orders", "orders.dlq"); !ok || gen != 1 {
		t.Fatalf("ready: gen %d, %v; want 1, true", gen, ok)
	}
	w.changed("orders", "orders.dlq", kerr.UnknownTopicID, &write{gen: 0, sent: true}) // sent before the last purge
	if topic.stale || topic.ready {
		t.Fatalf("after a failure of a write sent before the purge: stale %v, ready %v; want not stale, checked again", topic.stale, topic.ready)
	}
	if w.lastReady.Load() != nil {
		t.Fatal("the ready cache still holds the topic")
	}
	topic.ready = true
	w.changed("orders", "orders.dlq", kerr.UnknownTopicOrPartition, &write{gen: 1, sent: true})
	if topic.stale {
		t.Fatal("UNKNOWN_TOPIC_OR_PARTITION marked the topic stale")
	}
	w.changed("orders", "orders.dlq", kerr.UnknownTopicID, &write{gen: 1}) // refused before any client took it
	if topic.stale {
		t.Fatal("a write no client took marked the topic stale")
	}
	topic.ready = true
	w.changed("orders", "orders.dlq", kerr.UnknownTopicID, &write{gen: 1, sent: true})
	if !topic.stale || topic.ready {
		t.Fatalf("after a failure of a write sent under the current gen: stale %v, ready %v; want stale, not ready", topic.stale, topic.ready)
	}
}

// TestStaleFetchesAfterWritesKeepsSequences: when the client's fetches of a
// retry tier fail for an old topic id, a tier this writer has written to is
// not forgotten for producing unless its writes fail too, even when the
// writer's check did not learn the topic's id (a listing of a topic being
// created); one never written is, with no write let through before. A purge resets the client's sequence numbers under the same
// producer id, so the broker takes the next write for a duplicate of the
// first and drops it: acknowledged, never written (kfake chaos seed
// 10510168, where a forwarded record was lost so).
func TestStaleFetchesAfterWritesKeepsSequences(t *testing.T) {
	const source, tier = "orders", "orders.retry.1s"
	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, source, tier))
	if err != nil {
		t.Fatal(err)
	}
	defer cluster.Close()
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	topic := &dlqTopic{name: tier, source: source, tier: true, ready: true, maxBytes: 1 << 20, parts: 1} // no id learned
	w := &dlqWriter{create: true, timeout: 5 * time.Second, log: slog.New(slog.DiscardHandler),
		isTier: func(t string) bool { return t == tier }, topics: map[string]*dlqTopic{tier: topic}, srcSize: map[string]int32{source: 1}}
	w.attach(cl)
	write := func(value string) int64 {
		t.Helper()
		if _, _, ok := w.ready(source, tier); !ok {
			t.Fatalf("%s is not ready to write %q", tier, value)
		}
		r, err := cl.ProduceSync(ctx, &kgo.Record{Topic: tier, Partition: 0, Value: []byte(value)}).First()
		if err != nil {
			t.Fatalf("write %q: %v", value, err)
		}
		return r.Offset
	}
	// A tier never written is forgotten at once, and no write goes
	// through before: it would be to the new topic, and the purge would
	// reset its sequence number.
	fresh := &dlqTopic{name: "orders.retry.5s", source: source, tier: true, ready: true, maxBytes: 1 << 20, parts: 1}
	w.topics[fresh.name] = fresh
	w.fetchesStale(source, fresh.name)
	if _, _, ok := w.ready(source, fresh.name); ok || !fresh.stale {
		t.Fatalf("a tier never written, its fetches stale: ready %v, stale %v; want not ready until purged, stale", ok, fresh.stale)
	}
	delete(w.topics, fresh.name)

	if at := write("r0"); at != 0 {
		t.Fatalf("r0 at offset %d, want 0", at)
	}
	w.staleFetches(ctx, source, tier)
	if at := write("r1"); at != 1 {
		t.Fatalf("after the stale fetches, r1 acknowledged at offset %d, want 1 (0: taken for a duplicate of r0 and dropped)", at)
	}
	if topic.stale || topic.id == (kadm.TopicID{}) {
		t.Fatalf("after the check: stale %v, id %v; want not stale, the topic's id", topic.stale, topic.id)
	}
}
