package prom

import (
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/antidote-kafka/antidote/consumer"
)

// StatsSource is what [Metrics.Watch] reads at scrape time.
// *consumer.Consumer satisfies it for every key and value type.
type StatsSource interface {
	Stats() consumer.Stats
}

var _ StatsSource = (*consumer.Consumer[string, string])(nil)

// Metrics turns one consumer's events into Prometheus metrics: it is the
// consumer's [consumer.Hooks] (set it as Config.Hooks) and a
// prometheus.Collector that reads the consumer's Stats at scrape time (see
// [Metrics.Watch]). Create it with [New]. Its methods are safe for
// concurrent use and never block.
type Metrics struct {
	consumer.NopHooks

	records      *prometheus.CounterVec
	retries      *prometheus.CounterVec
	handler      *prometheus.HistogramVec
	dlqWrites    *prometheus.CounterVec
	dlqLatency   *prometheus.HistogramVec
	shareAcks    *prometheus.CounterVec
	deliveries   *prometheus.HistogramVec
	source       atomic.Pointer[StatsSource]
	now          func() time.Time
	consumedDesc *prometheus.Desc
	gauges       gaugeDescs
}

var (
	_ consumer.Hooks       = (*Metrics)(nil)
	_ prometheus.Collector = (*Metrics)(nil)
)

// Results of a handler call or a dead-letter write (the label result).
const (
	ResultOK    = "ok"
	ResultError = "error"
)

// DurationBuckets are the buckets of the duration histograms, in seconds:
// from half a millisecond to 10 seconds.
var DurationBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10}

type gaugeDescs struct {
	running, ready, retryEnabled, brokers *prometheus.Desc
	bufRecords, bufBytes                  *prometheus.Desc
	stuck, stuckSeconds, paused, lag      *prometheus.Desc
	healthyLag                            *prometheus.Desc
	topicPartitions                       *prometheus.Desc
	dependency                            *prometheus.Desc
	flood, floodTrips                     *prometheus.Desc
	transactions                          *prometheus.Desc
	shareLimit, shareHeld, shareProblems  *prometheus.Desc
}

// DeliveryBuckets are the buckets of antidote_share_delivery_count: a
// share group's delivery counts, 1 for a first delivery (Kafka's limit is
// 2 to 10).
var DeliveryBuckets = []float64{1, 2, 3, 4, 5, 6, 8, 10}

