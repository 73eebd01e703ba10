package integration_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// A stalled broker is not the end of the topic: Scan says what it did not
// read instead of reporting success.
func TestIntegrationScanStallIsNotTheEnd(t *testing.T) {
	c := kafkatest.New(t)
	if c.Fake() == nil {
		t.Skip("needs kfake to stall fetches")
	}
	cl := c.Client(t, deadletter.ScanOpts()...)
	topic := c.Topic(t, "dlq", 1)
	for i := range 5 {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Value: fmt.Appendf(nil, "v%d", i), Headers: kafkatest.Headers(antidoteLetter(nil, "src", 0, int64(i)))})
	}
	release := make(chan struct{})
	defer close(release)
	c.Fake().ControlKey(int16(kmsg.Fetch), func(kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		c.Fake().SleepControl(func() { <-release })
		return nil, nil, false
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	read := 0
	err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: topic, IdleTimeout: time.Second}, func(*kgo.Record) error {
		read++
		return nil
	})
	if !errors.Is(err, deadletter.ErrStalled) {
		t.Fatalf("Scan of a stalled broker: %v after %d records, want ErrStalled", err, read)
	}
	if !strings.Contains(err.Error(), "0 at 0 of 5") {
		t.Errorf("error does not say where the scan stopped: %v", err)
	}
}

// Transaction markers at the end of a partition are read as offsets, so a
// scan of a transactional writer's topic ends without waiting; aborted
// letters are not read.
func TestIntegrationScanTransactionMarkers(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "dlq", 1)
	txn := c.Client(t, kgo.TransactionalID(kafkatest.UniqueName("txn")), kgo.DefaultProduceTopic(topic))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i, commit := range []bool{true, false, true} {
		if err := txn.BeginTransaction(); err != nil {
			t.Fatal(err)
		}
		for j := range 3 {
			r := &kgo.Record{Value: fmt.Appendf(nil, "txn%d-%d", i, j), Headers: kafkatest.Headers(antidoteLetter(nil, "src", 0, int64(j)))}
			if err := txn.ProduceSync(ctx, r).FirstErr(); err != nil {
				t.Fatal(err)
			}
		}
		if err := txn.EndTransaction(ctx, kgo.TransactionEndTry(commit)); err != nil {
			t.Fatal(err)
		}
	}
	// The coordinator writes the markers after EndTransaction returns: a
	// scan started before reads up to the last stable offset, short of the
	// last transaction.
	waitStable(t, kadm.NewClient(c.Client(t)), topic)
	cl := c.Client(t, deadletter.ScanOpts()...)
	var got []string
	start := time.Now()
	err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: topic, IdleTimeout: 20 * time.Second}, func(r *kgo.Record) error {
		got = append(got, string(r.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: scan of 3 transactions ended after %v", c.Kind(), time.Since(start))
	want := "txn0-0 txn0-1 txn0-2 txn2-0 txn2-1 txn2-2"
	if strings.Join(got, " ") != want {
		t.Errorf("read %v, want %s", got, want)
	}
}

// From and To bound what Scan reads per partition.
func TestIntegrationScanRange(t *testing.T) {
	c := kafkatest.New(t)
	cl := c.Client(t, append(deadletter.ScanOpts(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	topic := c.Topic(t, "dlq", 2)
	for i := range 10 {
		kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Partition: int32(i % 2), Value: fmt.Appendf(nil, "%d", i)})
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var got []string
	err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{
		Topic: topic, Partitions: []int32{1}, From: map[int32]int64{1: 1}, To: map[int32]int64{1: 4},
	}, func(r *kgo.Record) error {
		got = append(got, fmt.Sprintf("%d@%d=%s", r.Partition, r.Offset, r.Value))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if s := strings.Join(got, " "); s != "1@1=3 1@2=5 1@3=7" {
		t.Errorf("read %s", s)
	}
	var due int64
	if err := deadletter.Scan(ctx, cl, deadletter.ScanConfig{Topic: topic, Started: func(n int64) { due = n }}, func(*kgo.Record) error { return nil }); err != nil || due != 10 {
		t.Errorf("Started: %d due, %v", due, err)
	}
	// Follow: a record produced after the start is read.
	fctx, fcancel := context.WithTimeout(ctx, 20*time.Second)
	defer fcancel()
	n := 0
	err = deadletter.Scan(fctx, cl, deadletter.ScanConfig{Topic: topic, Follow: true}, func(r *kgo.Record) error {
		n++
		if n == 10 {
			kafkatest.Produce(t, cl, &kgo.Record{Topic: topic, Partition: 0, Value: []byte("late")})
		}
		if string(r.Value) == "late" {
			return deadletter.ErrStop
		}
		return nil
	})
	if err != nil || n != 11 {
		t.Errorf("follow: %d records, %v", n, err)
	}
}
