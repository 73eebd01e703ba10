package prom

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
)

type fixedStats consumer.Stats

func (f fixedStats) Stats() consumer.Stats { return consumer.Stats(f) }

// TestExposition: the hooks and the Stats of a watched consumer give
// exactly the documented series.
func TestExposition(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(reg); err == nil {
		t.Fatal("New on a registry that has the metrics already: no error")
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	m.now = func() time.Time { return now }

	// Before Watch: the gauges are absent.
	if n, err := testutil.GatherAndCount(reg, "antidote_ready"); err != nil || n != 0 {
		t.Fatalf("antidote_ready before Watch: %d series (%v); want none", n, err)
	}
	pe := consumer.PartitionEvent{Topic: "orders", Partition: 3}
	m.RecordSettled(consumer.SettledEvent{PartitionEvent: pe, Outcome: consumer.OutcomeProcessed})
	m.RecordSettled(consumer.SettledEvent{PartitionEvent: pe, Outcome: consumer.OutcomeProcessed})
	m.RecordSettled(consumer.SettledEvent{PartitionEvent: pe, Outcome: consumer.OutcomeDeadLettered, Stage: "deserialize-value", Class: failure.ClassPermanent})
	m.RecordRetried(consumer.RetryEvent{PartitionEvent: pe, Stage: "process", Class: failure.ClassTransient, Attempt: 1, Wait: time.Second})
	m.HandlerDone(consumer.HandlerEvent{PartitionEvent: pe, Duration: 3 * time.Millisecond})
	m.HandlerDone(consumer.HandlerEvent{PartitionEvent: pe, Duration: 2 * time.Second, Err: errors.New("x")})
	m.DeadLetterWritten(consumer.WriteEvent{PartitionEvent: pe, DeadLetterTopic: "orders.dlq", Latency: 7 * time.Millisecond})
	m.DeadLetterWritten(consumer.WriteEvent{PartitionEvent: pe, DeadLetterTopic: "orders.dlq", Latency: time.Second, Err: errors.New("x")})

	m.Watch(fixedStats{
		Consumed: 9, Running: true, Ready: true, RetryEnabled: false, Brokers: consumer.BrokerState{Reachable: true},
		BufferedRecords: 4, BufferedBytes: 400,
		Stuck: []consumer.Stuck{{Topic: "orders", Partition: 3, Offset: 77, Reason: consumer.StuckRetrying, Since: now.Add(-90 * time.Second)}},
		Partitions: []consumer.Partition{
			{Topic: "orders", Partition: 3, State: consumer.PartitionStuck, Paused: consumer.PauseStuck, HighWatermark: 100, Committed: 77, Lag: 23},
			{Topic: "orders", Partition: 4, State: consumer.PartitionFlowing, HighWatermark: -1, Committed: -1, Lag: -1},
		},
		Dependencies: map[string]string{"registry": "open"},
		Flood:        &consumer.Flood{Topic: "orders", Partition: 3}, FloodTrips: 2,
		TransactionsCommitted: 12, TransactionsAborted: 1,
	})
	want := `
# HELP antidote_records_total Records settled, by topic, failure stage, failure class and outcome (processed, dead-lettered, skipped, halted, forwarded, released). Stage and class are empty for processed records.
# TYPE antidote_records_total counter
antidote_records_total{class="",outcome="processed",stage="",topic="orders"} 2
antidote_records_total{class="permanent",outcome="dead-lettered",stage="deserialize-value",topic="orders"} 1
# HELP antidote_retries_total Retries in place (one per wait before another try), by topic, failure stage and class.
# TYPE antidote_retries_total counter
antidote_retries_total{class="transient",stage="process",topic="orders"} 1
# HELP antidote_dead_letter_writes_total Dead-letter write attempts, by source topic and result (ok: acknowledged, error: failed and retried).
# TYPE antidote_dead_letter_writes_total counter
antidote_dead_letter_writes_total{result="error",topic="orders"} 1
antidote_dead_letter_writes_total{result="ok",topic="orders"} 1
# HELP antidote_records_consumed_total Records taken from fetches (each once, however often it is retried).
# TYPE antidote_records_consumed_total counter
antidote_records_consumed_total 9
# HELP antidote_running 1 while the consumer runs.
# TYPE antidote_running gauge
antidote_running 1
# HELP antidote_ready 1 while the consumer is ready: running, with partitions, not halted.
# TYPE antidote_ready gauge
antidote_ready 1
# HELP antidote_retry_enabled The retry kill switch: 1 while retrying is on.
# TYPE antidote_retry_enabled gauge
antidote_retry_enabled 0
# HELP antidote_brokers_reachable 1 while the Kafka cluster answers.
# TYPE antidote_brokers_reachable gauge
antidote_brokers_reachable 1
# HELP antidote_buffered_records Records held by the assigned partitions (fetched, not yet settled).
# TYPE antidote_buffered_records gauge
antidote_buffered_records 4
# HELP antidote_buffered_bytes Bytes held by the assigned partitions.
# TYPE antidote_buffered_bytes gauge
antidote_buffered_bytes 400
# HELP antidote_partition_stuck 1 while an assigned partition cannot move past a record (retrying it, or waiting for its dead letter), else 0.
# TYPE antidote_partition_stuck gauge
antidote_partition_stuck{partition="3",topic="orders"} 1
antidote_partition_stuck{partition="4",topic="orders"} 0
# HELP antidote_partition_stuck_seconds How long a stuck partition has been stuck on its record, by reason (retrying, dead-letter); present only while stuck.
# TYPE antidote_partition_stuck_seconds gauge
antidote_partition_stuck_seconds{partition="3",reason="retrying",topic="orders"} 90
# HELP antidote_partition_paused 1 while the fetching of a partition is paused, by reason (stuck, buffer-full, operator, retry-due, retry-parked-full); present only while paused.
# TYPE antidote_partition_paused gauge
antidote_partition_paused{partition="3",reason="stuck",topic="orders"} 1
# HELP antidote_partition_lag Records of an assigned partition not yet committed: high watermark minus committed offset; absent while unknown.
# TYPE antidote_partition_lag gauge
antidote_partition_lag{partition="3",topic="orders"} 23
# HELP antidote_healthy_lag Records of a source topic waiting to be handled: the lag of its assigned partitions that are not stuck (unknown lag counts 0); retry-tier topics are left out. What an autoscaler should scale on.
# TYPE antidote_healthy_lag gauge
antidote_healthy_lag{topic="orders"} 0
# HELP antidote_dependency_state 1 for the current state of each dependency of Config.Dependencies (for example a schema registry's circuit breaker: closed, open, half-open).
# TYPE antidote_dependency_state gauge
antidote_dependency_state{dependency="registry",state="open"} 1
# HELP antidote_flood_guard_tripped 1 while the flood guard holds the consumer (too many records would be dead-lettered), else 0.
# TYPE antidote_flood_guard_tripped gauge
antidote_flood_guard_tripped 1
# HELP antidote_flood_guard_trips_total Times the flood guard tripped.
# TYPE antidote_flood_guard_trips_total counter
antidote_flood_guard_trips_total 2
# HELP antidote_transactions_total Transactions of the exactly-once mode, by result (committed, aborted).
# TYPE antidote_transactions_total counter
antidote_transactions_total{result="aborted"} 1
antidote_transactions_total{result="committed"} 12
`
	names := []string{"antidote_records_total", "antidote_retries_total", "antidote_dead_letter_writes_total", "antidote_records_consumed_total",
		"antidote_running", "antidote_ready", "antidote_retry_enabled", "antidote_brokers_reachable", "antidote_buffered_records", "antidote_buffered_bytes",
		"antidote_partition_stuck", "antidote_partition_stuck_seconds", "antidote_partition_paused", "antidote_partition_lag", "antidote_healthy_lag", "antidote_dependency_state",
		"antidote_flood_guard_tripped", "antidote_flood_guard_trips_total", "antidote_transactions_total"}
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), names...); err != nil {
		t.Fatal(err)
	}
	// The histograms: one observation per call, in its result.
	for _, c := range []struct {
		name, result string
		sum          float64
	}{
		{"antidote_handler_duration_seconds", ResultOK, 0.003},
		{"antidote_handler_duration_seconds", ResultError, 2},
		{"antidote_dead_letter_write_duration_seconds", ResultOK, 0.007},
		{"antidote_dead_letter_write_duration_seconds", ResultError, 1},
	} {
		var h prometheus.Observer
		if c.name == "antidote_handler_duration_seconds" {
			h = m.handler.WithLabelValues("orders", c.result)
		} else {
			h = m.dlqLatency.WithLabelValues("orders", c.result)
		}
		pb := histogramOf(t, h)
		if pb.GetSampleCount() != 1 || pb.GetSampleSum() != c.sum {
			t.Errorf("%s{result=%s}: count %d sum %v; want 1 and %v", c.name, c.result, pb.GetSampleCount(), pb.GetSampleSum(), c.sum)
		}
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}

