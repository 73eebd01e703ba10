package consumer_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// What the consumer knows of its dead-letter and retry topics is checked
// again when partitions are assigned and after a write error that says the
// topic changed: a cache of cluster state is never kept for life.

// TestIntegrationLetterLimitRaised: a letter too large for its dead-letter
// topic waits (DeadLetterConfig.Unwritable's default); once an operator
// raises the topic's max.message.bytes, it is written, without a restart.
// A smaller letter went to the topic before, so the client had sized its
// batches for the old limit. (Before: the limit was read once, and the
// letter was refused against it for as long as the consumer ran.)
func TestIntegrationLetterLimitRaised(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "limit", 1)
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	limit := "20000"
	if _, err := adm.CreateTopic(ctx, 1, -1, map[string]*string{"max.message.bytes": &limit}, topic+".dlq"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = adm.DeleteTopics(context.Background(), topic+".dlq") })
	big := bytes.Repeat([]byte{0xff}, 30_000)
	kafkatest.Produce(t, manualProducer(t, c),
		&kgo.Record{Topic: topic, Value: []byte{0xfe}}, // a small pill: written under the old limit
		&kgo.Record{Topic: topic, Value: big},
		&kgo.Record{Topic: topic, Value: []byte("after")})
	var mu sync.Mutex
	var processed []string
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		processed = append(processed, r.Value)
		mu.Unlock()
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.DeadLetter.Retry = backoff.Fixed(100 * time.Millisecond)
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "stuck on the letter over the limit", func() bool {
		s := cons.Stats()
		return s.DeadLettered == 1 && len(s.Stuck) == 1 && strings.Contains(s.Stuck[0].LastError, "larger than the dead-letter topic accepts")
	})
	raised := "1048588"
	if _, err := adm.AlterTopicConfigs(ctx, []kadm.AlterConfig{{Name: "max.message.bytes", Value: &raised}}, topic+".dlq"); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 60*time.Second, "the big letter written after the limit was raised", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return cons.Stats().DeadLettered == 2 && len(processed) == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 2 || !bytes.Equal(dl[1].Value, big) {
		t.Fatalf("dead-letter topic holds %d records; want the small pill, then the big one byte for byte", len(dl))
	}
	if processed[0] != "after" {
		t.Fatalf("processed %v; want the record after the pills", processed)
	}
}

