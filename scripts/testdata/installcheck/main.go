// Command installcheck is the program of scripts/installcheck.sh: the script
// copies it into a fresh module outside the repository, which requires
// consumer, serde/avro, metrics/prom and trace/otel at a version served by a
// local module proxy, and runs it. It runs README's "Use it" example against
// an in-process cluster (kfake), with Prometheus metrics as its hooks and an
// OpenTelemetry tracer, and fails unless the good orders were charged, the
// poison pills were dead-lettered byte for byte, counted and traced, and the
// Avro deserializer classifies bytes without its magic byte as permanent. (A testdata directory: the go command never builds it as
// part of the repository's modules.)
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/metrics/prom"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
	antiotel "github.com/antidote-kafka/antidote/trace/otel"
)

type Order struct {
	ID     int     `json:"id" avro:"id"`
	Amount float64 `json:"amount" avro:"amount"`
}

const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"long"},{"name":"amount","type":"double"}]}`

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "installcheck:", err)
		os.Exit(1)
	}
}

func run() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	cluster, err := kfake.NewCluster(kfake.NumBrokers(1), kfake.SeedTopics(1, "orders"))
	if err != nil {
		return err
	}
	defer cluster.Close()
	client, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...))
	if err != nil {
		return err
	}
	defer client.Close()
	values := []string{`{"id":1,"amount":10}`, `{"id":2,"amount":-5}`, "\x00\xde\xad", `{"id":3,"amount":7}`}
	poison := []string{values[1], values[2]}
	for i, v := range values {
		r := &kgo.Record{Topic: "orders", Key: fmt.Appendf(nil, "order-%d", i+1), Value: []byte(v)}
		if err := client.ProduceSync(ctx, r).FirstErr(); err != nil {
			return err
		}
	}

	var mu sync.Mutex
	var charged []int
	charge := func(_ context.Context, o Order) error {
		mu.Lock()
		defer mu.Unlock()
		charged = append(charged, o.ID)
		return nil
	}
	reg := prometheus.NewRegistry()
	metrics, err := prom.New(reg)
	if err != nil {
		return err
	}

	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))

	// README's "Use it", on the cluster, with the metrics as hooks, traced.
	c, err := consumer.New(consumer.Config[string, Order]{
		Brokers: cluster.ListenAddrs(),
		Topics:  []string{"orders"},
		Group:   "billing",
		Key:     serde.String(),
		Value:   serde.JSON[Order](),
		Handler: func(ctx context.Context, r *consumer.Record[string, Order]) error {
			if r.Value.Amount < 0 {
				return failure.Permanent(errors.New("negative amount")) // dead-lettered at once
			}
			return charge(ctx, r.Value) // network errors are transient: retried with backoff
		},
		Hooks:      metrics,
		Tracer:     antiotel.NewTracer(antiotel.TracerProvider(tp)),
		Logger:     slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	})
	if err != nil {
		return err
	}
	metrics.Watch(c)
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- c.Run(runCtx) }()
	for s := c.Stats(); s.Processed+s.DeadLettered < uint64(len(values)); s = c.Stats() {
		select {
		case <-ctx.Done():
			stop()
			return fmt.Errorf("records not settled in time: %+v", s)
		case err := <-done:
			stop()
			return fmt.Errorf("Run returned early: %v", err)
		case <-time.After(10 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		return fmt.Errorf("Run: %w", err)
	}

	mu.Lock()
	got := slices.Clone(charged)
	mu.Unlock()
	if !slices.Equal(got, []int{1, 3}) {
		return fmt.Errorf("charged orders %v, want [1 3]", got)
	}
	if s := c.Stats(); s.Processed != 2 || s.DeadLettered != uint64(len(poison)) {
		return fmt.Errorf("Stats: %d processed, %d dead-lettered; want 2 and %d", s.Processed, s.DeadLettered, len(poison))
	}
	readCtx, cancelRead := context.WithTimeout(ctx, 10*time.Second)
	defer cancelRead()
	letters, err := readTopic(readCtx, cluster, "orders.dlq", len(poison))
	if err != nil {
		return err
	}
	if !slices.Equal(letters, poison) {
		return fmt.Errorf("orders.dlq holds %q, want %q", letters, poison)
	}
	deadLettered, err := counter(reg, "antidote_records_total", "outcome", string(consumer.OutcomeDeadLettered))
	if err != nil {
		return err
	}
	if deadLettered != float64(len(poison)) {
		return fmt.Errorf("antidote_records_total{outcome=%q} = %v, want %d", consumer.OutcomeDeadLettered, deadLettered, len(poison))
	}
	sends := 0
	for _, s := range spans.GetSpans() {
		if s.Name == "send orders.dlq" {
			sends++
		}
	}
	if sends != len(poison) {
		return fmt.Errorf("%d dead-letter spans, want %d", sends, len(poison))
	}

	// serde/avro: bytes without the wire format's magic byte can never be
	// read, so they fail as permanent before the registry is asked (the
	// address is one that nothing listens on).
	areg, err := avro.NewRegistry("http://127.0.0.1:1")
	if err != nil {
		return err
	}
	orders, err := avro.NewDeserializer[Order](areg, orderSchema)
	if err != nil {
		return err
	}
	if _, err := orders.Deserialize(ctx, serde.Meta{Topic: "orders", Part: serde.Value}, []byte(values[0])); !failure.IsPermanent(err) {
		return fmt.Errorf("avro: JSON bytes decoded with error %v, want a permanent failure", err)
	}

	fmt.Printf("installcheck: charged orders %v, dead-lettered %d (antidote_records_total), %d dead-letter spans, avro: permanent failure\n", got, len(letters), sends)
	return nil
}

// readTopic reads the first n record values of topic.
func readTopic(ctx context.Context, cluster *kfake.Cluster, topic string, n int) ([]string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(cluster.ListenAddrs()...), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	var vals []string
	for len(vals) < n {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			return vals, fmt.Errorf("%s: %d of %d records: %w", topic, len(vals), n, err)
		}
		fs.EachRecord(func(r *kgo.Record) { vals = append(vals, string(r.Value)) })
	}
	return vals, nil
}

// counter sums the samples of counter name whose label has value.
func counter(g prometheus.Gatherer, name, label, value string) (float64, error) {
	mfs, err := g.Gather()
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == label && lp.GetValue() == value {
					sum += m.GetCounter().GetValue()
				}
			}
		}
	}
	return sum, nil
}
