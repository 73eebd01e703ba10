package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/serde"
)

// Options configure one benchmark run.
type Options struct {
	// Brokers are the seed brokers; empty starts an in-process kfake cluster.
	Brokers      []string
	Records      int
	Partitions   int
	ValueSize    int
	Poison       []float64
	Rounds       int
	FetchMaxWait time.Duration
	// Linger, when not negative, is passed to the Antidote client as
	// kgo.ProducerLinger (it paces dead-letter writes). Negative keeps the
	// consumer's default (no linger).
	Linger  time.Duration
	Seed    uint64
	Verbose bool
	// Progress receives progress lines; nil discards them.
	Progress io.Writer
}

// Window describes what the headline records/s measure.
const Window = "first record fetched -> last record settled (group join excluded); " +
	"'incl. join' columns: consumer created -> last record settled"

// Result is the outcome of a run.
type Result struct {
	Cluster       string   `json:"cluster"` // "kafka" or "kfake"
	Brokers       []string `json:"brokers"`
	Records       int      `json:"records"`
	Partitions    int      `json:"partitions"`
	ValueSize     int      `json:"value_size"`
	AvgValueBytes float64  `json:"avg_value_bytes"`
	Rounds        int      `json:"rounds"`
	Seed          uint64   `json:"seed"`
	FetchMaxWait  string   `json:"fetch_max_wait"`
	Linger        string   `json:"antidote_producer_linger"`
	GOMAXPROCS    int      `json:"gomaxprocs"`
	Window        string   `json:"window"`
	Rows          []Row    `json:"rows"`
}

// Row is the result of one poison ratio.
type Row struct {
	Poison float64 `json:"poison"`
	Pills  int     `json:"pills"`
	Topic  string  `json:"topic"`
	// Best records/s of each consumer over its rounds, and their ratio.
	Bare     float64 `json:"bare_records_per_sec"`
	Antidote float64 `json:"antidote_records_per_sec"`
	Ratio    float64 `json:"ratio"`
	// The same, with group join included in the window.
	BareInclJoin     float64 `json:"bare_records_per_sec_incl_join"`
	AntidoteInclJoin float64 `json:"antidote_records_per_sec_incl_join"`
	RatioInclJoin    float64 `json:"ratio_incl_join"`
	// Target is the design target for Ratio (0: none for this poison ratio).
	Target float64 `json:"target"`
	Pass   bool    `json:"pass"`
	// Complete is false for the row a run stopped in (error or timeout).
	Complete bool `json:"complete"`
	// DLQRecords is the number of records in the dead-letter topic after
	// every Antidote round (pills x rounds when each pill was dead-lettered
	// once per round).
	DLQRecords int64 `json:"dlq_records"`
	Runs       []Run `json:"runs"`
}

// Run is one timed consumer run.
type Run struct {
	Consumer string `json:"consumer"` // "bare" or "antidote"
	Round    int    `json:"round"`
	Group    string `json:"group"`
	// Seconds from the first fetched record to the last settled record, and
	// from the consumer's creation to the last settled record.
	Seconds         float64 `json:"seconds"`
	SecondsInclJoin float64 `json:"seconds_incl_join"`
	RecordsPerSec   float64 `json:"records_per_sec"`
	RecordsPerSecIJ float64 `json:"records_per_sec_incl_join"`
	// Fetched counts records in the fetch batches the client read (more
	// than the record count when data is fetched again).
	Fetched int64 `json:"fetched"`
	// Bare: records seen, and values that failed json.Unmarshal.
	Seen         int `json:"seen,omitempty"`
	DecodeErrors int `json:"decode_errors,omitempty"`
	// Antidote: Stats after the run.
	Processed    uint64 `json:"processed,omitempty"`
	DeadLettered uint64 `json:"dead_lettered,omitempty"`
	Skipped      uint64 `json:"skipped,omitempty"`
	DLQErrors    uint64 `json:"dlq_write_errors,omitempty"`
}

// target is the design target of antidote/bare at a poison ratio: ≥0.95 at
// 0%, ≥0.90 up to 1%, ≥0.80 up to 10%, none above.
func target(poison float64) float64 {
	switch {
	case poison <= 0:
		return 0.95
	case poison <= 0.01:
		return 0.90
	case poison <= 0.10:
		return 0.80
	}
	return 0
}