// TestIntegrationDeadLetterTopicDeleted: a dead-letter topic deleted while
// the consumer runs is created again by the next letter's write, and Stats
// says so meanwhile. (Before: its readiness was cached for the consumer's
// life, and the letter failed with UNKNOWN_TOPIC_OR_PARTITION forever.)
func TestIntegrationDeadLetterTopicDeleted(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "deleted", 1)
	prod := manualProducer(t, c)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte{0xfe}})
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil },
		func(cfg *consumer.Config[string, string]) {
			cfg.DeadLetter.Retry = backoff.Fixed(200 * time.Millisecond)
		})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "the first pill dead-lettered", func() bool { return cons.Stats().DeadLettered == 1 })
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, topic+".dlq"); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic gone", func() bool {
		td, err := adm.ListTopics(ctx, topic+".dlq")
		return err == nil && (len(td) == 0 || td[topic+".dlq"].Err != nil)
	})
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte{0xfd}}, &kgo.Record{Topic: topic, Value: []byte("after")})
	kafkatest.WaitFor(t, 90*time.Second, "the second pill dead-lettered into the topic made again", func() bool {
		s := cons.Stats()
		return s.DeadLettered == 2 && s.Processed == 1
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if s := cons.Stats(); len(s.DeadLetterTopics) != 1 || !s.DeadLetterTopics[0].Ready {
		t.Fatalf("DeadLetterTopics %+v; want the topic ready again", s.DeadLetterTopics)
	}
	dl := readAll(t, c, topic+".dlq")
	if len(dl) != 1 || !bytes.Equal(dl[0].Value, []byte{0xfd}) {
		t.Fatalf("the topic made again holds %d records; want the second pill", len(dl))
	}
}

// TestIntegrationRetryTopicsSourceGrows: a source topic grown from 1 to 2
// partitions after its tiers exist: the tiers grow with it (the consumer
// created them), and a record of the new partition that fails once goes
// through the tier and is processed. (Before: it was forwarded by key into
// tier partition 0, rejected there as "not a retry-tier record" and
// dead-lettered.)
func TestIntegrationRetryTopicsSourceGrows(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "grow", 1)
	prod := manualProducer(t, c)
	var mu sync.Mutex
	tries := map[string]int{}
	done := map[string]bool{}
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		defer mu.Unlock()
		if tries[r.Value]++; tries[r.Value] == 1 {
			return failure.Transient(errors.New("flaky once"))
		}
		done[r.Value] = true
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.Key = nil
		cfg.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{50 * time.Millisecond}}
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 1), Then: consumer.ActionRetryTopic}
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	})
	stop := runConsumer(t, cons)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Partition: 0, Key: []byte("k0"), Value: []byte("p0")})
	kafkatest.WaitFor(t, 30*time.Second, "p0 through the tier", func() bool { mu.Lock(); defer mu.Unlock(); return done["p0"] })

	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the second partition", func() bool {
		td, err := adm.ListTopics(ctx, topic)
		return err == nil && len(td[topic].Partitions) == 2
	})
	prod = manualProducer(t, c) // metadata with the new partition
	var recs []*kgo.Record
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		recs = append(recs, &kgo.Record{Topic: topic, Partition: 1, Key: []byte(k), Value: []byte("p1-" + k)})
	}
	kafkatest.Produce(t, prod, recs...)
	kafkatest.WaitFor(t, 60*time.Second, "the records of the new partition through the tier", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, r := range recs {
			if !done[string(r.Value)] {
				return false
			}
		}
		return true
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	s := cons.Stats()
	if s.DeadLettered != 0 {
		t.Fatalf("%d records dead-lettered; want none", s.DeadLettered)
	}
	tier := consumer.RetryTopics{}.TierTopic(topic, "", 50*time.Millisecond)
	td, err := adm.ListTopics(ctx, tier)
	if err != nil || len(td[tier].Partitions) != 2 {
		t.Fatalf("tier %s: %v, %d partitions; want 2", tier, err, len(td[tier].Partitions))
	}
}

// TestIntegrationSourceTopicCreatedAgain: a consumed topic deleted and
// created again under the same name gets a new topic id, which franz-go does
// not adopt: every fetch fails with UNKNOWN_TOPIC_ID until the topic is
// purged from the client. The consumer does that, and reads the new topic.
// The same holds for a retry tier that another member created again, whose
// old id only this member's client knew. (Before: the poll loop logged the
// fetch error on every poll, hundreds of thousands of lines a minute, and
// never read the topic again.)
//
// On brokers before Kafka 4.2 it is skipped: they commit offsets by topic
// name, and a commit of the deleted topic's offsets that lands after the new
// topic exists is stored for it (docs/modes.md, "Commits").
func TestIntegrationSourceTopicCreatedAgain(t *testing.T) {
	c := kafkatest.New(t)
	c.RequireCommitsByTopicID(t)
	topic := c.Topic(t, "again", 1)
	prod := manualProducer(t, c)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("before")})
	var mu sync.Mutex
	var processed []string
	cons := stringConsumer(t, c, topic, func(_ context.Context, r *consumer.Record[string, string]) error {
		mu.Lock()
		processed = append(processed, r.Value)
		mu.Unlock()
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	})
	stop := runConsumer(t, cons)
	kafkatest.WaitFor(t, 30*time.Second, "the first record", func() bool { return cons.Stats().Processed == 1 })

	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, topic); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic gone", func() bool {
		td, err := adm.ListTopics(ctx, topic)
		return err == nil && (len(td) == 0 || td[topic].Err != nil)
	})
	if _, err := adm.CreateTopic(ctx, 1, -1, nil, topic); err != nil {
		t.Fatal(err)
	}
	prod = manualProducer(t, c)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("after")})
	made := time.Now()
	kafkatest.WaitFor(t, 60*time.Second, "the record of the topic made again", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(processed) == 2
	})
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if processed[1] != "after" {
		t.Fatalf("processed %q; want before, then after", processed)
	}
	t.Logf("the record of the topic made again processed %v after it was written", time.Since(made).Round(time.Millisecond))
}

