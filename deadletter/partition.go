package deadletter

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
)

// Partitioning says how [Redrive] chooses the partition of a record it
// re-produces ([RedriveConfig.Partitioning]).
type Partitioning string

// Ways of choosing a redriven record's partition.
const (
	// PartitionOriginal: the letter's original partition, when the target
	// topic has it; else, and for letters that do not name it, as
	// PartitionMurmur2. This keeps the order of a key's records for the
	// consumers of the original topic, whatever partitioner produced them
	// (librdkafka's and Python's hash keys with CRC32, Kafka's Java client
	// and franz-go with murmur2). The default.
	PartitionOriginal Partitioning = "original"
	// PartitionMurmur2: by key, as Kafka's Java client does (murmur2 of
	// the key; records without a key are spread).
	PartitionMurmur2 Partitioning = "murmur2"
)

func (p Partitioning) validate() error {
	switch p {
	case "", PartitionOriginal, PartitionMurmur2:
		return nil
	}
	return fmt.Errorf("partitioning %q: want %s or %s", p, PartitionOriginal, PartitionMurmur2)
}

// keepPartition marks, in a record's context, a record that goes to its
// Partition.
type keepPartition struct{}

// partitioner is the partitioner of [ScanOpts]: a record [Redrive] marks
// goes to its Partition when the topic has it; every other record is
// partitioned by key (murmur2, sticky without a key).
type partitioner struct{ byKey kgo.Partitioner }

func (p partitioner) ForTopic(topic string) kgo.TopicPartitioner {
	return &topicPartitioner{byKey: p.byKey.ForTopic(topic)}
}

type topicPartitioner struct{ byKey kgo.TopicPartitioner }

func keeps(r *kgo.Record) bool {
	return r.Context != nil && r.Context.Value(keepPartition{}) != nil
}

func (p *topicPartitioner) RequiresConsistency(r *kgo.Record) bool {
	return keeps(r) || p.byKey.RequiresConsistency(r)
}

func (p *topicPartitioner) Partition(r *kgo.Record, n int) int {
	if keeps(r) && r.Partition >= 0 && int(r.Partition) < n {
		return int(r.Partition)
	}
	return p.byKey.Partition(r, n)
}

func (p *topicPartitioner) OnNewBatch() {
	if b, ok := p.byKey.(kgo.TopicPartitionerOnNewBatch); ok {
		b.OnNewBatch()
	}
}

// keepIn returns ctx marked so that the partitioner of [ScanOpts] keeps
// the record's Partition.
func keepIn(ctx context.Context) context.Context {
	return context.WithValue(ctx, keepPartition{}, true)
}

// keepsPartitions reports whether cl was made with the partitioner of
// [ScanOpts].
func keepsPartitions(cl *kgo.Client) bool {
	_, ok := cl.OptValue(kgo.RecordPartitioner).(partitioner)
	return ok
}