// New creates the metrics and registers them on reg (wrap it with
// prometheus.WrapRegistererWith to tell several consumers of a process
// apart). It returns reg's error, for example when the metrics are already
// registered there.
func New(reg prometheus.Registerer) (*Metrics, error) {
	tp := []string{"topic", "partition"}
	m := &Metrics{
		records: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "antidote_records_total",
			Help: "Records settled, by topic, failure stage, failure class and outcome (processed, dead-lettered, skipped, halted, forwarded, released). Stage and class are empty for processed records.",
		}, []string{"topic", "stage", "class", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "antidote_retries_total",
			Help: "Retries in place (one per wait before another try), by topic, failure stage and class.",
		}, []string{"topic", "stage", "class"}),
		handler: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "antidote_handler_duration_seconds",
			Help:    "Duration of handler calls, by topic and result (ok, error).",
			Buckets: DurationBuckets,
		}, []string{"topic", "result"}),
		dlqWrites: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "antidote_dead_letter_writes_total",
			Help: "Dead-letter write attempts, by source topic and result (ok: acknowledged, error: failed and retried).",
		}, []string{"topic", "result"}),
		dlqLatency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "antidote_dead_letter_write_duration_seconds",
			Help:    "Latency of dead-letter write attempts, by source topic and result (ok, error).",
			Buckets: DurationBuckets,
		}, []string{"topic", "result"}),
		shareAcks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "antidote_share_acknowledgements_total",
			Help: "Acknowledgements a share-group member sent, by topic and ack (accept: processed, dead-lettered or skipped; release: for another delivery; renew: a lock extended while a record is retried in place).",
		}, []string{"topic", "ack"}),
		deliveries: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "antidote_share_delivery_count",
			Help:    "Delivery counts of the records a share-group member acquired, by topic: 1 for a first delivery; more for a record released, or held by a member that stopped or lost its lock.",
			Buckets: DeliveryBuckets,
		}, []string{"topic"}),
		now:          time.Now,
		consumedDesc: prometheus.NewDesc("antidote_records_consumed_total", "Records taken from fetches (each once, however often it is retried).", nil, nil),
		gauges: gaugeDescs{
			running:         prometheus.NewDesc("antidote_running", "1 while the consumer runs.", nil, nil),
			ready:           prometheus.NewDesc("antidote_ready", "1 while the consumer is ready: running, with partitions, not halted.", nil, nil),
			retryEnabled:    prometheus.NewDesc("antidote_retry_enabled", "The retry kill switch: 1 while retrying is on.", nil, nil),
			brokers:         prometheus.NewDesc("antidote_brokers_reachable", "1 while the Kafka cluster answers.", nil, nil),
			flood:           prometheus.NewDesc("antidote_flood_guard_tripped", "1 while the flood guard holds the consumer (too many records would be dead-lettered), else 0.", nil, nil),
			floodTrips:      prometheus.NewDesc("antidote_flood_guard_trips_total", "Times the flood guard tripped.", nil, nil),
			transactions:    prometheus.NewDesc("antidote_transactions_total", "Transactions of the exactly-once mode, by result (committed, aborted).", []string{"result"}, nil),
			bufRecords:      prometheus.NewDesc("antidote_buffered_records", "Records held by the assigned partitions (fetched, not yet settled).", nil, nil),
			bufBytes:        prometheus.NewDesc("antidote_buffered_bytes", "Bytes held by the assigned partitions.", nil, nil),
			stuck:           prometheus.NewDesc("antidote_partition_stuck", "1 while an assigned partition cannot move past a record (retrying it, or waiting for its dead letter), else 0.", tp, nil),
			stuckSeconds:    prometheus.NewDesc("antidote_partition_stuck_seconds", "How long a stuck partition has been stuck on its record, by reason (retrying, dead-letter); present only while stuck.", append(tp, "reason"), nil),
			paused:          prometheus.NewDesc("antidote_partition_paused", "1 while the fetching of a partition is paused, by reason (stuck, buffer-full, operator, retry-due, retry-parked-full); present only while paused.", append(tp, "reason"), nil),
			lag:             prometheus.NewDesc("antidote_partition_lag", "Records of an assigned partition not yet committed: high watermark minus committed offset; absent while unknown.", tp, nil),
			healthyLag:      prometheus.NewDesc("antidote_healthy_lag", "Records of a source topic waiting to be handled: the lag of its assigned partitions that are not stuck (unknown lag counts 0); retry-tier topics are left out. What an autoscaler should scale on.", []string{"topic"}, nil),
			topicPartitions: prometheus.NewDesc("antidote_topic_partitions", "Partitions of a source topic of a consumer group, from the metadata (read every 5 s): more members than that leave some idle, so an autoscaler caps replicas at it. Absent for a share group.", []string{"topic"}, nil),
			shareLimit:      prometheus.NewDesc("antidote_share_delivery_limit", "The delivery limit of a share-group member's group, as in use (read from the cluster, or Share.DeliveryLimit); absent for a consumer group.", []string{"group"}, nil),
			shareHeld:       prometheus.NewDesc("antidote_share_held_records", "Records of a share-group member's poll that have no ACCEPT or RELEASE yet; absent for a consumer group.", []string{"group"}, nil),
			shareProblems:   prometheus.NewDesc("antidote_share_setup_problems", "Problems found in a share group's setup when the member started (a broker dead-letter topic that loses records, renewal turned off; see Stats.ShareGroup.Problems): alert above 0. Absent for a consumer group.", []string{"group"}, nil),
			dependency:      prometheus.NewDesc("antidote_dependency_state", "1 for the current state of each dependency of Config.Dependencies (for example a schema registry's circuit breaker: closed, open, half-open).", []string{"dependency", "state"}, nil),
		},
	}
	if err := reg.Register(m); err != nil {
		return nil, err
	}
	return m, nil
}