// TestIntegrationStatsTopics: Stats.Topics gives each source topic's
// partition count from the metadata, and follows the topic when it grows.
func TestIntegrationStatsTopics(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "counted", 2)
	cons := stringConsumer(t, c, topic, func(context.Context, *consumer.Record[string, string]) error { return nil }, nil)
	if got := cons.Stats().Topics; len(got) != 0 {
		t.Fatalf("Stats.Topics before Run: %+v, want none", got)
	}
	stop := runConsumer(t, cons)
	defer func() {
		if err := stop(); err != nil {
			t.Error(err)
		}
	}()
	partitions := func() int {
		for _, tp := range cons.Stats().Topics {
			if tp.Topic == topic {
				if tp.CheckedAt.IsZero() {
					t.Errorf("%+v: no time of the check", tp)
				}
				return tp.Partitions
			}
		}
		return 0
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic's 2 partitions in Stats", func() bool { return partitions() == 2 })
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if _, err := adm.CreatePartitions(ctx, 1, topic); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic's 3 partitions in Stats", func() bool { return partitions() == 3 })
	if n := len(cons.Stats().Topics); n != 1 {
		t.Errorf("Stats.Topics: %+v, want the source topic only", cons.Stats().Topics)
	}
}

// TestIntegrationExactlyOnceTierDeleted: in the exactly-once mode, a retry
// tier deleted while a record of it is in the open transaction makes the
// broker refuse that partition's offsets; franz-go then aborts the
// transaction, and the consumer goes on from the committed offsets: the
// tier is created again and later records go through it, each output
// written once. (Before: the refusal was taken for a transaction of unknown
// outcome, and the consumer halted; kfake chaos seed 9900095.)
func TestIntegrationExactlyOnceTierDeleted(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "eos-tier-del", 1)
	out := c.Topic(t, "eos-tier-del-out", 1)
	tier := consumer.RetryTopics{}.TierTopic(topic, "", 50*time.Millisecond)
	prod := manualProducer(t, c)
	var mu sync.Mutex
	done := map[string]bool{}
	held := make(chan struct{})    // the tier's record of "a" is being handled
	release := make(chan struct{}) // the tier is gone
	var holdOnce sync.Once
	cons := stringConsumer(t, c, topic, func(ctx context.Context, r *consumer.Record[string, string]) error {
		if r.Value != "c" && r.Tier == 0 {
			return failure.Transient(errors.New("fails until retried from the tier"))
		}
		if r.Value == "a" {
			holdOnce.Do(func() {
				close(held)
				select {
				case <-release:
				case <-ctx.Done():
				}
			})
		}
		if err := r.Produce(&kgo.Record{Topic: out, Value: []byte(r.Value)}); err != nil {
			return err
		}
		mu.Lock()
		done[r.Value] = true
		mu.Unlock()
		return nil
	}, func(cfg *consumer.Config[string, string]) {
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("tier-del-txn")}
		cfg.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{50 * time.Millisecond}}
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(time.Millisecond), 1), Then: consumer.ActionRetryTopic}
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	})
	stop := runConsumer(t, cons)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("a")})
	select {
	case <-held:
	case <-time.After(60 * time.Second):
		t.Fatal("the tier's record of a was not handled")
	}
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, tier); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the tier gone", func() bool {
		td, err := adm.ListTopics(ctx, tier)
		return err == nil && (len(td) == 0 || td[tier].Err != nil)
	})
	ended := func() uint64 { s := cons.Stats(); return s.TransactionsCommitted + s.TransactionsAborted }
	before := ended()
	close(release)
	// The transaction that holds the tier's offset of a ends alone, with
	// nothing else to fail it.
	kafkatest.WaitFor(t, 30*time.Second, "the transaction of a ended", func() bool { return ended() > before })
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("b")}, &kgo.Record{Topic: topic, Value: []byte("c")})
	kafkatest.WaitFor(t, 90*time.Second, "b through the tier made again, and c", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return done["b"] && done["c"]
	})
	if err := stop(); err != nil {
		t.Fatalf("the consumer stopped with %v; want it to go on after the tier was deleted", err)
	}
	n := map[string]int{}
	for _, r := range readCommitted(t, c, out) {
		n[string(r.Value)]++
	}
	if n["b"] != 1 || n["c"] != 1 || n["a"] > 1 {
		t.Fatalf("outputs %v; want b and c once each, a at most once (its tier copy went with the topic)", n)
	}
	t.Logf("outputs %v, transactions aborted %d", n, cons.Stats().TransactionsAborted)
}

