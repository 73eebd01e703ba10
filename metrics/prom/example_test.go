package prom_test

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/metrics/prom"
	"github.com/antidote-kafka/antidote/serde"
)

func Example() {
	reg := prometheus.NewRegistry()
	m, err := prom.New(reg) // the consumer's metrics
	if err != nil {
		panic(err)
	}
	// franz-go's client metrics beside them, as antidote_kafka_*.
	client := kprom.NewMetrics("antidote", kprom.Subsystem("kafka"), kprom.Registerer(reg))

	c, err := consumer.New(consumer.Config[string, string]{
		Brokers: []string{"127.0.0.1:9092"}, Topics: []string{"orders"}, Group: "billing",
		Value:      serde.String(),
		Handler:    func(context.Context, *consumer.Record[string, string]) error { return nil },
		Hooks:      m,
		ClientOpts: []kgo.Opt{kgo.WithHooks(client)},
		Logger:     slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	defer c.Close()
	m.Watch(c) // gauges read c.Stats() at scrape time

	// Serve /metrics with the admin API (or promhttp on a server of your own).
	h, err := admin.New(admin.Config{
		Consumers: map[string]admin.Consumer{"billing": c},
		Metrics:   promhttp.HandlerFor(reg, promhttp.HandlerOpts{}),
		Logger:    slog.New(slog.DiscardHandler),
	})
	if err != nil {
		panic(err)
	}
	_ = h // go h.ListenAndServe(ctx, "127.0.0.1:9180")

	fams, err := reg.Gather()
	if err != nil {
		panic(err)
	}
	for _, f := range fams {
		switch f.GetName() {
		case "antidote_ready", "antidote_retry_enabled", "antidote_records_consumed_total":
			fmt.Println(f.GetName(), f.GetMetric()[0].GetGauge().GetValue()+f.GetMetric()[0].GetCounter().GetValue())
		}
	}
	// Output:
	// antidote_ready 0
	// antidote_records_consumed_total 0
	// antidote_retry_enabled 1
}