func (o *Options) validate() error {
	switch {
	case o.Records <= 0:
		return errors.New("-records must be positive")
	case o.Partitions <= 0:
		return errors.New("-partitions must be positive")
	case o.ValueSize <= 0:
		return errors.New("-value-size must be positive")
	case o.Rounds <= 0:
		return errors.New("-rounds must be positive")
	case len(o.Poison) == 0:
		return errors.New("-poison: no ratios")
	case o.FetchMaxWait <= 0:
		return errors.New("-fetch-max-wait must be positive")
	}
	for _, r := range o.Poison {
		if r < 0 || r > 1 {
			return fmt.Errorf("-poison: ratio %g is not in [0,1]", r)
		}
	}
	return nil
}

func (o *Options) logf(format string, args ...any) {
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, format+"\n", args...)
	}
}

// run is the benchmark: for each poison ratio, a fresh topic, then bare and
// Antidote consumers alternately. Topics and groups are deleted at the end,
// also after an error.
func run(ctx context.Context, o Options) (*Result, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	res := &Result{
		Cluster: "kafka", Records: o.Records, Partitions: o.Partitions, ValueSize: o.ValueSize,
		Rounds: o.Rounds, Seed: o.Seed, FetchMaxWait: o.FetchMaxWait.String(),
		Linger: "consumer default (0)", GOMAXPROCS: runtime.GOMAXPROCS(0), Window: Window,
	}
	if o.Linger >= 0 {
		res.Linger = o.Linger.String()
	}
	if len(o.Brokers) == 0 {
		fc, err := kfake.NewCluster(kfake.NumBrokers(1))
		if err != nil {
			return nil, fmt.Errorf("starting kfake: %w", err)
		}
		defer fc.Close()
		o.Brokers = fc.ListenAddrs()
		res.Cluster = "kfake"
		o.logf("no -brokers and %s unset: started an in-process kfake cluster at %s", envBrokers, strings.Join(o.Brokers, ","))
	}
	res.Brokers = o.Brokers

	admCl, err := kgo.NewClient(kgo.SeedBrokers(o.Brokers...))
	if err != nil {
		return nil, fmt.Errorf("admin client: %w", err)
	}
	defer admCl.Close()
	adm := kadm.NewClient(admCl)

	var topics, groups []string
	defer func() { cleanup(adm, topics, groups, &o) }()

	runID := uniqueSuffix()
	var valueBytes, valueCount int64
	for i, ratio := range o.Poison {
		topic := fmt.Sprintf("antidote-bench-%s-poison-%s", runID, strings.ReplaceAll(strconv.FormatFloat(ratio*100, 'f', -1, 64), ".", "_"))
		dlq := topic + ".dlq"
		for _, t := range []string{topic, dlq} {
			if err := createTopic(ctx, adm, t, int32(o.Partitions)); err != nil {
				return res, err
			}
			topics = append(topics, t)
		}
		ds := newDataset(o.Seed, uint64(i), o.Records, o.ValueSize, ratio)
		row := Row{Poison: ratio, Pills: ds.pills, Topic: topic, Target: target(ratio)}
		o.logf("poison %g%%: producing %d records (%d poison pills) to %s", ratio*100, o.Records, ds.pills, topic)
		start := time.Now()
		var n int64
		pprof.Do(ctx, pprof.Labels("phase", "produce"), func(ctx context.Context) {
			n, err = produce(ctx, &o, topic, ds)
		})
		if err != nil {
			return res, err
		}
		if got, err := countRecords(ctx, adm, topic); err != nil {
			return res, err
		} else if got != int64(o.Records) {
			return res, fmt.Errorf("produce to %s: the topic holds %d records, want %d", topic, got, o.Records)
		}
		valueBytes += n
		valueCount += int64(o.Records)
		res.AvgValueBytes = float64(valueBytes) / float64(valueCount)
		o.logf("poison %g%%: produced in %v", ratio*100, time.Since(start).Round(time.Millisecond))

		for round := 1; round <= o.Rounds; round++ {
			for _, kind := range []string{"bare", "antidote"} {
				group := fmt.Sprintf("%s-%s-r%d", topic, kind, round)
				groups = append(groups, group)
				var r Run
				pprof.Do(ctx, pprof.Labels("consumer", kind), func(ctx context.Context) {
					if kind == "bare" {
						r, err = runBare(ctx, &o, topic, group)
					} else {
						r, err = runAntidote(ctx, &o, topic, group)
					}
				})
				r.Consumer, r.Round, r.Group = kind, round, group
				row.Runs = append(row.Runs, r)
				if err != nil {
					res.Rows = append(res.Rows, row)
					return res, fmt.Errorf("poison %g%%, %s round %d: %w", ratio*100, kind, round, err)
				}
				o.logf("poison %g%%: %-8s round %d: %8.0f records/s (%.2fs; %.2fs incl. join; fetched %d)",
					ratio*100, kind, round, r.RecordsPerSec, r.Seconds, r.SecondsInclJoin, r.Fetched)
				if kind == "bare" {
					row.Bare = max(row.Bare, r.RecordsPerSec)
					row.BareInclJoin = max(row.BareInclJoin, r.RecordsPerSecIJ)
				} else {
					row.Antidote = max(row.Antidote, r.RecordsPerSec)
					row.AntidoteInclJoin = max(row.AntidoteInclJoin, r.RecordsPerSecIJ)
				}
			}
		}
		if row.Bare > 0 {
			row.Ratio = row.Antidote / row.Bare
		}
		if row.BareInclJoin > 0 {
			row.RatioInclJoin = row.AntidoteInclJoin / row.BareInclJoin
		}
		row.Pass = row.Ratio >= row.Target
		if row.DLQRecords, err = countRecords(ctx, adm, dlq); err != nil {
			return res, err
		}
		row.Complete = true
		res.Rows = append(res.Rows, row)
	}
	return res, nil
}