// TestIntegrationExactlyOnceDeadLetterTopicDeleted: in the exactly-once
// mode, a dead-letter topic deleted under a running consumer is created
// again, and every letter is in it after its transaction commits. Before,
// the letters of the deleted topic failed in transaction after transaction;
// after the third, each letter's own check made the client forget the topic
// again, once more after another letter of the same transaction had gone
// to the new topic: the broker took the next letter for a duplicate of that
// one and dropped it, acknowledged, and the transaction committed past its
// record (kfake seed 9600047 of the fault runs).
func TestIntegrationExactlyOnceDeadLetterTopicDeleted(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "eos-dlq-del", 1)
	out := c.Topic(t, "eos-dlq-del-out", 1)
	dlq := topic + ".dlq"
	prod := manualProducer(t, c)
	cons := stringConsumer(t, c, topic, func(ctx context.Context, r *consumer.Record[string, string]) error {
		if strings.HasPrefix(r.Value, "bad") {
			return failure.Permanent(errors.New("rejected"))
		}
		if strings.HasPrefix(r.Value, "slow") {
			time.Sleep(20 * time.Millisecond)
		}
		return r.Produce(&kgo.Record{Topic: out, Value: []byte(r.Value)})
	}, func(cfg *consumer.Config[string, string]) {
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("dlq-del-txn")}
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
	})
	stop := runConsumer(t, cons)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("bad0")}, &kgo.Record{Topic: topic, Value: []byte("ok0")})
	// A committed output of ok0 says its transaction committed, with the
	// letter before it: the client holds the topic's id.
	kafkatest.WaitFor(t, 60*time.Second, "the output of ok0 committed", func() bool { return committedHas(t, c, out, "ok0") })
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if _, err := adm.DeleteTopic(ctx, dlq); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic gone", func() bool {
		td, err := adm.ListTopics(ctx, dlq)
		return err == nil && (len(td) == 0 || td[dlq].Err != nil)
	})
	// Records that take a while between the two pills: the first letter
	// is acknowledged before the second is written, in one transaction.
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("bad1")}, &kgo.Record{Topic: topic, Value: []byte("slow-a")},
		&kgo.Record{Topic: topic, Value: []byte("slow-b")}, &kgo.Record{Topic: topic, Value: []byte("bad2")},
		&kgo.Record{Topic: topic, Value: []byte("ok1")})
	// A committed output of ok1 says its transaction committed, with the
	// letters before it.
	kafkatest.WaitFor(t, 90*time.Second, "the output of ok1 committed", func() bool { return committedHas(t, c, out, "ok1") })
	if err := stop(); err != nil {
		t.Fatalf("the consumer stopped with %v; want it to go on after the topic was deleted", err)
	}
	got := map[string]int{}
	for _, r := range readCommitted(t, c, dlq) {
		got[string(r.Value)]++
	}
	if got["bad1"] != 1 || got["bad2"] != 1 {
		t.Fatalf("the dead-letter topic made again holds %v; want bad1 and bad2 once each", got)
	}
}

