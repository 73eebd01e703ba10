package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// A consumer reads orders; a record of garbage bytes and an order the
// handler rejects go to the dead-letter topic, the rest are processed, and
// nothing blocks.
func Example() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.dlq"))
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	for _, v := range []string{`{"id":1}`, "\x00\xde\xad", `{"id":-2}`, `{"id":3}`} {
		producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)})
	}

	type Order struct {
		ID int `json:"id"`
	}
	c, err := consumer.New(consumer.Config[string, Order]{
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"orders"},
		Group:   "billing",
		Value:   serde.JSON[Order](),
		Handler: func(ctx context.Context, r *consumer.Record[string, Order]) error {
			if r.Value.ID < 0 {
				return failure.Permanent(errors.New("negative order id"))
			}
			fmt.Println("processed order", r.Value.ID)
			return nil
		},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	for s := c.Stats(); s.Processed+s.DeadLettered < 4; s = c.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done

	s := c.Stats()
	fmt.Println("processed:", s.Processed, "dead-lettered:", s.DeadLettered)
	// Output:
	// processed order 1
	// processed order 3
	// processed: 2 dead-lettered: 2
}

// An operator skips the record a partition is stuck on, naming the offset
// that Stats shows: a skip at any other offset is refused.
func ExampleConsumer_Skip() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "payments"))
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	for _, v := range []string{"ok", "the bank is down for this one", "ok again"} {
		producer.ProduceSync(ctx, &kgo.Record{Topic: "payments", Value: []byte(v)})
	}

	paid := make(chan string, 2) // printed by this goroutine, in order with the rest
	c, _ := consumer.New(consumer.Config[string, string]{
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"payments"},
		Group:   "payer",
		Value:   serde.String(),
		Handler: func(ctx context.Context, r *consumer.Record[string, string]) error {
			if r.Value != "ok" && r.Value != "ok again" {
				return failure.Transient(errors.New("bank unavailable"))
			}
			paid <- r.Value
			return nil
		},
		// Retry for as long as it takes, once a second.
		Policy:     consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.Fixed(time.Second)}}},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	fmt.Println("paid:", <-paid)
	for len(c.Stats().Stuck) == 0 {
		time.Sleep(10 * time.Millisecond)
	}
	st := c.Stats().Stuck[0]
	fmt.Printf("stuck on %s/%d at offset %d (%s): %s\n", st.Topic, st.Partition, st.Offset, st.Reason, st.LastError)
	fmt.Println("skip at offset 2:", c.Skip("payments", 0, 2))
	fmt.Println("skip at offset 1:", c.Skip("payments", 0, 1))
	fmt.Println("paid:", <-paid)
	for c.Stats().Processed < 2 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	fmt.Println("skipped:", c.Stats().Skipped)
	// Output:
	// paid: ok
	// stuck on payments/0 at offset 1 (retrying): bank unavailable
	// skip at offset 2: consumer: partition is not stuck on a record: payments/0 is stuck on offset 1, not 2
	// skip at offset 1: <nil>
	// paid: ok again
	// skipped: 1
}