// TestHealthyLag: antidote_healthy_lag sums, per source topic, the lag of
// the partitions that are not stuck; a stuck partition's lag, a retry
// tier's and an unknown lag are not in it.
func TestHealthyLag(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(fixedStats{
		Partitions: []consumer.Partition{
			{Topic: "orders", Partition: 0, State: consumer.PartitionFlowing, Lag: 100},
			{Topic: "orders", Partition: 1, State: consumer.PartitionPaused, Paused: consumer.PauseFull, Lag: 20},
			{Topic: "orders", Partition: 2, State: consumer.PartitionStuck, Paused: consumer.PauseStuck, Lag: 5000},
			{Topic: "orders", Partition: 3, State: consumer.PartitionFlowing, Lag: -1},
			{Topic: "orders.retry.5s", Partition: 0, State: consumer.PartitionFlowing, Lag: 700},
			{Topic: "orders.retry.1m", Partition: 0, State: consumer.PartitionStuck, Lag: 80},
			{Topic: "payments", Partition: 0, State: consumer.PartitionStuck, Lag: 9},
			{Topic: "payments", Partition: 1, State: consumer.PartitionFlowing, Lag: 3},
			{Topic: "refunds", Partition: 0, State: consumer.PartitionStuck, Lag: 40},
		},
		RetryTopics: []consumer.DeadLetterTopic{
			{Topic: "orders.retry.5s", Source: "orders", Ready: true},
			{Topic: "orders.retry.1m", Source: "orders", Ready: true},
		},
		Topics: []consumer.Topic{{Topic: "orders", Partitions: 4}, {Topic: "payments", Partitions: 2}, {Topic: "refunds", Partitions: 1}},
	})
	want := `
# HELP antidote_healthy_lag Records of a source topic waiting to be handled: the lag of its assigned partitions that are not stuck (unknown lag counts 0); retry-tier topics are left out. What an autoscaler should scale on.
# TYPE antidote_healthy_lag gauge
antidote_healthy_lag{topic="orders"} 120
antidote_healthy_lag{topic="payments"} 3
antidote_healthy_lag{topic="refunds"} 0
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "antidote_healthy_lag"); err != nil {
		t.Fatal(err)
	}
	parts := `
# HELP antidote_topic_partitions Partitions of a source topic of a consumer group, from the metadata (read every 5 s): more members than that leave some idle, so an autoscaler caps replicas at it. Absent for a share group.
# TYPE antidote_topic_partitions gauge
antidote_topic_partitions{topic="orders"} 4
antidote_topic_partitions{topic="payments"} 2
antidote_topic_partitions{topic="refunds"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(parts), "antidote_topic_partitions"); err != nil {
		t.Fatal(err)
	}
	// The per-partition lag still shows every partition, stuck and tier ones included.
	if n, err := testutil.GatherAndCount(reg, "antidote_partition_lag"); err != nil || n != 8 {
		t.Fatalf("antidote_partition_lag: %d series (%v); want 8", n, err)
	}
}

