package run

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

// kafkaSink forwards each record to a topic: its key, headers and
// timestamp as they are, and its value as fetched (raw) or as decoded (the
// output of the stages and the format: decrypted, decompressed, Avro as
// JSON). The write is acknowledged (acks=all, idempotent) before the
// record counts as processed, so that a forwarded record is never lost; a
// crash between the write and the commit forwards it again (at least once).
//
// With exactly-once, the record is written in the consumer's transaction
// that commits its source offset (consumer.ExactlyOnce, Record.Produce): a
// crash aborts both, and a reader with read_committed sees each forwarded
// record once.
type kafkaSink struct {
	cl      *kgo.Client // nil with exactly-once: the consumer's transactions write
	topic   string
	decoded bool
	eos     string // the transactional id, with exactly-once
}

// newKafkaSink makes the sink's producer on the cluster of opts.
func newKafkaSink(c *runKafkaSink, opts []kgo.Opt) (*kafkaSink, error) {
	if e := c.ExactlyOnce; e != nil {
		return &kafkaSink{topic: c.Topic, decoded: c.Value == "decoded", eos: e.TransactionalID}, nil
	}
	opts = append(append([]kgo.Opt(nil), opts...),
		kgo.ProducerLinger(0), // each write waits for its acknowledgement: lingering only delays it
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, err
	}
	return &kafkaSink{cl: cl, topic: c.Topic, decoded: c.Value == "decoded"}, nil
}

func (s *kafkaSink) describe() string {
	what := "as fetched"
	if s.decoded {
		what = "decoded"
	}
	if s.eos != "" {
		return fmt.Sprintf("kafka topic %s (value %s; key, headers and timestamp as fetched; exactly once, in the transactions of id %s)", s.topic, what, s.eos)
	}
	return fmt.Sprintf("kafka topic %s (value %s; key, headers and timestamp as fetched)", s.topic, what)
}

func (s *kafkaSink) close() {
	if s.cl != nil {
		s.cl.Close()
	}
}

func (s *kafkaSink) handle(ctx context.Context, r *consumer.Record[[]byte, []byte]) error {
	raw := r.Raw
	rec := &kgo.Record{Topic: s.topic, Key: raw.Key, Value: raw.Value, Headers: raw.Headers, Timestamp: raw.Timestamp}
	if s.decoded {
		rec.Key, rec.Value = r.Key, r.Value // the key decoded with key.format, if set
	}
	if s.eos != "" {
		return r.Produce(rec) // written with the commit of its offset
	}
	err := s.cl.ProduceSync(ctx, rec).FirstErr()
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return classifyProduce(s.topic, err)
}

// classifyProduce marks a write error: the broker's retriable errors are
// transient, those that no retry can fix permanent.
func classifyProduce(topic string, err error) error {
	err = fmt.Errorf("forward to %s: %w", topic, err)
	switch {
	case errors.Is(err, kerr.MessageTooLarge), errors.Is(err, kerr.RecordListTooLarge),
		errors.Is(err, kerr.InvalidRecord), errors.Is(err, kerr.CorruptMessage):
		return failure.Permanent(err)
	case errors.Is(err, kerr.TopicAuthorizationFailed), errors.Is(err, kerr.InvalidTopicException),
		errors.Is(err, kerr.PolicyViolation), errors.Is(err, kerr.UnknownTopicOrPartition):
		// Not the record's fault: a permanent error would dead-letter
		// every record. Waiting shows the partition as stuck until an
		// operator fixes the ACL or creates the topic.
		return failure.Transient(err)
	case kerr.IsRetriable(err):
		return failure.Transient(err)
	}
	return err
}