// commonOpts are the client options both consumers share.
func commonOpts(o *Options, hook *fetchHook) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Brokers...),
		kgo.FetchMaxWait(o.FetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithHooks(hook),
	}
	if o.Verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(os.Stderr, kgo.LogLevelWarn, nil)))
	}
	return opts
}

// fetchHook notes when the first record is fetched and counts the records
// of the fetch batches read.
type fetchHook struct {
	first   atomic.Pointer[time.Time]
	fetched atomic.Int64
}

func (h *fetchHook) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	if m.NumRecords > 0 && h.first.Load() == nil {
		now := time.Now()
		h.first.CompareAndSwap(nil, &now)
	}
	h.fetched.Add(int64(m.NumRecords))
}

// finish fills the timing of r from the consumer's creation to end.
func (h *fetchHook) finish(r *Run, created, end time.Time, n int) {
	start := created
	if f := h.first.Load(); f != nil {
		start = *f
	}
	r.Seconds = end.Sub(start).Seconds()
	r.SecondsInclJoin = end.Sub(created).Seconds()
	r.RecordsPerSec = float64(n) / r.Seconds
	r.RecordsPerSecIJ = float64(n) / r.SecondsInclJoin
	r.Fetched = h.fetched.Load()
}

// runBare times a naive franz-go group consumer: one poll loop that
// json.Unmarshals every value and ignores the errors.
func runBare(ctx context.Context, o *Options, topic, group string) (Run, error) {
	var r Run
	hook := &fetchHook{}
	created := time.Now()
	cl, err := kgo.NewClient(append(commonOpts(o, hook), kgo.ConsumerGroup(group), kgo.ConsumeTopics(topic))...)
	if err != nil {
		return r, err
	}
	defer cl.Close()
	for r.Seen < o.Records {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			return r, fmt.Errorf("saw %d of %d records: %w", r.Seen, o.Records, context.Cause(ctx))
		}
		if fs.IsClientClosed() {
			return r, errors.New("client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			if o.Verbose {
				o.logf("bare: fetch error %s/%d: %v", t, p, err)
			}
		})
		fs.EachRecord(func(rec *kgo.Record) {
			r.Seen++
			var v Order
			if json.Unmarshal(rec.Value, &v) != nil {
				r.DecodeErrors++
			}
		})
	}
	hook.finish(&r, created, time.Now(), o.Records)
	return r, nil
}

