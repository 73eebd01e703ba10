package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// expectation is what must happen to one produced record.
type expectation struct {
	deadLetter bool
	stage      deadletter.Stage
	class      string
}

// poisonStream produces n JSON orders over 4 partitions with poison pills at
// random offsets: garbage bytes from kcat, truncated and wrong-shape JSON from
// franz-go, and orders whose id makes the test handler fail (permanently, or
// transiently twice). It returns every produced record with what must happen
// to it, keyed by srcKey.
func poisonStream(t *testing.T, c *kafkatest.Cluster, topic string, n int) map[string]expectation {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(n)))
	prod := manualProducer(t, c)
	want := map[string]expectation{}
	const chunks = 10
	garbage := [][]byte{
		{0xde, 0xad, 0xbe, 0xef}, {0x00, 0x00, 0x00, 0x00, 0x01, 0x02}, []byte("not json at all"), {0xff},
	}
	dir := t.TempDir()
	id := 0
	for chunk := 0; chunk < chunks; chunk++ {
		recs := make([]*kgo.Record, 0, n/chunks)
		kinds := make(map[*kgo.Record]expectation, n/chunks)
		for i := 0; i < n/chunks; i++ {
			id++
			r := &kgo.Record{
				Topic: topic, Partition: int32(rng.IntN(4)),
				Key:     []byte("key-" + strconv.Itoa(id%50)),
				Headers: []kgo.RecordHeader{{Key: "seq", Value: []byte(strconv.Itoa(id))}, {Key: "bin", Value: []byte{0, 1, 2}}},
			}
			e := expectation{}
			switch x := rng.IntN(1000); {
			case x < 15: // truncated JSON
				full := orderJSON(id)
				r.Value = full[:len(full)/2]
				e = expectation{true, deadletter.StageDeserializeValue, "permanent"}
			case x < 25: // wrong shape: a string id
				r.Value = []byte(`{"id":"` + strconv.Itoa(id) + `","payload":"x"}`)
				e = expectation{true, deadletter.StageDeserializeValue, "permanent"}
			default:
				r.Value = orderJSON(id)
				switch {
				case id%97 == 0:
					e = expectation{true, deadletter.StageProcess, "permanent"}
				case id%89 == 0: // transient twice, then fine
				}
			}
			recs = append(recs, r)
			kinds[r] = e
		}
		for _, r := range kafkatest.Produce(t, prod, recs...) {
			want[srcKey(r)] = kinds[r]
		}
		// Foreign poison: kcat writes garbage bytes to a random partition.
		for j := 0; j < 2; j++ {
			p := rng.IntN(4)
			file := filepath.Join(dir, fmt.Sprintf("g%d-%d", chunk, j))
			if err := os.WriteFile(file, garbage[(chunk+j)%len(garbage)], 0o600); err != nil {
				t.Fatal(err)
			}
			c.RunKcat(t, nil, "-P", "-t", topic, "-p", strconv.Itoa(p), "-k", "kcat", file)
		}
	}
	// Find the kcat records' offsets: every record not produced by us.
	for _, r := range readAll(t, c, topic) {
		if _, ok := want[srcKey(r)]; !ok {
			if string(r.Key) != "kcat" {
				t.Fatalf("unexpected record %s", srcKey(r))
			}
			want[srcKey(r)] = expectation{true, deadletter.StageDeserializeValue, "permanent"}
		}
	}
	return want
}

// flakyHandler fails ids divisible by 97 permanently and ids divisible by 89
// transiently twice.
func flakyHandler(l *ledger) consumer.Handler[string, order] {
	var mu sync.Mutex
	tries := map[int]int{}
	return func(ctx context.Context, r *consumer.Record[string, order]) error {
		id := r.Value.ID
		if id%97 == 0 {
			return failure.Permanent(fmt.Errorf("order %d rejected", id))
		}
		if id%89 == 0 {
			mu.Lock()
			tries[id]++
			n := tries[id]
			mu.Unlock()
			if n <= 2 {
				return failure.Transient(errors.New("inventory service unavailable"))
			}
		}
		l.done(r.Raw)
		return nil
	}
}

func fastPolicy() consumer.Policy {
	quick := backoff.MaxAttempts(backoff.Fixed(5*time.Millisecond), 4)
	return consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: quick}, Unclassified: consumer.Rule{Retry: quick}}}
}

// TestIntegrationAccounting: every produced (partition, offset) is processed
// exactly once or dead-lettered exactly once with correct failure headers and
// byte-identical key, value and headers; nothing is missing; order holds per
// partition; committed offsets reach the end.
func TestIntegrationAccounting(t *testing.T) {
	c := kafkatest.New(t)
	for _, proto := range []consumer.GroupProtocol{consumer.GroupClassic, consumer.GroupConsumer} {
		t.Run(proto.String(), func(t *testing.T) { testAccounting(t, c, proto, 0) })
	}
	// Keyed concurrency: the same accounting, order per key.
	t.Run("concurrency-8", func(t *testing.T) { testAccounting(t, c, consumer.GroupClassic, 8) })
	t.Run("unordered-8", func(t *testing.T) { testAccounting(t, c, consumer.GroupClassic, -8) })
}

