package avro_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/internal/srtest"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// readingSchema is version v of com.acme.Reading: version 0 has id, outage
// and seq; version v adds the fields x1..xv, each with a default.
func readingSchema(v int) string {
	var extra strings.Builder
	for i := 1; i <= v; i++ {
		fmt.Fprintf(&extra, `,{"name":"x%d","type":"string","default":""}`, i)
	}
	return `{"type":"record","name":"Reading","namespace":"com.acme","fields":[
		{"name":"id","type":"string"},{"name":"outage","type":"int"},{"name":"seq","type":"long"}` + extra.String() + `]}`
}

// Reading is version 0 of com.acme.Reading, the reader schema.
type Reading struct {
	ID     string `avro:"id"`
	Outage int    `avro:"outage"`
	Seq    int64  `avro:"seq"`
}

// got is one processed record.
type got struct {
	r      Reading
	offset int64
	at     time.Time
}

// TestIntegrationForeignProducerOutage: Python's confluent-kafka with its
// AvroSerializer writes to a real broker and a real registry (Apicurio,
// started by scripts/registry.sh). Ten times, it registers a new schema
// version, the registry process is killed (SIGKILL), and records of the new
// version are written (the serializer has the id cached) while it is down:
// the consumer, with its default policy and the default breaker, cannot
// look the id up. The registry is restarted; every record is decoded, once,
// in order, none dead-lettered. For each outage the test logs the time from
// the registry answering again to the first stuck record decoded and to
// every paused partition flowing, and it counts the registry requests made
// during the outage, which must stay within the breaker's probe schedule.
func TestIntegrationForeignProducerOutage(t *testing.T) {
	sreg := srtest.New(t)
	sreg.RequireKill(t)
	py := srtest.Python(t)
	cluster := kafkatest.New(t)
	const parts, perPart, outages = 4, 5, 10
	topic := cluster.Topic(t, "avro-foreign", parts)
	prod := sreg.NewProducer(t, py, cluster.Brokers(), "")

	hc, calls := srtest.CountingClient()
	reg := newRegistry(t, sreg, avro.HTTPClient(hc)) // the default breaker
	d := must(avro.NewDeserializer[Reading](reg, readingSchema(0)))

	var mu sync.Mutex
	byPart := make(map[int32][]got)
	c, err := consumer.New(consumer.Config[[]byte, Reading]{
		Brokers: cluster.Brokers(),
		Topics:  []string{topic},
		Group:   kafkatest.UniqueName("avro-foreign"),
		Value:   d,
		Handler: func(_ context.Context, r *consumer.Record[[]byte, Reading]) error {
			mu.Lock()
			byPart[r.Raw.Partition] = append(byPart[r.Raw.Partition], got{r.Value, r.Raw.Offset, time.Now()})
			mu.Unlock()
			return nil
		},
		// The default policy: no short backoff.
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Logger:     quietLogger(),
		Dependencies: map[string]func() string{
			"schema-registry": func() string { return reg.Breaker().State().String() },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reg.Breaker().OnStateChange(func(_, to avro.State) {
		if to == avro.Closed {
			c.WakeRetries()
		}
	})
	stop := runConsumer(t, c)
	defer stop()

	produce := func(outage int) {
		for p := range int32(parts) {
			recs := make([]any, perPart)
			for i := range recs {
				recs[i] = map[string]any{"id": fmt.Sprintf("r-%d-%d-%d", outage, p, i), "outage": outage, "seq": i}
			}
			prod.Produce(t, srtest.Batch{Format: "avro", Schema: readingSchema(outage), Topic: topic, Partition: p, Records: recs})
		}
	}
	processed := func() int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, g := range byPart {
			n += len(g)
		}
		return n
	}
	// firstOf returns, per partition, when the first record of outage was
	// processed, and the last.
	firstOf := func(outage int) (first, all, last time.Time) {
		mu.Lock()
		defer mu.Unlock()
		for _, gs := range byPart {
			for _, g := range gs {
				if g.r.Outage != outage {
					continue
				}
				if first.IsZero() || g.at.Before(first) {
					first = g.at
				}
				if g.at.After(all) {
					all = g.at
				}
				break
			}
			for _, g := range gs {
				if g.r.Outage == outage && g.at.After(last) {
					last = g.at
				}
			}
		}
		return first, all, last
	}

	produce(0)
	kafkatest.WaitFor(t, 2*time.Minute, "records before the first outage", func() bool { return processed() == parts*perPart })

	var worstFirst, worstAll time.Duration
	for o := 1; o <= outages; o++ {
		// A new version, registered by the producer while the registry is up;
		// the consumer has never seen its id.
		ids := prod.Produce(t, srtest.Batch{Format: "avro", Schema: readingSchema(o), Topic: topic,
			Records: []any{map[string]any{"id": "probe", "outage": o, "seq": -1}}, RegisterOnly: true})

		sreg.Kill(t)
		killed, before, cpu0 := time.Now(), calls.Load(), cpuTime(t)
		produce(o) // the serializer has the id cached: no registry call
		kafkatest.WaitFor(t, 2*time.Minute, "the breaker to open", func() bool { return reg.Breaker().State() != avro.Closed })
		time.Sleep(2 * time.Second)

		type up struct {
			at    time.Time
			calls int64
		}
		answered := make(chan up, 1)
		pollDone := make(chan struct{})
		go func() {
			defer close(pollDone)
			for deadline := time.Now().Add(3 * time.Minute); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
				if sreg.Answers() {
					answered <- up{time.Now(), calls.Load()}
					return
				}
			}
		}()
		sreg.Revive(t)
		<-pollDone
		var u up
		select {
		case u = <-answered:
		default:
			t.Fatalf("outage %d: the registry does not answer after its restart", o)
		}
		cpu := cpuTime(t) - cpu0
		kafkatest.WaitFor(t, 3*time.Minute, fmt.Sprintf("the records of outage %d", o), func() bool { return processed() == (o+1)*parts*perPart })
		first, all, last := firstOf(o)
		down := u.at.Sub(killed)
		requests := u.calls - before
		bound := probeBound(down) + 3 /* failures that open the breaker */ + parts + 2
		t.Logf("outage %2d (schema id %d): down %v, %d registry requests (bound %d), CPU %v; after the registry answered: first stuck record decoded in %v, all %d paused partitions flowing in %v, all records in %v",
			o, ids[0], down.Round(time.Millisecond), requests, bound, cpu.Round(time.Millisecond),
			first.Sub(u.at).Round(time.Millisecond), parts, all.Sub(u.at).Round(time.Millisecond), last.Sub(u.at).Round(time.Millisecond))
		if requests > bound {
			t.Errorf("outage %d: %d registry requests in %v down, want <= %d (one per probe interval)", o, requests, down, bound)
		}
		worstFirst, worstAll = max(worstFirst, first.Sub(u.at)), max(worstAll, all.Sub(u.at))
	}
	st := c.Stats()
	t.Logf("%d outages: worst time to the first stuck record decoded %v, to all partitions flowing %v; retries %d, breaker %s",
		outages, worstFirst.Round(time.Millisecond), worstAll.Round(time.Millisecond), st.Retried, reg.Breaker().State())
	if st.DeadLettered != 0 || st.Skipped != 0 {
		t.Errorf("dead-lettered %d, skipped %d, want 0", st.DeadLettered, st.Skipped)
	}
	time.Sleep(200 * time.Millisecond) // any duplicate would show up
	mu.Lock()
	defer mu.Unlock()
	for p := range int32(parts) {
		gs := byPart[p]
		if len(gs) != (outages+1)*perPart {
			t.Errorf("partition %d: %d records processed, want %d", p, len(gs), (outages+1)*perPart)
		}
		for i, g := range gs {
			o, seq := i/perPart, int64(i%perPart)
			want := Reading{ID: fmt.Sprintf("r-%d-%d-%d", o, p, seq), Outage: o, Seq: seq}
			if g.offset != int64(i) || g.r != want {
				t.Errorf("partition %d record %d: offset %d %+v, want offset %d %+v", p, i, g.offset, g.r, i, want)
				break
			}
		}
	}
}

// probeBound is the most probes the default breaker makes in d: its probe
// waits are 500ms doubling to 2s with equal jitter, so at least half of
// each.
func probeBound(d time.Duration) int64 {
	var n int64
	for w, sum := 250*time.Millisecond, time.Duration(0); sum <= d; w = min(2*w, time.Second) {
		n++
		sum += w
	}
	return n
}
