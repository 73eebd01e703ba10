package prom_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kprom"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/metrics/prom"
	"github.com/antidote-kafka/antidote/serde"
)

const token = "metrics-test-token"

type order struct {
	ID     int    `json:"id"`
	Status string `json:"status"`
}

// scrape GETs /metrics over HTTP and parses it with the Prometheus text
// parser.
func scrape(t *testing.T, base string) map[string]*dto.MetricFamily {
	t.Helper()
	req, _ := http.NewRequest("GET", base+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set("Accept", "text/plain; version=0.0.4")
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("GET /metrics = %d %s", resp.StatusCode, b)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parsing /metrics: %v", err)
	}
	return fams
}

// sum adds the values (counter, gauge, or histogram sample count) of the
// family's series whose labels include want.
func sum(fams map[string]*dto.MetricFamily, name string, want map[string]string) (float64, int) {
	var v float64
	n := 0
	f := fams[name]
	if f == nil {
		return 0, 0
	}
series:
	for _, m := range f.Metric {
		have := map[string]string{}
		for _, l := range m.Label {
			have[l.GetName()] = l.GetValue()
		}
		for k, want := range want {
			if have[k] != want {
				continue series
			}
		}
		n++
		switch {
		case m.Counter != nil:
			v += m.Counter.GetValue()
		case m.Gauge != nil:
			v += m.Gauge.GetValue()
		case m.Histogram != nil:
			v += float64(m.Histogram.GetSampleCount())
		}
	}
	return v, n
}

func post(t *testing.T, url string) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, nil)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("POST %s = %d %s", url, resp.StatusCode, b)
	}
}

