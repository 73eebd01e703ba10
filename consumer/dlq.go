package consumer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// dlqWriter writes dead letters. Writes are asynchronous: a partition keeps
// processing while its dead letters are in flight, and marks offsets for
// commit only up to the first letter not yet acknowledged.
type dlqWriter struct {
	cl       *kgo.Client
	adm      *kadm.Client
	tmpl     deadletter.Template
	group    string
	clientID string
	create   bool
	retry    backoff.Policy
	timeout  time.Duration
	log      *slog.Logger
	stats    *stats

	mu      sync.Mutex
	ready   map[string]bool  // dead-letter topics known to exist
	srcSize map[string]int32 // partition counts of source topics
	names   sync.Map         // source topic -> dead-letter topic
}

// topicFor returns the dead-letter topic of a source topic.
func (w *dlqWriter) topicFor(source string) string {
	if n, ok := w.names.Load(source); ok {
		return n.(string)
	}
	n := w.tmpl.Name(source, w.group)
	w.names.Store(source, n)
	return n
}

func newDLQWriter[K, V any](cl *kgo.Client, cfg *Config[K, V], log *slog.Logger, st *stats) *dlqWriter {
	return &dlqWriter{
		cl: cl, adm: kadm.NewClient(cl), tmpl: cfg.DeadLetter.Topic, group: cfg.Group, clientID: clientID(cl),
		create: cfg.DeadLetter.CreateTopic, retry: cfg.DeadLetter.Retry, timeout: cfg.DeadLetter.WriteTimeout,
		log: log, stats: st, ready: make(map[string]bool), srcSize: make(map[string]int32),
	}
}

// partitionKey carries a dlqTarget to the partitioner.
type partitionKey struct{}

// dlqTarget is the source partition of a dead letter and the partition
// count of its source topic.
type dlqTarget struct {
	partition int32
	sources   int32
}

// letter is one dead letter on its way to the dead-letter topic.
type letter struct {
	src      *kgo.Record
	tmpl     kgo.Record // the dead letter; each send produces a copy
	stage    deadletter.Stage
	class    failure.Class
	reason   deadletter.Reason
	cause    error // the failure that dead-lettered src
	attempts int   // tries of src before it was dead-lettered
	tries    int   // write attempts so far
	lastWait time.Duration
	skipped  bool // settled as skipped by an operator instead

	cur *write // the latest write attempt
}

// write is one attempt to write a letter.
type write struct {
	done chan struct{} // closed when acknowledged or failed
	err  error         // read after done
}

// ok reports whether the latest write was acknowledged; it must be called
// after done was closed.
func (l *letter) ok() bool { return l.cur.err == nil }

// newLetter builds the dead letter of rec: rec's key, value and headers byte
// for byte, then the failure headers of f.
func (w *dlqWriter) newLetter(rec *kgo.Record, f *deadletter.Failure, cause error) *letter {
	f.ClientID = w.clientID
	fh := f.AppendHeaders(make([]deadletter.Header, 0, 16))
	hs := make([]kgo.RecordHeader, 0, len(rec.Headers)+len(fh))
	hs = append(hs, rec.Headers...)
	for _, h := range fh {
		hs = append(hs, kgo.RecordHeader(h))
	}
	return &letter{
		src: rec, stage: f.Stage, reason: f.Reason, cause: cause,
		tmpl: kgo.Record{Topic: w.topicFor(rec.Topic), Key: rec.Key, Value: rec.Value, Headers: hs},
	}
}

// send starts writing l without waiting: l.done is closed when the broker
// acknowledged the write or it failed (l.err).
//
// The write does not end with the partition's context: a letter in flight
// at a revoke or a shutdown gets WriteTimeout to be acknowledged, so that
// it is committed rather than written again after the restart. Each send
// produces a fresh record: an abandoned one may still be in franz-go's
// hands.
func (w *dlqWriter) send(ctx context.Context, l *letter) {
	wr := &write{done: make(chan struct{})}
	l.cur = wr
	l.tries++
	sources, err := w.sourcePartitions(ctx, l.src.Topic)
	if err == nil {
		err = w.ensureTopic(ctx, l.tmpl.Topic, sources)
	}
	if err != nil {
		wr.err = err
		close(wr.done)
		return
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), w.timeout)
	out := l.tmpl
	out.Context = context.WithValue(actx, partitionKey{}, dlqTarget{l.src.Partition, sources})
	w.cl.Produce(actx, &out, func(_ *kgo.Record, err error) {
		cancel()
		wr.err = err
		close(wr.done)
	})
}