// Watch makes the collector read src's Stats at each scrape: the gauges and
// antidote_records_consumed_total come from it. Until Watch is called (the
// consumer is created after its hooks), they are absent. Call it again to
// watch another consumer.
func (m *Metrics) Watch(src StatsSource) { m.source.Store(&src) }

// RecordSettled counts a settled record.
func (m *Metrics) RecordSettled(e consumer.SettledEvent) {
	stage, class := string(e.Stage), e.Class.String()
	if e.Outcome == consumer.OutcomeProcessed {
		stage, class = "", ""
	}
	m.records.WithLabelValues(e.Topic, stage, class, string(e.Outcome)).Inc()
}

// RecordRetried counts a retry.
func (m *Metrics) RecordRetried(e consumer.RetryEvent) {
	m.retries.WithLabelValues(e.Topic, string(e.Stage), e.Class.String()).Inc()
}

// HandlerDone observes a handler call.
func (m *Metrics) HandlerDone(e consumer.HandlerEvent) {
	m.handler.WithLabelValues(e.Topic, result(e.Err)).Observe(e.Duration.Seconds())
}

// DeadLetterWritten counts and observes a dead-letter write attempt.
func (m *Metrics) DeadLetterWritten(e consumer.WriteEvent) {
	r := result(e.Err)
	m.dlqWrites.WithLabelValues(e.Topic, r).Inc()
	m.dlqLatency.WithLabelValues(e.Topic, r).Observe(e.Latency.Seconds())
}

// RecordAcquired observes the delivery count of a record a share-group
// member acquired.
func (m *Metrics) RecordAcquired(e consumer.AcquiredEvent) {
	m.deliveries.WithLabelValues(e.Topic).Observe(float64(e.DeliveryCount))
}

// RecordAcknowledged counts an acknowledgement of a share-group member.
func (m *Metrics) RecordAcknowledged(e consumer.AckEvent) {
	m.shareAcks.WithLabelValues(e.Topic, string(e.Ack)).Inc()
}

func result(err error) string {
	if err != nil {
		return ResultError
	}
	return ResultOK
}

// Describe implements prometheus.Collector.
func (m *Metrics) Describe(ch chan<- *prometheus.Desc) {
	m.records.Describe(ch)
	m.retries.Describe(ch)
	m.handler.Describe(ch)
	m.dlqWrites.Describe(ch)
	m.dlqLatency.Describe(ch)
	m.shareAcks.Describe(ch)
	m.deliveries.Describe(ch)
	g := m.gauges
	for _, d := range []*prometheus.Desc{m.consumedDesc, g.running, g.ready, g.retryEnabled, g.brokers,
		g.bufRecords, g.bufBytes, g.stuck, g.stuckSeconds, g.paused, g.lag, g.healthyLag, g.topicPartitions, g.dependency, g.flood, g.floodTrips, g.transactions,
		g.shareLimit, g.shareHeld, g.shareProblems} {
		ch <- d
	}
}

