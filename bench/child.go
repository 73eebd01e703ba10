package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/serde"
)

// childEnv, set to "1", makes the bench binary run one consumer (a child
// process) instead of the benchmark: it reads a childSpec from stdin and
// writes a childResult to stdout.
const childEnv = "ANTIDOTE_BENCH_CHILD"

// childSpec is what a child process runs.
type childSpec struct {
	Consumer     string        `json:"consumer"` // "bare" or "antidote"
	Brokers      []string      `json:"brokers"`
	Topic        string        `json:"topic"`
	Group        string        `json:"group"`
	Records      int           `json:"records"`
	FetchMaxWait time.Duration `json:"fetch_max_wait"`
	Linger       time.Duration `json:"linger"`                // negative: the consumer's default
	Compression  string        `json:"compression,omitempty"` // empty: the client's default
	Verbose      bool          `json:"verbose"`
	CPUProfile   string        `json:"cpu_profile,omitempty"`
	Deadline     time.Time     `json:"deadline"`
}

// childResult is what a child process measured.
type childResult struct {
	Run
	Error string `json:"error,omitempty"`
}

// schedLatency returns the median and 99th percentile, in milliseconds, of
// the time goroutines of this process spent runnable before they ran
// (runtime/metrics /sched/latencies:seconds, since the start).
func schedLatency() (p50, p99 float64) {
	s := []metrics.Sample{{Name: "/sched/latencies:seconds"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return 0, 0
	}
	h := s[0].Value.Float64Histogram()
	var total uint64
	for _, c := range h.Counts {
		total += c
	}
	at := func(q float64) float64 {
		want, n := uint64(q*float64(total)), uint64(0)
		for i, c := range h.Counts {
			if n += c; n > want {
				return h.Buckets[i+1] * 1e3 // the bucket's upper bound
			}
		}
		return 0
	}
	if total == 0 {
		return 0, 0
	}
	return at(0.5), at(0.99)
}

// isChild reports whether this process is a bench child.
func isChild() bool { return os.Getenv(childEnv) == "1" }

// childMain runs one consumer as described on stdin and writes the result
// to stdout. It returns the exit code.
func childMain(stdin io.Reader, stdout, stderr io.Writer) int {
	var spec childSpec
	if err := json.NewDecoder(stdin).Decode(&spec); err != nil {
		fmt.Fprintln(stderr, "bench child: reading the spec:", err)
		return 2
	}
	res := childResult{}
	if err := runChild(&spec, &res.Run, stderr); err != nil {
		res.Error = err.Error()
	}
	res.MaxRSSBytes = peakRSS()
	res.SchedP50Ms, res.SchedP99Ms = schedLatency()
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintln(stderr, "bench child:", err)
		return 2
	}
	if res.Error != "" {
		return 1
	}
	return 0
}

func runChild(spec *childSpec, r *Run, stderr io.Writer) error {
	ctx, cancel := context.WithDeadlineCause(context.Background(), spec.Deadline, errors.New("-timeout reached"))
	defer cancel()
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	switch spec.Consumer {
	case "bare":
		return runBare(ctx, spec, r, stderr)
	case "antidote":
		return runAntidote(ctx, spec, r, stderr)
	}
	return fmt.Errorf("unknown consumer %q", spec.Consumer)
}