// testAccounting runs with conc records of a partition at once (one at a
// time for 0 or 1), in any order for a negative conc.
func testAccounting(t *testing.T, c *kafkatest.Cluster, proto consumer.GroupProtocol, conc int) {
	unordered := conc < 0
	conc = max(conc, -conc)
	topic := c.Topic(t, "acct", 4)
	c.Topic(t, "unused", 1) // the dead-letter topic is created by the consumer
	n := 10_000
	want := poisonStream(t, c, topic, n)

	group := kafkatest.UniqueName("acct")
	l := newLedger()
	cons, err := consumer.New(consumer.Config[string, order]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group,
		Key: serde.String(), Value: serde.JSON[order](),
		Handler: flakyHandler(l),
		Policy:  fastPolicy(), GroupProtocol: proto, Concurrency: consumer.Concurrency{Max: conc, Unordered: unordered},

		Logger: kafkatest.Logger(t), CommitInterval: 200 * time.Millisecond,
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.ClientID("acct-test")},
	})
	if err != nil {
		t.Fatal(err)
	}
	stop := runConsumer(t, cons)
	wantDLQ := 0
	for _, e := range want {
		if e.deadLetter {
			wantDLQ++
		}
	}
	kafkatest.WaitFor(t, 3*time.Minute, "every record settled", func() bool {
		s := cons.Stats()
		return int(s.Processed)+int(s.DeadLettered) >= len(want)
	})
	ends := endOffsets(t, c.Client(t), topic)
	kafkatest.WaitFor(t, 30*time.Second, "commits at the end offsets", func() bool {
		got := committed(t, c, group, topic)
		for p, e := range ends {
			if got[p] != e {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatalf("Run: %v", err)
	}

	source := map[string]*kgo.Record{}
	for _, r := range readAll(t, c, topic) {
		source[srcKey(r)] = r
	}
	dlqs := dlqIndex(t, readAll(t, c, deadletter.Template("").Name(topic, group)))
	processed := 0
	for k, e := range want {
		r := source[k]
		got := l.times(r)
		dl := dlqs[k]
		switch {
		case e.deadLetter && (got != 0 || len(dl) != 1):
			t.Errorf("%s (%s): processed %d times, %d dead letters; want dead-lettered once", k, r.Value, got, len(dl))
		case !e.deadLetter && (got != 1 || len(dl) != 0):
			t.Errorf("%s: processed %d times, %d dead letters; want processed once", k, got, len(dl))
		case e.deadLetter:
			checkDeadLetter(t, r, dl[0], e, group)
		default:
			processed++
		}
	}
	if len(dlqs) != wantDLQ {
		t.Errorf("dead-letter topic holds letters for %d records, want %d", len(dlqs), wantDLQ)
	}
	switch {
	case unordered:
	case conc > 1:
		l.assertKeyOrdered(t, true)
	default:
		l.assertOrdered(t)
	}
	s := cons.Stats()
	t.Logf("%s, %s protocol, concurrency %d: produced %d, processed %d, dead-lettered %d, retried %d", c.Kind(), proto, conc, len(want), processed, wantDLQ, s.Retried)
	if int(s.DeadLettered) != wantDLQ || int(s.Processed) != len(want)-wantDLQ {
		t.Errorf("stats: processed %d dead-lettered %d; want %d and %d", s.Processed, s.DeadLettered, len(want)-wantDLQ, wantDLQ)
	}
}

// checkDeadLetter asserts a dead letter is its source byte for byte plus
// correct failure headers.
func checkDeadLetter(t *testing.T, src, dl *kgo.Record, e expectation, group string) {
	t.Helper()
	if !bytes.Equal(src.Key, dl.Key) || !bytes.Equal(src.Value, dl.Value) {
		t.Errorf("%s: dead letter key/value differ from source", srcKey(src))
	}
	if len(dl.Headers) < len(src.Headers) {
		t.Fatalf("%s: dead letter lost headers", srcKey(src))
	}
	for i, h := range src.Headers {
		if dl.Headers[i].Key != h.Key || !bytes.Equal(dl.Headers[i].Value, h.Value) {
			t.Errorf("%s: original header %d differs", srcKey(src), i)
		}
	}
	size := 0
	for _, h := range dl.Headers[len(src.Headers):] {
		size += len(h.Key) + len(h.Value)
	}
	f := parse(t, dl)
	if f.Stage != e.stage || f.Class != e.class || f.Group != group || f.OriginalHeaders != len(src.Headers) ||
		f.Partition != src.Partition || f.Offset != src.Offset || f.Topic != src.Topic || f.ClientID != "acct-test" ||
		f.Attempts < 1 || f.ErrorType == "" || f.Message == "" || !f.Timestamp.Equal(src.Timestamp.Truncate(time.Millisecond)) {
		t.Errorf("%s: failure headers %+v; want stage %s class %s", srcKey(src), f, e.stage, e.class)
	}
	if dl.Partition != src.Partition {
		t.Errorf("%s: dead letter in partition %d, want the source partition", srcKey(src), dl.Partition)
	}
	if size > 4096 {
		t.Errorf("%s: failure headers take %d bytes", srcKey(src), size)
	}
}