// runAntidote times the Antidote consumer with a no-op handler and the
// default policy, until every record is processed or dead-lettered.
func runAntidote(ctx context.Context, o *Options, topic, group string) (Run, error) {
	var r Run
	hook := &fetchHook{}
	logger := slog.New(slog.DiscardHandler)
	if o.Verbose {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	opts := commonOpts(o, hook)[1:] // Brokers carries the seeds
	if o.Linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(o.Linger))
	}
	created := time.Now()
	c, err := consumer.New(consumer.Config[[]byte, Order]{
		Brokers:    o.Brokers,
		Topics:     []string{topic},
		Group:      group,
		Value:      serde.JSON[Order](),
		Handler:    func(context.Context, *consumer.Record[[]byte, Order]) error { return nil },
		DeadLetter: consumer.DeadLetterConfig{Topic: "{topic}.dlq"},
		ClientOpts: opts,
		Logger:     logger,
	})
	if err != nil {
		return r, err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()

	want := uint64(o.Records)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var end time.Time
	for end.IsZero() {
		select {
		case <-ctx.Done():
			stop()
			<-done
			s := c.Stats()
			return r, fmt.Errorf("processed %d + dead-lettered %d of %d records: %w", s.Processed, s.DeadLettered, want, context.Cause(ctx))
		case err := <-done:
			return r, fmt.Errorf("Run returned before all records were settled: %v", err)
		case <-tick.C:
			if s := c.Stats(); s.Processed+s.DeadLettered >= want {
				end = time.Now()
			}
		}
	}
	hook.finish(&r, created, end, o.Records)
	stop()
	if err := <-done; err != nil {
		return r, fmt.Errorf("Run: %w", err)
	}
	s := c.Stats()
	r.Processed, r.DeadLettered, r.Skipped, r.DLQErrors = s.Processed, s.DeadLettered, s.Skipped, s.DeadLetterWriteErrors
	return r, nil
}

// produce writes the records of ds to topic, record i to partition
// i mod partitions, and returns the total value bytes.
func produce(ctx context.Context, o *Options, topic string, ds *dataset) (int64, error) {
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(o.Brokers...),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerBatchMaxBytes(1<<20),
	)
	if err != nil {
		return 0, err
	}
	defer cl.Close()
	var (
		mu       sync.Mutex
		firstErr error
		bytes    int64
	)
	promise := func(_ *kgo.Record, err error) {
		if err != nil {
			mu.Lock()
			if firstErr == nil {
				firstErr = err
			}
			mu.Unlock()
		}
	}
	for i := 0; i < o.Records; i++ {
		k, v := ds.record(i)
		bytes += int64(len(v))
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i % o.Partitions), Key: k, Value: v}, promise)
	}
	if err := cl.Flush(ctx); err != nil {
		return 0, fmt.Errorf("produce to %s: %w", topic, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if firstErr != nil {
		return 0, fmt.Errorf("produce to %s: %w", topic, firstErr)
	}
	return bytes, nil
}

// countRecords sums the end offsets of topic (its topics are never
// compacted or truncated during a run).
func countRecords(ctx context.Context, adm *kadm.Client, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("end offsets of %s: %w", topic, err)
	}
	var n int64
	ends.Each(func(o kadm.ListedOffset) { n += o.Offset })
	return n, nil
}

// createTopic creates topic and waits until every partition has a leader.
func createTopic(ctx context.Context, adm *kadm.Client, topic string, partitions int32) error {
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := adm.CreateTopic(cctx, partitions, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return fmt.Errorf("create topic %s: %w", topic, err)
	}
	for {
		md, err := adm.Metadata(cctx, topic)
		if err == nil {
			if td, ok := md.Topics[topic]; ok && td.Err == nil && len(td.Partitions) == int(partitions) {
				ready := true
				for _, p := range td.Partitions {
					ready = ready && p.Leader >= 0 && p.Err == nil
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-cctx.Done():
			return fmt.Errorf("topic %s not ready: %w (last error: %v)", topic, cctx.Err(), err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// cleanup deletes the groups and topics of a run, bounded in time even when
// the run's context is over.
func cleanup(adm *kadm.Client, topics, groups []string, o *Options) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if len(groups) > 0 {
		if _, err := adm.DeleteGroups(ctx, groups...); err != nil {
			o.logf("cleanup: delete groups: %v", err)
		}
	}
	if len(topics) > 0 {
		resp, err := adm.DeleteTopics(ctx, topics...)
		if err == nil {
			err = resp.Error()
		}
		if err != nil {
			o.logf("cleanup: delete topics: %v", err)
		} else {
			o.logf("cleanup: deleted %d topics and %d groups", len(topics), len(groups))
		}
	}
}

func uniqueSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