// TestIntegrationExactlyOnceOutputTopicCreatedAgain: in the exactly-once
// mode, an output topic deleted and created again by an operator between
// transactions takes the outputs of the records that follow, once each, and
// no record is dead-lettered for it: the client forgets the topic's old id
// once the transaction whose outputs failed for it is aborted. Before, the
// outputs failed in three transactions and their records were
// dead-lettered.
//
// On a cluster whose transactions keep the producer epoch (below
// transaction.version 2) forgetting the topic could make the broker take
// the next outputs for duplicates: the consumer halts instead, and a
// restarted one writes the outputs to the new topic.
func TestIntegrationExactlyOnceOutputTopicCreatedAgain(t *testing.T) {
	// "epoch-kept": the cluster is below transaction.version 2;
	// "capped": the client's MaxVersions keep it from using version 2;
	// "output-consumed": the output topic is the topic consumed: the
	// consumer forgets it for consuming when it sees the new id, without
	// starting the sequence numbers of its outputs again.
	for _, mode := range []string{"epoch-per-transaction", "epoch-kept", "capped", "output-consumed"} {
		t.Run(mode, func(t *testing.T) { testOutputCreatedAgain(t, mode) })
	}
}

func testOutputCreatedAgain(t *testing.T, mode string) {
	epochKept, consumed := mode == "epoch-kept" || mode == "capped", mode == "output-consumed"
	c := kafkatest.New(t)
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if mode == "epoch-kept" {
		if c.Real() {
			t.Skip("changes the cluster's transaction.version: on kfake only")
		}
		r, err := adm.UpdateFeatures(ctx, false, kadm.FeatureUpdate{Feature: "transaction.version", MaxVersionLevel: 0, UpgradeType: 2})
		if err == nil {
			err = r.Error()
		}
		if err != nil {
			t.Fatalf("downgrading transaction.version: %v", err)
		}
	}
	topic := c.Topic(t, "eos-out-again", 1)
	out, echo := c.Topic(t, "eos-out-again-out", 1), ""
	if consumed {
		// Before Kafka 4.2 a commit of the old topic's offsets can be
		// stored for the new topic (docs/modes.md).
		c.RequireCommitsByTopicID(t)
		out, echo = topic, "echo-" // an output of an echo is none
	}
	prod := manualProducer(t, c)
	txnID := kafkatest.UniqueName("out-again-txn")
	newConsumer := func() *consumer.Consumer[string, string] {
		return stringConsumer(t, c, topic, func(ctx context.Context, r *consumer.Record[string, string]) error {
			if consumed && strings.HasPrefix(r.Value, echo) {
				return nil
			}
			return r.Produce(&kgo.Record{Topic: out, Value: []byte(echo + r.Value)})
		}, func(cfg *consumer.Config[string, string]) {
			cfg.Group = "g-" + txnID
			cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: txnID}
			cfg.ClientOpts = append(cfg.ClientOpts, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
			if mode == "capped" {
				cfg.ClientOpts = append(cfg.ClientOpts, kgo.MaxVersions(kversion.V3_9_0()))
			}
		})
	}
	first := newConsumer()
	runCtx, stopFirst := context.WithCancel(context.Background())
	defer stopFirst()
	ended := make(chan error, 1)
	go func() { ended <- first.Run(runCtx) }()
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("ok0")})
	kafkatest.WaitFor(t, 60*time.Second, "the output of ok0 committed", func() bool { return committedHas(t, c, out, echo+"ok0") })
	if _, err := adm.DeleteTopic(ctx, out); err != nil {
		t.Fatal(err)
	}
	kafkatest.WaitFor(t, 30*time.Second, "the topic gone", func() bool {
		td, err := adm.ListTopics(ctx, out)
		return err == nil && (len(td) == 0 || td[out].Err != nil)
	})
	kafkatest.WaitFor(t, 30*time.Second, "the topic created again", func() bool {
		r, err := adm.CreateTopic(ctx, 1, -1, nil, out)
		return err == nil && r.Err == nil
	})
	if epochKept {
		// The consumer's client learns the new id (MetadataMaxAge) before
		// the next outputs: they fail for the old id, never written by
		// name to the new topic, and the consumer's own check halts it.
		time.Sleep(3 * time.Second)
	}
	// A new producer: the first holds the old id when the topic consumed
	// is the one created again.
	kafkatest.Produce(t, manualProducer(t, c), &kgo.Record{Topic: topic, Value: []byte("ok1")}, &kgo.Record{Topic: topic, Value: []byte("ok2")})
	stop := func() error {
		stopFirst()
		select {
		case err := <-ended:
			return err
		case <-time.After(60 * time.Second):
			return errors.New("Run did not return within 60s of cancel")
		}
	}
	if epochKept {
		var err error
		select {
		case err = <-ended:
		case <-time.After(90 * time.Second):
			t.Fatal("the consumer did not halt within 90s")
		}
		var h *consumer.HaltError
		if !errors.As(err, &h) || !strings.Contains(err.Error(), "transaction.version below 2") || !strings.Contains(err.Error(), out) {
			t.Fatalf("the consumer stopped with %v; want a *HaltError naming %s and why", err, out)
		}
		if committedHas(t, c, out, echo+"ok1") {
			t.Fatal("ok1's output is committed before the restart")
		}
		stop = runConsumer(t, newConsumer()) // a restart begins with a new epoch
	}
	kafkatest.WaitFor(t, 90*time.Second, "the output of ok2 committed", func() bool { return committedHas(t, c, out, echo+"ok2") })
	if err := stop(); err != nil {
		t.Fatalf("the consumer stopped with %v; want it to go on after the output topic was created again", err)
	}
	got := map[string]int{}
	for _, r := range readCommitted(t, c, out) {
		got[string(r.Value)]++
	}
	if got[echo+"ok1"] != 1 || got[echo+"ok2"] != 1 || got[echo+"ok0"] != 0 {
		t.Fatalf("the output topic made again holds %v; want ok1 and ok2 once each", got)
	}
	if dl, err := tryReadTxn(t, c, topic+".dlq", kgo.ReadCommitted()); err == nil && len(dl) > 0 {
		t.Fatalf("%d records were dead-lettered; want none", len(dl))
	}
}

