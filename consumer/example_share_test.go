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

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// A member of a share group: a task that fails for a while is released and
// delivered again until it succeeds; garbage bytes are dead-lettered at
// once; a task that never succeeds is dead-lettered on the group's last
// delivery, and every record is acknowledged only once it is settled.
func ExampleShare() {
	cluster, _ := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "tasks"))
	defer cluster.Close()
	producer, _ := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	defer producer.Close()
	ctx := context.Background()
	for _, v := range []string{`{"id":1}`, `{"id":2,"flaky":true}`, "\x00\xde\xad", `{"id":-3}`} {
		producer.ProduceSync(ctx, &kgo.Record{Topic: "tasks", Value: []byte(v)})
	}

	type Task struct {
		ID    int  `json:"id"`
		Flaky bool `json:"flaky"`
	}
	c, err := consumer.New(consumer.Config[string, Task]{
		Brokers:    cluster.ListenAddrs(),
		Topics:     []string{"tasks"},
		ShareGroup: "workers",
		Share:      consumer.Share{FromEarliest: true},
		Value:      serde.JSON[Task](),
		Handler: func(ctx context.Context, r *consumer.Record[string, Task]) error {
			switch {
			case r.Value.ID < 0:
				return failure.Transient(errors.New("the service never answers"))
			case r.Value.Flaky && r.Raw.DeliveryCount() < 3:
				return failure.Transient(errors.New("the service is busy"))
			}
			fmt.Printf("task %d done on delivery %d\n", r.Value.ID, r.Raw.DeliveryCount())
			return nil
		},
		// One quick try here per delivery, then back to the group.
		Policy: consumer.Policy{Process: consumer.StagePolicy{Transient: consumer.Rule{Retry: backoff.None()}}},
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
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
	// task 1 done on delivery 1
	// task 2 done on delivery 3
	// processed: 2 dead-lettered: 2
}