// resend writes a letter whose write failed, retrying under the write
// policy until it is acknowledged or ctx ends. A policy that gives up keeps
// waiting its last wait (at least a second) between writes: a dead letter is
// never dropped. When ctx ends, a write still in flight is abandoned.
func (w *dlqWriter) resend(ctx context.Context, l *letter) error {
	for {
		if l.ok() {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.stats.dlqWriteErrors.Add(1)
		wait, ok := backoff.Next(w.retry, l.tries, 0, l.cur.err)
		if !ok {
			wait = max(l.lastWait, time.Second)
		}
		l.lastWait = wait
		w.log.Error("dead-letter write failed; the partition waits and retries",
			append(recordAttrs(l.src), "dlq_topic", l.tmpl.Topic, "attempt", l.tries, "wait", wait, "err", l.cur.err)...)
		if err := backoff.Sleep(ctx, wait); err != nil {
			return err
		}
		w.send(ctx, l)
		select {
		case <-l.cur.done:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// clientID is the client id the client was configured with.
func clientID(cl *kgo.Client) string {
	id, _ := cl.OptValue(kgo.ClientID).(string)
	return id
}

// sourcePartitions returns the partition count of a source topic (cached).
func (w *dlqWriter) sourcePartitions(ctx context.Context, source string) (int32, error) {
	w.mu.Lock()
	n, ok := w.srcSize[source]
	w.mu.Unlock()
	if ok {
		return n, nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	details, err := w.adm.ListTopics(ctx, source)
	if err == nil {
		err = details.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("source topic %s: metadata: %w", source, err)
	}
	n = int32(len(details[source].Partitions))
	w.mu.Lock()
	w.srcSize[source] = n
	w.mu.Unlock()
	return n, nil
}

// ensureTopic creates a missing dead-letter topic when configured to, with
// the source topic's partition count.
func (w *dlqWriter) ensureTopic(ctx context.Context, topic string, partitions int32) error {
	if !w.create {
		return nil
	}
	w.mu.Lock()
	ok := w.ready[topic]
	w.mu.Unlock()
	if ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, w.timeout)
	defer cancel()
	details, err := w.adm.ListTopics(ctx, topic)
	if err != nil {
		return fmt.Errorf("dead-letter topic %s: metadata: %w", topic, err)
	}
	if d, ok := details[topic]; !ok || errors.Is(d.Err, kerr.UnknownTopicOrPartition) {
		resp, err := w.adm.CreateTopic(ctx, partitions, -1, nil, topic)
		if err == nil {
			err = resp.Err
		}
		if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
			return fmt.Errorf("dead-letter topic %s: create: %w", topic, err)
		}
		w.log.Info("created dead-letter topic", "dlq_topic", topic, "partitions", partitions)
	} else if d.Err != nil {
		return fmt.Errorf("dead-letter topic %s: %w", topic, d.Err)
	}
	w.mu.Lock()
	w.ready[topic] = true
	w.mu.Unlock()
	return nil
}

// dlqPartitioner sends a dead letter to its source partition when the
// dead-letter topic has at least as many partitions as the source topic, and
// otherwise partitions by key (murmur2, as the Java client does; records
// without a key go to the source partition modulo the partition count).
type dlqPartitioner struct{ byKey kgo.Partitioner }

func newDLQPartitioner() kgo.Partitioner {
	return dlqPartitioner{byKey: kgo.StickyKeyPartitioner(nil)}
}

func (d dlqPartitioner) ForTopic(t string) kgo.TopicPartitioner {
	return dlqTopicPartitioner{byKey: d.byKey.ForTopic(t)}
}

type dlqTopicPartitioner struct{ byKey kgo.TopicPartitioner }

func (p dlqTopicPartitioner) RequiresConsistency(*kgo.Record) bool { return true }

func (p dlqTopicPartitioner) Partition(r *kgo.Record, n int) int {
	if r.Context != nil {
		if t, ok := r.Context.Value(partitionKey{}).(dlqTarget); ok {
			if n >= int(t.sources) && int(t.partition) < n {
				return int(t.partition)
			}
			if r.Key == nil {
				return int(t.partition) % n
			}
		}
	}
	return p.byKey.Partition(r, n)
}
