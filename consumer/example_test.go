package consumer_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

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
