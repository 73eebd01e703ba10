package integration_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// TestIntegrationRedrivePartition: a redrive puts each record back in its
// original partition when the target has it (by default), by key when
// it does not or when asked for murmur2.
func TestIntegrationRedrivePartition(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t, append(deadletter.ScanOpts(), kgo.FetchMaxWait(200*time.Millisecond), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	rcl := c.Client(t, append(deadletter.ScanOpts(), kgo.FetchMaxWait(200*time.Millisecond))...)
	src, dlq := c.Topic(t, "src", 3), c.Topic(t, "dlq", 1)
	byKey := kgo.StickyKeyPartitioner(nil).ForTopic(src)
	// Keys that murmur2 puts outside partition 2, as a client that hashes
	// with CRC32 may have put them in 2.
	var keys []string
	for i := 0; len(keys) < 4; i++ {
		k := fmt.Sprint("key-", i)
		if byKey.Partition(&kgo.Record{Key: []byte(k)}, 3) != 2 {
			keys = append(keys, k)
		}
	}
	var rs []*kgo.Record
	for i, k := range keys {
		p := int32(2)
		if i == 3 {
			p = 7 // a partition the topic no longer has
		}
		rs = append(rs, &kgo.Record{Topic: dlq, Key: []byte(k), Value: []byte(k), Headers: kafkatest.Headers(antidoteLetter(nil, src, p, int64(i)))})
	}
	kafkatest.Produce(t, cl, rs...)

	ctx := context.Background()
	res, err := deadletter.Redrive(ctx, rcl, deadletter.RedriveConfig{Topic: dlq, IdleTimeout: 5 * time.Second})
	if err != nil || res.Redriven != 4 {
		t.Fatalf("redrive: %+v, %v", res, err)
	}
	got := readAll(t, rcl, src)
	if len(got) != 4 {
		t.Fatalf("%d records in the source topic, want 4", len(got))
	}
	for _, r := range got {
		want := int32(2)
		if string(r.Key) == keys[3] {
			want = int32(byKey.Partition(r, 3))
		}
		if r.Partition != want {
			t.Errorf("record %s redriven to partition %d, want %d", r.Key, r.Partition, want)
		}
	}

	// By murmur2, as asked: every record where its key hashes to.
	res, err = deadletter.Redrive(ctx, rcl, deadletter.RedriveConfig{Topic: dlq, Group: "by-key-" + dlq, Partitioning: deadletter.PartitionMurmur2, IdleTimeout: 5 * time.Second})
	if err != nil || res.Redriven != 4 {
		t.Fatalf("redrive by murmur2: %+v, %v", res, err)
	}
	n := 0
	for _, r := range readAll(t, rcl, src) {
		if r.Partition == int32(byKey.Partition(r, 3)) {
			n++
		}
	}
	if n != 5 { // the four of the second redrive, and the one of the first without its partition
		t.Errorf("%d records where murmur2 puts their key, want 5", n)
	}

	// A client without ScanOpts' partitioner cannot keep partitions: an
	// error, not records in the wrong partitions.
	plain := c.Client(t)
	if _, err := deadletter.Redrive(ctx, plain, deadletter.RedriveConfig{Topic: dlq, Group: "plain-" + dlq, IdleTimeout: 5 * time.Second}); err == nil {
		t.Error("a redrive with a client that cannot keep partitions did not fail")
	}
	if err := (&deadletter.RedriveConfig{Topic: dlq, Partitioning: "crc"}).Validate(); err == nil {
		t.Error("Validate accepts partitioning crc")
	}
}