// TestShareExposition: a share-group member's acknowledgements, delivery
// counts and group state.
func TestShareExposition(t *testing.T) {
	reg := prometheus.NewPedanticRegistry()
	m, err := New(reg)
	if err != nil {
		t.Fatal(err)
	}
	pe := consumer.PartitionEvent{Topic: "jobs", Partition: 0}
	for _, n := range []int32{1, 1, 1, 2, 5} {
		m.RecordAcquired(consumer.AcquiredEvent{PartitionEvent: pe, DeliveryCount: n})
	}
	for _, a := range []consumer.Ack{consumer.AckAccept, consumer.AckAccept, consumer.AckRelease, consumer.AckRenew, consumer.AckRenew, consumer.AckRenew} {
		m.RecordAcknowledged(consumer.AckEvent{PartitionEvent: pe, Ack: a})
	}
	m.RecordSettled(consumer.SettledEvent{PartitionEvent: pe, Outcome: consumer.OutcomeReleased, Stage: "process", Class: failure.ClassTransient})
	m.Watch(fixedStats{Running: true, Ready: true, ShareGroup: &consumer.ShareGroupState{Group: "workers", DeliveryLimit: 5, Held: 3,
		Problems: []string{"the broker's dead-letter topic dlq.x does not exist"}}})
	want := `
# HELP antidote_share_acknowledgements_total Acknowledgements a share-group member sent, by topic and ack (accept: processed, dead-lettered or skipped; release: for another delivery; renew: a lock extended while a record is retried in place).
# TYPE antidote_share_acknowledgements_total counter
antidote_share_acknowledgements_total{ack="accept",topic="jobs"} 2
antidote_share_acknowledgements_total{ack="release",topic="jobs"} 1
antidote_share_acknowledgements_total{ack="renew",topic="jobs"} 3
# HELP antidote_share_delivery_count Delivery counts of the records a share-group member acquired, by topic: 1 for a first delivery; more for a record released, or held by a member that stopped or lost its lock.
# TYPE antidote_share_delivery_count histogram
antidote_share_delivery_count_bucket{topic="jobs",le="1"} 3
antidote_share_delivery_count_bucket{topic="jobs",le="2"} 4
antidote_share_delivery_count_bucket{topic="jobs",le="3"} 4
antidote_share_delivery_count_bucket{topic="jobs",le="4"} 4
antidote_share_delivery_count_bucket{topic="jobs",le="5"} 5
antidote_share_delivery_count_bucket{topic="jobs",le="6"} 5
antidote_share_delivery_count_bucket{topic="jobs",le="8"} 5
antidote_share_delivery_count_bucket{topic="jobs",le="10"} 5
antidote_share_delivery_count_bucket{topic="jobs",le="+Inf"} 5
antidote_share_delivery_count_sum{topic="jobs"} 10
antidote_share_delivery_count_count{topic="jobs"} 5
# HELP antidote_share_delivery_limit The delivery limit of a share-group member's group, as in use (read from the cluster, or Share.DeliveryLimit); absent for a consumer group.
# TYPE antidote_share_delivery_limit gauge
antidote_share_delivery_limit{group="workers"} 5
# HELP antidote_share_held_records Records of a share-group member's poll that have no ACCEPT or RELEASE yet; absent for a consumer group.
# TYPE antidote_share_held_records gauge
antidote_share_held_records{group="workers"} 3
# HELP antidote_share_setup_problems Problems found in a share group's setup when the member started (a broker dead-letter topic that loses records, renewal turned off; see Stats.ShareGroup.Problems): alert above 0. Absent for a consumer group.
# TYPE antidote_share_setup_problems gauge
antidote_share_setup_problems{group="workers"} 1
# HELP antidote_records_total Records settled, by topic, failure stage, failure class and outcome (processed, dead-lettered, skipped, halted, forwarded, released). Stage and class are empty for processed records.
# TYPE antidote_records_total counter
antidote_records_total{class="transient",outcome="released",stage="process",topic="jobs"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "antidote_share_acknowledgements_total", "antidote_share_delivery_count",
		"antidote_share_delivery_limit", "antidote_share_held_records", "antidote_share_setup_problems", "antidote_records_total"); err != nil {
		t.Fatal(err)
	}
	if problems, err := testutil.GatherAndLint(reg); err != nil || len(problems) > 0 {
		t.Fatalf("lint: %v %v", problems, err)
	}
}