// Collect implements prometheus.Collector: the counters and histograms
// of the hooks, and the gauges of the watched consumer's Stats.
func (m *Metrics) Collect(ch chan<- prometheus.Metric) {
	m.records.Collect(ch)
	m.retries.Collect(ch)
	m.handler.Collect(ch)
	m.dlqWrites.Collect(ch)
	m.dlqLatency.Collect(ch)
	m.shareAcks.Collect(ch)
	m.deliveries.Collect(ch)
	src := m.source.Load()
	if src == nil {
		return
	}
	s := (*src).Stats()
	g := m.gauges
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	ch <- prometheus.MustNewConstMetric(m.consumedDesc, prometheus.CounterValue, float64(s.Consumed))
	gauge(g.running, bit(s.Running))
	gauge(g.ready, bit(s.Ready))
	gauge(g.retryEnabled, bit(s.RetryEnabled))
	gauge(g.brokers, bit(s.Brokers.Reachable))
	gauge(g.flood, bit(s.Flood != nil))
	ch <- prometheus.MustNewConstMetric(g.floodTrips, prometheus.CounterValue, float64(s.FloodTrips))
	if s.TransactionsCommitted+s.TransactionsAborted > 0 {
		ch <- prometheus.MustNewConstMetric(g.transactions, prometheus.CounterValue, float64(s.TransactionsCommitted), "committed")
		ch <- prometheus.MustNewConstMetric(g.transactions, prometheus.CounterValue, float64(s.TransactionsAborted), "aborted")
	}
	gauge(g.bufRecords, float64(s.BufferedRecords))
	gauge(g.bufBytes, float64(s.BufferedBytes))
	now := m.now()
	// With keyed concurrency a partition may wait on several records for
	// one reason: the series shows the longest wait.
	type stuckKey struct {
		topic     string
		partition int32
		reason    string
	}
	longest := map[stuckKey]float64{}
	var order []stuckKey
	for _, st := range s.Stuck {
		k := stuckKey{st.Topic, st.Partition, string(st.Reason)}
		secs := max(now.Sub(st.Since).Seconds(), 0)
		if old, seen := longest[k]; !seen {
			order = append(order, k)
			longest[k] = secs
		} else {
			longest[k] = max(old, secs)
		}
	}
	for _, k := range order {
		gauge(g.stuckSeconds, longest[k], k.topic, strconv.Itoa(int(k.partition)), k.reason)
	}
	for _, p := range s.Partitions {
		part := strconv.Itoa(int(p.Partition))
		gauge(g.stuck, bit(p.State == consumer.PartitionStuck), p.Topic, part)
		if p.Paused != "" {
			gauge(g.paused, 1, p.Topic, part, string(p.Paused))
		}
		if p.Lag >= 0 {
			gauge(g.lag, float64(p.Lag), p.Topic, part)
		}
	}
	for _, tl := range healthyLag(s) {
		gauge(g.healthyLag, float64(tl.Lag), tl.Topic)
	}
	for _, t := range s.Topics {
		gauge(g.topicPartitions, float64(t.Partitions), t.Topic)
	}
	for name, state := range s.Dependencies {
		gauge(g.dependency, 1, name, state)
	}
	if sg := s.ShareGroup; sg != nil {
		gauge(g.shareLimit, float64(sg.DeliveryLimit), sg.Group)
		gauge(g.shareHeld, float64(sg.Held), sg.Group)
		gauge(g.shareProblems, float64(len(sg.Problems)), sg.Group)
	}
}

// topicLag is the healthy lag of one topic (see healthyLag).
type topicLag struct {
	Topic string
	Lag   int64
}

// healthyLag returns, for each source topic with assigned partitions, in
// the order of s.Partitions, the records waiting to be handled: the sum of
// the lag of its partitions that are not stuck. A stuck partition's lag
// waits on one record, however many consumers there are, and a retry
// tier's records wait for their delay, so neither would go faster with
// more replicas: they are left out (their lag stays in
// antidote_partition_lag). An unknown or negative lag counts 0. This is
// the value of antidote_healthy_lag.
func healthyLag(s consumer.Stats) []topicLag {
	tiers := make(map[string]bool, len(s.RetryTopics))
	for _, t := range s.RetryTopics {
		tiers[t.Topic] = true
	}
	var out []topicLag
	at := map[string]int{}
	for _, p := range s.Partitions {
		if tiers[p.Topic] {
			continue
		}
		i, seen := at[p.Topic]
		if !seen {
			i = len(out)
			at[p.Topic] = i
			out = append(out, topicLag{Topic: p.Topic})
		}
		if p.State != consumer.PartitionStuck && p.Lag > 0 {
			out[i].Lag += p.Lag
		}
	}
	return out
}

func bit(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