// commonOpts are the client options both consumers share.
func commonOpts(spec *childSpec, hook *fetchHook, stderr io.Writer) []kgo.Opt {
	opts := []kgo.Opt{
		kgo.SeedBrokers(spec.Brokers...),
		kgo.FetchMaxWait(spec.FetchMaxWait),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.WithHooks(hook),
	}
	if spec.Verbose {
		opts = append(opts, kgo.WithLogger(kgo.BasicLogger(stderr, kgo.LogLevelWarn, nil)))
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

// produceHook counts the produce batches written: Antidote's client writes
// only the dead letters.
type produceHook struct {
	batches, bytes, compressed atomic.Int64
}

func (h *produceHook) OnProduceBatchWritten(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.ProduceBatchMetrics) {
	h.batches.Add(1)
	h.bytes.Add(int64(m.UncompressedBytes))
	h.compressed.Add(int64(m.CompressedBytes))
}

// produceE2E times the produce requests (kgo.HookBrokerE2E): request key 0.
type produceE2E struct {
	mu          sync.Mutex
	e2e, queued []time.Duration
}

func (h *produceE2E) OnBrokerE2E(_ kgo.BrokerMetadata, key int16, e kgo.BrokerE2E) {
	if key != 0 || e.Err() != nil {
		return
	}
	h.mu.Lock()
	h.e2e = append(h.e2e, e.DurationE2E())
	h.queued = append(h.queued, e.WriteWait)
	h.mu.Unlock()
}

// letterAcks times the dead-letter writes from their start (the consumer
// sets a letter's Timestamp to it) to their acknowledgement
// (kgo.HookProduceRecordUnbuffered).
type letterAcks struct {
	mu   sync.Mutex
	acks []time.Duration
}

func (h *letterAcks) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	d := time.Since(r.Timestamp)
	h.mu.Lock()
	h.acks = append(h.acks, d)
	h.mu.Unlock()
}

// percentile of ds in milliseconds (ds is sorted); 0 when empty.
func percentile(ds []time.Duration, q float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return float64(ds[int(q*float64(len(ds)-1))]) / 1e6
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
func runBare(ctx context.Context, spec *childSpec, r *Run, stderr io.Writer) error {
	hook := &fetchHook{}
	created := time.Now()
	cl, err := kgo.NewClient(append(commonOpts(spec, hook, stderr), kgo.ConsumerGroup(spec.Group), kgo.ConsumeTopics(spec.Topic))...)
	if err != nil {
		return err
	}
	defer cl.Close()
	for r.Seen < spec.Records {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			r.Fetched = hook.fetched.Load()
			return fmt.Errorf("saw %d of %d records: %w", r.Seen, spec.Records, context.Cause(ctx))
		}
		if fs.IsClientClosed() {
			return errors.New("client closed")
		}
		fs.EachError(func(t string, p int32, err error) {
			if spec.Verbose {
				fmt.Fprintf(stderr, "bare: fetch error %s/%d: %v\n", t, p, err)
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
	hook.finish(r, created, time.Now(), spec.Records)
	return nil
}

// runAntidote times the Antidote consumer with a no-op handler and the
// default policy, until every record is processed or dead-lettered.
func runAntidote(ctx context.Context, spec *childSpec, r *Run, stderr io.Writer) error {
	hook := &fetchHook{}
	logger := slog.New(slog.DiscardHandler)
	if spec.Verbose {
		logger = slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
	}
	opts := commonOpts(spec, hook, stderr)[1:] // Brokers carries the seeds
	produced := &produceHook{}
	e2e := &produceE2E{}
	acks := &letterAcks{}
	opts = append(opts, kgo.WithHooks(produced, e2e, acks))
	if spec.Linger >= 0 {
		opts = append(opts, kgo.ProducerLinger(spec.Linger))
	}
	if spec.Compression != "" {
		codec, err := codecOf(spec.Compression)
		if err != nil {
			return err
		}
		opts = append(opts, kgo.ProducerBatchCompression(codec))
	}
	created := time.Now()
	c, err := consumer.New(consumer.Config[[]byte, Order]{
		Brokers:    spec.Brokers,
		Topics:     []string{spec.Topic},
		Group:      spec.Group,
		Value:      serde.JSON[Order](),
		Handler:    func(context.Context, *consumer.Record[[]byte, Order]) error { return nil },
		DeadLetter: consumer.DeadLetterConfig{Topic: "{topic}.dlq"},
		ClientOpts: opts,
		Logger:     logger,
	})
	if err != nil {
		return err
	}
	rctx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- c.Run(rctx) }()

	want := uint64(spec.Records)
	tick := time.NewTicker(time.Millisecond)
	defer tick.Stop()
	var end, last time.Time
	var fullTicks time.Duration // while a partition held its own buffer bound
	for end.IsZero() {
		select {
		case <-ctx.Done():
			stop()
			<-done
			s := c.Stats()
			r.Processed, r.DeadLettered, r.Fetched = s.Processed, s.DeadLettered, hook.fetched.Load()
			return fmt.Errorf("processed %d + dead-lettered %d of %d records: %w", s.Processed, s.DeadLettered, want, context.Cause(ctx))
		case err := <-done:
			return fmt.Errorf("Run returned before all records were settled: %v", err)
		case now := <-tick.C:
			s := c.Stats()
			if s.Processed+s.DeadLettered >= want {
				end = now
			}
			full := false
			for _, p := range s.Partitions {
				full = full || p.Paused == consumer.PauseFull
			}
			if full && !last.IsZero() {
				fullTicks += now.Sub(last)
			}
			last = now
		}
	}
	hook.finish(r, created, end, spec.Records)
	stop()
	if err := <-done; err != nil {
		return fmt.Errorf("Run: %w", err)
	}
	s := c.Stats()
	r.Processed, r.DeadLettered, r.Skipped, r.DLQErrors = s.Processed, s.DeadLettered, s.Skipped, s.DeadLetterWriteErrors
	r.ProducedBatches, r.ProducedBytes, r.ProducedCompressed = produced.batches.Load(), produced.bytes.Load(), produced.compressed.Load()
	r.Fetched = hook.fetched.Load() // fetches that ended after the window count too
	e2e.mu.Lock()
	r.ProduceRequests = int64(len(e2e.e2e))
	r.ProduceE2EP50Ms, r.ProduceQueuedP50Ms = percentile(e2e.e2e, 0.5), percentile(e2e.queued, 0.5)
	e2e.mu.Unlock()
	acks.mu.Lock()
	r.LetterAckP50Ms, r.LetterAckP99Ms = percentile(acks.acks, 0.5), percentile(acks.acks, 0.99)
	acks.mu.Unlock()
	r.FullSeconds = fullTicks.Seconds()
	return nil
}

// codecOf is the franz-go codec of a -compression name.
func codecOf(name string) (kgo.CompressionCodec, error) {
	switch name {
	case "none":
		return kgo.NoCompression(), nil
	case "snappy":
		return kgo.SnappyCompression(), nil
	case "lz4":
		return kgo.Lz4Compression(), nil
	case "zstd":
		return kgo.ZstdCompression(), nil
	}
	return kgo.CompressionCodec{}, fmt.Errorf("compression %q: want none, snappy, lz4 or zstd", name)
}
