// Package prom exports an Antidote consumer's metrics to Prometheus
// (prometheus/client_golang). It is a module of its own, so that the
// consumer packages never import Prometheus.
//
// [Metrics] is both the consumer's [consumer.Hooks] (counters and
// histograms, updated as events happen) and a prometheus.Collector that
// reads [consumer.Consumer.Stats] at scrape time (gauges):
//
//	reg := prometheus.NewRegistry()
//	m, err := prom.New(reg)
//	cfg.Hooks = m
//	c, err := consumer.New(cfg)
//	m.Watch(c)
//	http.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
//
// or pass promhttp.HandlerFor(reg, ...) as admin.Config.Metrics to serve it
// with the admin API. For several consumers in one process, give each its
// own Metrics on prometheus.WrapRegistererWith(prometheus.Labels{"consumer":
// name}, reg).
//
// # franz-go's client metrics
//
// franz-go's plugin/kprom measures the Kafka client itself (connections,
// bytes, fetch and produce batches, per broker). Register it on the same
// registry and hand it to the consumer's client:
//
//	client := kprom.NewMetrics("antidote", kprom.Subsystem("kafka"), kprom.Registerer(reg))
//	cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(client))
//
// Its metrics are then antidote_kafka_* (antidote_kafka_read_bytes_total,
// antidote_kafka_connects_total, ...). One kprom.Metrics serves one client.
//
// # Metrics
//
// Labels come from small fixed sets: topic (a source topic), partition,
// stage (deserialize-key, deserialize-value, process, ...), class
// (transient, permanent, unclassified), outcome, result (ok, error), reason,
// ack (accept, release, renew), group (a share group), and for antidote_dependency_state the names and states of
// Config.Dependencies. Offsets, keys and error messages are never labels.
//
//	Name                                          Type       Labels                           Meaning
//	antidote_records_total                        counter    topic, stage, class, outcome     records settled: processed, dead-lettered, skipped, halted, forwarded, released (stage and class empty when processed)
//	antidote_retries_total                        counter    topic, stage, class              retries in place, one per wait before another try
//	antidote_records_consumed_total               counter    -                                records taken from fetches, each once (from Stats)
//	antidote_handler_duration_seconds             histogram  topic, result                    duration of handler calls
//	antidote_dead_letter_writes_total             counter    topic, result                    dead-letter write attempts (ok: acknowledged; error: failed, retried)
//	antidote_dead_letter_write_duration_seconds   histogram  topic, result                    latency of dead-letter write attempts
//	antidote_running                              gauge      -                                1 while Run runs
//	antidote_ready                                gauge      -                                1 while ready: running, with partitions, not halted
//	antidote_retry_enabled                        gauge      -                                the kill switch: 1 while retrying is on
//	antidote_brokers_reachable                    gauge      -                                1 while the Kafka cluster answers
//	antidote_flood_guard_tripped                  gauge      -                                1 while the flood guard holds the consumer
//	antidote_flood_guard_trips_total              counter    -                                times the flood guard tripped
//	antidote_buffered_records                     gauge      -                                records held by the assigned partitions
//	antidote_buffered_bytes                       gauge      -                                bytes held by the assigned partitions
//	antidote_partition_stuck                      gauge      topic, partition                 1 while the partition cannot move past a record, else 0 (each assigned partition)
//	antidote_partition_stuck_seconds              gauge      topic, partition, reason         how long it has been stuck on that record (retrying, dead-letter); only while stuck
//	antidote_partition_paused                     gauge      topic, partition, reason         1 while its fetching is paused (stuck, buffer-full, operator, retry-due, retry-parked-full); only while paused
//	antidote_partition_lag                        gauge      topic, partition                 records not yet committed: high watermark minus committed offset; absent while unknown
//	antidote_healthy_lag                          gauge      topic                            records waiting to be handled: the lag of the partitions not stuck, retry tiers left out; what to autoscale on
//	antidote_topic_partitions                     gauge      topic                            a source topic's partition count from the metadata, read every 5 s (consumer groups); what to cap replicas at
//	antidote_dependency_state                     gauge      dependency, state                1 for each dependency's current state (a registry breaker: closed, open, half-open)
//	antidote_share_acknowledgements_total         counter    topic, ack                       a share-group member's acknowledgements: accept, release, renew
//	antidote_share_delivery_count                 histogram  topic                            delivery counts of the records it acquired (1: a first delivery)
//	antidote_share_delivery_limit                 gauge      group                            its group's delivery limit in use
//	antidote_share_held_records                   gauge      group                            records of its poll with no ACCEPT or RELEASE yet
//	antidote_share_setup_problems                 gauge      group                            problems found in the group's setup (Stats.ShareGroup.Problems); alert above 0
//
// antidote_records_total{outcome="dead-lettered"} counts records, and
// antidote_dead_letter_writes_total{result="ok"} acknowledged writes: they
// agree, and a rising result="error" is a dead-letter topic that cannot be
// written.
//
// # Healthy lag
//
// antidote_healthy_lag is the lag that more consumers would work off: per
// source topic, the sum of antidote_partition_lag over the partitions that
// are not stuck, an unknown lag counting 0. A stuck partition's records
// wait on one record (retried, or its dead letter not yet written), and a
// retry tier's records wait for their delay; neither goes faster with more
// replicas, so an autoscaler that counted them would add replicas that sit
// idle. Sum it over the members of a group (sum by (topic)) to get the
// group's healthy lag; deploy/helm/antidote scales on it with KEDA, capped
// at antidote_topic_partitions times the lag per replica, since members
// beyond a topic's partitions get none.
//
// # Dashboards and alerts
//
// The directory dashboards holds a Grafana dashboard (antidote.json) and
// Prometheus alert rules (alerts.yml) over these metrics: dead-letter rate,
// a partition stuck for more than 10 minutes, lag growing, consumer not
// ready, dead-letter writes failing. Tests check that the rules parse and
// that every metric they and the dashboard name is one this package
// exports.
package prom
