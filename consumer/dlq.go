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
	cl      *kgo.Client
	adm     *kadm.Client
	tmpl    deadletter.Template
	group   string
	create  bool
	retry   backoff.Policy
	timeout time.Duration
	log     *slog.Logger
	stats   *stats

	mu      sync.Mutex
	ready   map[string]bool  // dead-letter topics known to exist
	srcSize map[string]int32 // partition counts of source topics
}

func newDLQWriter[K, V any](cl *kgo.Client, cfg *Config[K, V], log *slog.Logger, st *stats) *dlqWriter {
	return &dlqWriter{
		cl: cl, adm: kadm.NewClient(cl), tmpl: cfg.DeadLetter.Topic, group: cfg.Group,
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
	out      *kgo.Record
	stage    deadletter.Stage
	class    failure.Class
	reason   deadletter.Reason
	cause    error // the failure that dead-lettered src
	attempts int   // tries of src before it was dead-lettered
	tries    int   // write attempts so far

	done chan struct{} // closed when the write is acknowledged or failed
	err  error         // the write's error, read after done
}

// newLetter builds the dead letter of rec: rec's key, value and headers byte
// for byte, then the failure headers of f.
func (w *dlqWriter) newLetter(rec *kgo.Record, f *deadletter.Failure, cause error) *letter {
	f.ClientID = w.clientID()
	hs := make([]deadletter.Header, 0, len(rec.Headers)+16)
	for _, h := range rec.Headers {
		hs = append(hs, deadletter.Header{Key: h.Key, Value: h.Value})
	}
	hs = f.AppendHeaders(hs)
	out := &kgo.Record{
		Topic:   w.tmpl.Name(rec.Topic, w.group),
		Key:     rec.Key,
		Value:   rec.Value,
		Headers: make([]kgo.RecordHeader, len(hs)),
	}
	for i, h := range hs {
		out.Headers[i] = kgo.RecordHeader{Key: h.Key, Value: h.Value}
	}
	return &letter{src: rec, out: out, stage: f.Stage, reason: f.Reason, cause: cause}
}

// send starts writing l without waiting: l.done is closed when the broker
// acknowledged the write or it failed (l.err).
func (w *dlqWriter) send(ctx context.Context, l *letter) {
	l.done = make(chan struct{})
	l.tries++
	sources, err := w.sourcePartitions(ctx, l.src.Topic)
	if err == nil {
		err = w.ensureTopic(ctx, l.out.Topic, sources)
	}
	if err != nil {
		l.err = err
		close(l.done)
		return
	}
	actx, cancel := context.WithTimeout(ctx, w.timeout)
	l.out.Context = context.WithValue(actx, partitionKey{}, dlqTarget{l.src.Partition, sources})
	w.cl.Produce(actx, l.out, func(_ *kgo.Record, err error) {
		cancel()
		l.err = err
		close(l.done)
	})
}

// resend writes a letter whose write failed, retrying under the write
// policy until it is acknowledged or ctx ends.
func (w *dlqWriter) resend(ctx context.Context, l *letter) error {
	for {
		if l.err == nil {
			return nil
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		w.stats.dlqWriteErrors.Add(1)
		wait, _ := backoff.Next(w.retry, l.tries, 0, l.err)
		w.log.Error("dead-letter write failed; the partition waits and retries",
			append(recordAttrs(l.src), "dlq_topic", l.out.Topic, "attempt", l.tries, "wait", wait, "err", l.err)...)
		if err := backoff.Sleep(ctx, wait); err != nil {
			return err
		}
		w.send(ctx, l)
		select {
		case <-l.done:
		case <-ctx.Done():
			<-l.done // the record's context is ctx: franz-go fails it promptly
		}
	}
}

func (w *dlqWriter) clientID() string {
	id, _ := w.cl.OptValue(kgo.ClientID).(string)
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