// Retry topics: an order whose payment service fails is forwarded to a delay
// tier, and the partition moves on. Later records of the same order wait
// behind it (per-key order), another order is not delayed at all.
func ExampleRetryTopics() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.retry.100ms"))
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	for _, kv := range [][2]string{{"order-1", "created"}, {"order-1", "paid"}, {"order-2", "created"}, {"order-1", "shipped"}} {
		producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Key: []byte(kv[0]), Value: []byte(kv[1])})
	}

	c, err := consumer.New(consumer.Config[string, string]{
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"orders"},
		Group:   "fulfilment",
		Key:     serde.String(),
		Value:   serde.String(),
		Handler: func(ctx context.Context, r *consumer.Record[string, string]) error {
			if r.Key == "order-1" && r.Value == "created" && r.Attempt == 1 {
				return failure.Transient(errors.New("payment service unavailable"))
			}
			fmt.Printf("%s %s (attempt %d, from %s)\n", r.Key, r.Value, r.Attempt, r.Raw.Topic)
			return nil
		},
		// No retry in place: straight to the tiers, then the dead-letter topic.
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics: consumer.RetryTopics{Tiers: []time.Duration{100 * time.Millisecond}},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts:  []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	for c.Stats().Processed < 4 {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	s := c.Stats()
	fmt.Println("forwarded:", s.Forwarded, "parked:", s.Parked)
	// Output:
	// order-2 created (attempt 1, from orders)
	// order-1 created (attempt 2, from orders)
	// order-1 paid (attempt 1, from orders)
	// order-1 shipped (attempt 1, from orders)
	// forwarded: 1 parked: 2
}

// A batch handler writes records in bulk and fails only the records the
// sink rejects: each is settled alone (here: dead-lettered), the others are
// processed once.
func ExampleBatchHandler() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "docs", "docs.dlq"))
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	for _, v := range []string{"a", "b", "<too large>", "d", "e"} {
		producer.ProduceSync(ctx, &kgo.Record{Topic: "docs", Value: []byte(v)})
	}

	var indexed []string
	c, _ := consumer.New(consumer.Config[string, string]{
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"docs"},
		Group:   "indexer",
		Value:   serde.String(),
		BatchHandler: func(ctx context.Context, batch []*consumer.Record[string, string]) error {
			errs := map[int]error{}
			for i, r := range batch { // a bulk request, and its per-document results
				if r.Value == "<too large>" {
					errs[i] = failure.Permanent(errors.New("document too large"))
					continue
				}
				indexed = append(indexed, r.Value)
			}
			if len(errs) > 0 {
				return &consumer.BatchError{Errs: errs}
			}
			return nil
		},
		Batching:   consumer.Batching{Size: 500, Linger: 50 * time.Millisecond},
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	for s := c.Stats(); s.Processed+s.DeadLettered < 5; s = c.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done
	s := c.Stats()
	fmt.Println("indexed:", indexed)
	fmt.Println("processed:", s.Processed, "dead-lettered:", s.DeadLettered)
	// Output:
	// indexed: [a b d e]
	// processed: 4 dead-lettered: 1
}

// ExampleExactlyOnce: a consumer that enriches orders into another topic.
// Its outputs, its dead letters and its offset commits go out in Kafka
// transactions: a read_committed reader of "enriched" sees each output
// once, whatever crashes.
func ExampleExactlyOnce() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders", "orders.dlq", "enriched"))
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	for _, v := range []string{"a", "b", "\xff", "c"} {
		producer.ProduceSync(ctx, &kgo.Record{Topic: "orders", Value: []byte(v)})
	}

	c, _ := consumer.New(consumer.Config[string, string]{
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"orders"},
		Group:   "enricher",
		Value:   validUTF8,
		Handler: func(ctx context.Context, r *consumer.Record[string, string]) error {
			// Written only if the handler returns nil, in the transaction
			// that commits this record's offset.
			return r.Produce(&kgo.Record{Topic: "enriched", Value: []byte("order " + r.Value)})
		},
		// One id per member, the same across its restarts.
		ExactlyOnce: consumer.ExactlyOnce{TransactionalID: "enricher-0", MaxRecords: 10000, Interval: 100 * time.Millisecond},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts:  []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error)
	go func() { done <- c.Run(runCtx) }()
	for s := c.Stats(); s.Processed+s.DeadLettered < 4; s = c.Stats() {
		time.Sleep(10 * time.Millisecond)
	}
	stop()
	<-done // the last transaction is committed on the way out

	reader, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics("enriched"),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	defer reader.Close()
	for n := 0; n < 3; {
		reader.PollFetches(ctx).EachRecord(func(r *kgo.Record) {
			fmt.Println(string(r.Value))
			n++
		})
	}
	fmt.Println("dead-lettered:", c.Stats().DeadLettered)
	// Output:
	// order a
	// order b
	// order c
	// dead-lettered: 1
}

// validUTF8 turns bytes into a string, failing (permanently) on invalid
// UTF-8.
var validUTF8 = serde.DeserializerFunc[string](func(_ context.Context, _ serde.Meta, b []byte) (string, error) {
	if !utf8.Valid(b) {
		return "", failure.Permanent(errors.New("not UTF-8"))
	}
	return string(b), nil
})
