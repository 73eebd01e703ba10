package consumer_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// order is the value type of the test topics.
type order struct {
	ID      int    `json:"id"`
	Payload string `json:"payload"`
}

func orderJSON(id int) []byte {
	b, _ := json.Marshal(order{ID: id, Payload: fmt.Sprintf("payload-%06d-abcdefghijklmnopqrstuvwxyz", id)})
	return b
}

// manualProducer returns a client that writes records to the partition they name.
func manualProducer(t testing.TB, c *kafkatest.Cluster) *kgo.Client {
	return c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
}

// readAll reads every record of topic from the start up to its end offsets
// at the time of the call.
func readAll(t testing.TB, c *kafkatest.Cluster, topic string) []*kgo.Record {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := c.Client(t)
	ends := endOffsets(t, adm, topic)
	want := int64(0)
	for _, e := range ends {
		want += e
	}
	if want == 0 {
		return nil
	}
	cl := c.Client(t, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	var out []*kgo.Record
	for int64(len(out)) < want {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("readAll %s: got %d of %d records: %v", topic, len(out), want, ctx.Err())
		}
		out = append(out, fs.Records()...)
	}
	return out
}

// endOffsets returns the high watermark of each partition of topic.
func endOffsets(t testing.TB, cl *kgo.Client, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req := kadmEnds(ctx, cl, topic)
	if req.err != nil {
		t.Fatalf("end offsets of %s: %v", topic, req.err)
	}
	return req.ends
}

// committed returns the group's committed offsets for topic.
func committed(t testing.TB, c *kafkatest.Cluster, group, topic string) map[int32]int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := kadmCommitted(ctx, c.Client(t), group, topic)
	if errors.Is(err, kerr.GroupIDNotFound) {
		// The group has not committed yet (kfake answers so for a
		// group it does not know): no offsets, not a failure.
		return map[int32]int64{}
	}
	if err != nil {
		t.Fatalf("committed offsets: %v", err)
	}
	return out
}

// ledger records every handler call, safely from many goroutines.
type ledger struct {
	mu    sync.Mutex
	calls map[string][]int64 // "topic/partition" -> offsets in call order (successful handler returns only)
	byKey map[string][]int64 // "topic/partition/key" -> the same
	seen  map[string]int     // "topic/partition/offset" -> successful handler returns
}

func newLedger() *ledger {
	return &ledger{calls: map[string][]int64{}, byKey: map[string][]int64{}, seen: map[string]int{}}
}

func (l *ledger) done(r *kgo.Record) {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := r.Topic + "/" + strconv.Itoa(int(r.Partition))
	l.calls[k] = append(l.calls[k], r.Offset)
	kk := k + "/" + string(r.Key)
	l.byKey[kk] = append(l.byKey[kk], r.Offset)
	l.seen[k+"/"+strconv.FormatInt(r.Offset, 10)]++
}

func (l *ledger) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, v := range l.seen {
		n += v
	}
	return n
}

func (l *ledger) times(r *kgo.Record) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.seen[r.Topic+"/"+strconv.Itoa(int(r.Partition))+"/"+strconv.FormatInt(r.Offset, 10)]
}

// assertOrdered checks that each partition's successful handler calls came
// in increasing offset order.
func (l *ledger) assertOrdered(t testing.TB) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, offs := range l.calls {
		if !sort.SliceIsSorted(offs, func(i, j int) bool { return offs[i] < offs[j] }) {
			t.Errorf("partition %s processed out of order", k)
		}
	}
}

// assertKeyOrdered checks that each key's successful handler calls came in
// increasing offset order within its partition, and that some partition's
// calls did not (keyed concurrency ran records at once).
func (l *ledger) assertKeyOrdered(t testing.TB, interleavedToo bool) {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, offs := range l.byKey {
		if !sort.SliceIsSorted(offs, func(i, j int) bool { return offs[i] < offs[j] }) {
			t.Errorf("key %s processed out of order", k)
		}
	}
	if !interleavedToo {
		return
	}
	interleaved := false
	for _, offs := range l.calls {
		if !sort.SliceIsSorted(offs, func(i, j int) bool { return offs[i] < offs[j] }) {
			interleaved = true
		}
	}
	if !interleaved {
		t.Errorf("every partition was processed in offset order: the records did not run at once")
	}
}

// runConsumer starts c.Run in the background and returns a stop function
// that cancels it and returns Run's error.
func runConsumer[K, V any](t testing.TB, c *consumer.Consumer[K, V]) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() {
			cancel()
			select {
			case err = <-errc:
			case <-time.After(60 * time.Second):
				err = fmt.Errorf("Run did not return within 60s of cancel")
			}
		})
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// dlqIndex maps "partition/offset" of the source to the dead letters found.
func dlqIndex(t testing.TB, recs []*kgo.Record) map[string][]*kgo.Record {
	t.Helper()
	idx := map[string][]*kgo.Record{}
	for _, r := range recs {
		f := parse(t, r)
		k := fmt.Sprintf("%s/%d/%d", f.Topic, f.Partition, f.Offset)
		idx[k] = append(idx[k], r)
	}
	return idx
}

func srcKey(r *kgo.Record) string { return fmt.Sprintf("%s/%d/%d", r.Topic, r.Partition, r.Offset) }