// TestIntegrationMetrics runs a consumer over poison pills, scrapes
// /metrics through the admin handler over real HTTP, and checks the counts
// against Stats.
func TestIntegrationMetrics(t *testing.T) {
	c := kafkatest.New(t)
	topic := c.Topic(t, "metrics", 2)
	pcl := c.Client(t, kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	good := func(id int) []byte { b, _ := json.Marshal(order{ID: id, Status: "new"}); return b }
	var recs []*kgo.Record
	for i := range 10 {
		recs = append(recs, &kgo.Record{Partition: 0, Value: good(i)})
	}
	recs = append(recs,
		&kgo.Record{Partition: 0, Value: []byte("\x00\xffgarbage")},           // deserialize-value, permanent: dead-lettered
		&kgo.Record{Partition: 0, Value: []byte(`{"id":100,"status":"bad"}`)}, // rejected by the handler: dead-lettered
		&kgo.Record{Partition: 0, Value: []byte(`{"id":101,"status":"flaky"}`)},
		&kgo.Record{Partition: 0, Value: good(11)},
		&kgo.Record{Partition: 1, Value: []byte(`{"id":200,"status":"down"}`)}, // fails for ever: stuck
		&kgo.Record{Partition: 1, Value: good(201)},
	)
	for _, r := range recs {
		r.Topic = topic
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := pcl.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}

	reg := prometheus.NewRegistry()
	m, err := prom.New(reg)
	if err != nil {
		t.Fatal(err)
	}
	client := kprom.NewMetrics("antidote", kprom.Subsystem("kafka"), kprom.Registerer(reg))
	var flaky atomic.Bool
	cons, err := consumer.New(consumer.Config[string, order]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: kafkatest.UniqueName("g"),
		Value: serde.JSON[order](),
		Handler: func(_ context.Context, r *consumer.Record[string, order]) error {
			switch r.Value.Status {
			case "bad":
				return failure.Permanent(&failure.ValidationError{Field: "status", Reason: "unknown"})
			case "flaky":
				if flaky.CompareAndSwap(false, true) {
					return failure.Transient(errors.New("payment service: 503"))
				}
			case "down":
				return failure.Transient(errors.New("inventory database down"))
			}
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.Fixed(100 * time.Millisecond)},
		}},
		Hooks:  m,
		Logger: kafkatest.Logger(t), CommitInterval: 100 * time.Millisecond,
		ClientOpts: []kgo.Opt{
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.FetchMaxWait(100 * time.Millisecond),
			kgo.WithHooks(client),
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	m.Watch(cons)
	runCtx, stop := context.WithCancel(context.Background())
	runErr := make(chan error, 1)
	go func() { runErr <- cons.Run(runCtx) }()
	defer func() {
		stop()
		select {
		case err := <-runErr:
			if err != nil {
				t.Errorf("Run = %v", err)
			}
		case <-time.After(60 * time.Second):
			t.Error("Run did not return within 60s")
		}
	}()

	h, err := admin.New(admin.Config{Consumers: map[string]admin.Consumer{"orders": cons}, Token: token,
		Metrics: promhttp.HandlerFor(reg, promhttp.HandlerOpts{}), Logger: kafkatest.Logger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := h.Listen("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srvCtx, srvStop := context.WithCancel(context.Background())
	defer srvStop()
	go func() { _ = h.Serve(srvCtx, ln) }()
	base := "http://" + ln.Addr().String()

	lag := func(s consumer.Stats, part int32) int64 {
		for _, p := range s.Partitions {
			if p.Topic == topic && p.Partition == part {
				return p.Lag
			}
		}
		return -2
	}
	var last consumer.Stats
	defer func() {
		if t.Failed() {
			b, _ := json.Marshal(last)
			t.Logf("last Stats: %s", b)
		}
	}()
	kafkatest.WaitFor(t, 60*time.Second, "partition 0 settled and committed, partition 1 stuck", func() bool {
		s := cons.Stats()
		last = s
		return s.Processed == 12 && s.DeadLettered == 2 && len(s.Stuck) == 1 && lag(s, 0) == 0
	})

	before := cons.Stats()
	fams := scrape(t, base)
	after := cons.Stats()
	between := func(what string, got float64, lo, hi uint64) {
		t.Helper()
		if got < float64(lo) || got > float64(hi) {
			t.Errorf("%s = %v; Stats says %d..%d", what, got, lo, hi)
		}
	}
	exact := func(what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v; want %v", what, got, want)
		}
	}
	v, _ := sum(fams, "antidote_records_total", map[string]string{"topic": topic, "outcome": "processed"})
	between("records processed", v, before.Processed, after.Processed)
	v, _ = sum(fams, "antidote_records_total", map[string]string{"outcome": "dead-lettered"})
	between("records dead-lettered", v, before.DeadLettered, after.DeadLettered)
	for _, k := range []consumer.OutcomeKey{
		{Stage: "deserialize-value", Class: failure.ClassPermanent, Outcome: consumer.OutcomeDeadLettered},
		{Stage: "process", Class: failure.ClassPermanent, Outcome: consumer.OutcomeDeadLettered},
	} {
		v, n := sum(fams, "antidote_records_total", map[string]string{"stage": string(k.Stage), "class": k.Class.String(), "outcome": string(k.Outcome)})
		if n != 1 {
			t.Errorf("%v: %d series; want 1", k, n)
		}
		between(fmt.Sprintf("records %v", k), v, before.Outcomes[k], after.Outcomes[k])
	}
	v, _ = sum(fams, "antidote_retries_total", map[string]string{"topic": topic, "stage": "process", "class": "transient"})
	between("retries", v, before.Retried, after.Retried)
	v, _ = sum(fams, "antidote_records_consumed_total", nil)
	between("records consumed", v, before.Consumed, after.Consumed)
	v, _ = sum(fams, "antidote_dead_letter_writes_total", map[string]string{"topic": topic, "result": "ok"})
	exact("dead-letter writes ok", v, float64(before.DeadLettered))
	v, _ = sum(fams, "antidote_dead_letter_write_duration_seconds", map[string]string{"topic": topic, "result": "ok"})
	exact("dead-letter write latencies observed", v, float64(before.DeadLettered))
	v, _ = sum(fams, "antidote_handler_duration_seconds", map[string]string{"topic": topic, "result": "ok"})
	exact("handler calls ok", v, float64(before.Processed))
	// Handler errors: the rejected order, and every try of the flaky and
	// the stuck ones (each try but the last of a retried record is a retry).
	v, _ = sum(fams, "antidote_handler_duration_seconds", map[string]string{"topic": topic, "result": "error"})
	between("handler calls failed", v, 1+before.Retried, 2+after.Retried)

	exact("stuck partition 1", gauge(t, fams, "antidote_partition_stuck", topic, "1"), 1)
	exact("stuck partition 0", gauge(t, fams, "antidote_partition_stuck", topic, "0"), 0)
	if v, n := sum(fams, "antidote_partition_stuck_seconds", map[string]string{"topic": topic, "partition": "1", "reason": string(consumer.StuckRetrying)}); n != 1 || v < 0 {
		t.Errorf("antidote_partition_stuck_seconds of partition 1: %d series, %v", n, v)
	}
	if _, n := sum(fams, "antidote_partition_stuck_seconds", map[string]string{"partition": "0"}); n != 0 {
		t.Errorf("antidote_partition_stuck_seconds of the flowing partition 0: %d series; want none", n)
	}
	exact("lag of partition 0", gauge(t, fams, "antidote_partition_lag", topic, "0"), float64(lag(before, 0)))
	if l := lag(before, 1); l >= 0 {
		exact("lag of partition 1", gauge(t, fams, "antidote_partition_lag", topic, "1"), float64(l))
	} else if _, n := sum(fams, "antidote_partition_lag", map[string]string{"topic": topic, "partition": "1"}); n != 0 {
		t.Errorf("lag of partition 1 (nothing committed yet): %d series; want none", n)
	}
	v, _ = sum(fams, "antidote_ready", nil)
	exact("ready", v, 1)
	v, _ = sum(fams, "antidote_retry_enabled", nil)
	exact("retry enabled", v, 1)
	v, _ = sum(fams, "antidote_brokers_reachable", nil)
	exact("brokers reachable", v, 1)
	if v, _ := sum(fams, "antidote_kafka_read_bytes_total", nil); v <= 0 {
		t.Errorf("kprom's antidote_kafka_read_bytes_total = %v; want the client's metrics beside ours", v)
	}

	// Pause partition 0 and skip the stuck record over HTTP: the metrics follow.
	post(t, fmt.Sprintf("%s/partitions/%s/0/pause", base, topic))
	post(t, fmt.Sprintf("%s/partitions/%s/1/skip?offset=0", base, topic))
	post(t, base+"/retry?enabled=off")
	kafkatest.WaitFor(t, 60*time.Second, "the record after the skipped one", func() bool { return cons.Stats().Processed == 13 })
	fams = scrape(t, base)
	v, _ = sum(fams, "antidote_records_total", map[string]string{"outcome": "skipped", "stage": "process", "class": "transient"})
	exact("records skipped", v, 1)
	exact("stuck partition 1 after the skip", gauge(t, fams, "antidote_partition_stuck", topic, "1"), 0)
	if v, n := sum(fams, "antidote_partition_paused", map[string]string{"topic": topic, "partition": "0", "reason": string(consumer.PauseOperator)}); n != 1 || v != 1 {
		t.Errorf("antidote_partition_paused of partition 0 = %v (%d series); want 1, reason operator", v, n)
	}
	v, _ = sum(fams, "antidote_retry_enabled", nil)
	exact("retry enabled after the kill switch", v, 0)
}

// gauge is the value of a gauge series of topic/partition (NaN-free: a
// missing series fails t).
func gauge(t *testing.T, fams map[string]*dto.MetricFamily, name, topic, part string) float64 {
	t.Helper()
	v, n := sum(fams, name, map[string]string{"topic": topic, "partition": part})
	if n != 1 {
		t.Errorf("%s{topic=%q,partition=%q}: %d series; want 1", name, topic, part, n)
	}
	return v
}