// TestExactlyOnceDeadLetterDeletedInFlight: in the exactly-once mode, a
// dead-letter topic deleted while a letter's write to it is in flight
// (sent, not yet answered) is created again, and the consumer goes on:
// the letter and the output after it are committed once each. franz-go
// never gives up a batch it sent on an idempotent client, and an abort
// waits for every batch: before, the transaction's abort was tried again
// for as long as the consumer ran, and nothing was committed after it
// (cluster seed 94500023 of the fault runs). With
// DeadLetterConfig.DisableTopicCreation, the consumer says in its log that
// the transaction waits for the topic, and goes on once an operator has
// created it. kfake only: the request is held while the topic is deleted.
func TestExactlyOnceDeadLetterDeletedInFlight(t *testing.T) {
	t.Run("created by the consumer", func(t *testing.T) { testDeadLetterDeletedInFlight(t, false) })
	t.Run("created by an operator", func(t *testing.T) { testDeadLetterDeletedInFlight(t, true) })
}

func testDeadLetterDeletedInFlight(t *testing.T, byOperator bool) {
	c := kafkatest.New(t)
	if c.Real() {
		t.Skip("holds a produce request in kfake")
	}
	topic := c.Topic(t, "eos-dlq-inflight", 1)
	out := c.Topic(t, "eos-dlq-inflight-out", 1)
	dlq := topic + ".dlq"
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	created, err := adm.CreateTopic(ctx, 1, -1, nil, dlq)
	if err != nil {
		t.Fatal(err)
	}
	// The first write to the topic is held until the topic is deleted,
	// then answered with REQUEST_TIMED_OUT: the client cannot know
	// whether it was written, as when its broker stops mid-write. A
	// request with a later try of it is answered NOT_LEADER_FOR_PARTITION
	// (every batch in it, none written): the client asks for metadata,
	// which says the topic is gone, and holds the batch, as it does when
	// the broker's restart takes longer than a metadata refresh. (kfake
	// would answer UNKNOWN_TOPIC_ID, which fails the batch at once.)
	var held atomic.Bool
	deleted := make(chan error, 1)
	c.Fake().ControlKey(int16(kmsg.Produce), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake().KeepControl()
		pr := req.(*kmsg.ProduceRequest)
		toDLQ := false
		for _, rt := range pr.Topics {
			toDLQ = toDLQ || rt.TopicID == created.ID // Produce v13 and up name topics by id
		}
		if !toDLQ {
			return nil, nil, false
		}
		if held.CompareAndSwap(false, true) {
			c.Fake().SleepControl(func() {
				_, err := adm.DeleteTopic(ctx, dlq)
				deleted <- err
			})
			return refusal(pr, func(kmsg.ProduceRequestTopic) int16 { return kerr.RequestTimedOut.Code }), nil, true
		}
		return refusal(pr, func(kmsg.ProduceRequestTopic) int16 { return kerr.NotLeaderForPartition.Code }), nil, true
	})
	prod := manualProducer(t, c)
	ends := &txnEnds{}
	logs := &logBuffer{}
	cons := stringConsumer(t, c, topic, func(ctx context.Context, r *consumer.Record[string, string]) error {
		if strings.HasPrefix(r.Value, "bad") {
			return failure.Permanent(errors.New("rejected"))
		}
		return r.Produce(&kgo.Record{Topic: out, Value: []byte(r.Value)})
	}, func(cfg *consumer.Config[string, string]) {
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: kafkatest.UniqueName("dlq-inflight-txn")}
		cfg.DeadLetter.WriteTimeout = 2 * time.Second // the commit's flush gives up after it
		cfg.Hooks = ends
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.MetadataMaxAge(500*time.Millisecond), kgo.MetadataMinAge(100*time.Millisecond))
		if byOperator {
			cfg.DeadLetter.DisableTopicCreation = true
			cfg.Logger = logs.logger()
		}
	})
	stop := runConsumer(t, cons)
	kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Value: []byte("bad0")}, &kgo.Record{Topic: topic, Value: []byte("ok0")})
	select {
	case err := <-deleted:
		if err != nil {
			t.Fatalf("deleting %s: %v", dlq, err)
		}
	case <-ctx.Done():
		t.Fatal("no letter was written to the dead-letter topic")
	}
	if byOperator {
		kafkatest.WaitFor(t, 30*time.Second, "the log saying the transaction waits for the topic", func() bool {
			return logs.has("a letter of a transaction waits for its topic")
		})
		ends.mu.Lock()
		for _, ev := range ends.evs {
			if ev.Committed {
				t.Fatalf("a transaction (%+v) committed before the topic was created again", ev)
			}
		}
		ends.mu.Unlock()
		if _, err := adm.CreateTopic(ctx, 1, -1, nil, dlq); err != nil {
			t.Fatalf("creating %s again: %v", dlq, err)
		}
	}
	kafkatest.WaitFor(t, 90*time.Second, "the output of ok0 committed", func() bool { return committedHas(t, c, out, "ok0") })
	if err := stop(); err != nil {
		t.Fatalf("the consumer stopped with %v; want it to go on after the topic was deleted", err)
	}
	got := map[string]int{}
	for _, r := range readCommitted(t, c, dlq) {
		got[string(r.Value)]++
	}
	if got["bad0"] != 1 || len(got) != 1 {
		t.Fatalf("the dead-letter topic made again holds %v; want bad0 once", got)
	}
	if outs := readCommitted(t, c, out); len(outs) != 1 || string(outs[0].Value) != "ok0" {
		t.Fatalf("%d outputs committed; want ok0 once", len(outs))
	}
	// The hooks were told of the aborted transaction, why, and of the
	// commits after it, which settled each record once.
	ends.mu.Lock()
	defer ends.mu.Unlock()
	if len(ends.evs) < 2 || ends.evs[0].Committed || ends.evs[0].Err == nil || ends.evs[0].Records < 1 {
		t.Fatalf("transaction ends %+v; want first an abort, with its cause", ends.evs)
	}
	committed := 0
	for _, ev := range ends.evs {
		if ev.Committed != (ev.Err == nil) {
			t.Fatalf("transaction end %+v: committed and its error disagree", ev)
		}
		if ev.Committed {
			committed += ev.Records
		}
	}
	if committed != 2 {
		t.Fatalf("transaction ends %+v committed %d records; want 2", ends.evs, committed)
	}
}

// txnEnds records the transaction ends the consumer tells its hooks.
type txnEnds struct {
	consumer.NopHooks
	mu  sync.Mutex
	evs []consumer.TransactionEvent
}

func (h *txnEnds) TransactionEnded(ev consumer.TransactionEvent) {
	h.mu.Lock()
	h.evs = append(h.evs, ev)
	h.mu.Unlock()
}
