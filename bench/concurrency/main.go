// Command concurrency measures keyed concurrency: a handler that waits 5 ms
// per record (a database call), 4 partitions, 10,000 keys, 100,000 records,
// one record at a time per partition against Concurrency.Max 64, with
// per-key order checked in the run.
//
//	go run ./bench/concurrency -brokers 127.0.0.1:39092
//
// With -inflight, it measures instead how near the consumer comes to the
// physical limit of the workload (calls in flight ÷ handler time) at each
// number of handler calls in flight, with the default buffer limits, over
// -rounds rounds:
//
//	go run ./bench/concurrency -brokers 127.0.0.1:39092 -inflight 64,256 -rounds 5
//
// Each of those runs is followed, on the same topic and at the same calls in
// flight, by Confluent's Parallel Consumer (KEY ordering), built with Maven
// from bench/concurrency/parallelconsumer when java and mvn are on the PATH.
//
// See bench/README.md, "Keyed concurrency".
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/bench/internal/maven"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/serde"
)

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "seed brokers, comma-separated")
	records := flag.Int("records", 100_000, "records")
	keys := flag.Int("keys", 10_000, "distinct keys")
	partitions := flag.Int("partitions", 4, "partitions")
	work := flag.Duration("work", 5*time.Millisecond, "what the handler waits per record")
	conc := flag.Int("concurrency", 64, "Concurrency.Max of the keyed run")
	inflight := flag.String("inflight", "", "handler calls in flight to measure against the physical limit, comma-separated (Concurrency.Max = in flight ÷ partitions); empty: the keyed / one-at-a-time ratio")
	rounds := flag.Int("rounds", 3, "rounds of each -inflight level")
	peer := flag.String("peer", "bench/concurrency/parallelconsumer", "with -inflight: the Maven project of the Confluent Parallel Consumer side, run in each round when java and mvn are on the PATH; empty: none")
	flag.Parse()
	bs := strings.Split(*brokers, ",")
	var err error
	if *inflight != "" {
		var levels []int
		for _, s := range strings.Split(*inflight, ",") {
			n, perr := strconv.Atoi(strings.TrimSpace(s))
			if perr != nil || n < *partitions {
				fmt.Fprintf(os.Stderr, "concurrency: -inflight %q: each level is a whole number of at least -partitions\n", s)
				os.Exit(2)
			}
			levels = append(levels, n)
		}
		err = limit(bs, *records, *keys, int32(*partitions), *work, levels, *rounds, *peer)
	} else {
		err = run(bs, *records, *keys, int32(*partitions), *work, *conc)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "concurrency:", err)
		os.Exit(1)
	}
}

func run(brokers []string, n, keys int, parts int32, work time.Duration, conc int) error {
	topic := "concbench-" + time.Now().Format("150405")
	if err := fill(brokers, topic, n, keys, parts); err != nil {
		return err
	}
	defer drop(brokers, topic)
	fmt.Printf("%d records of %d keys on %d partitions; the handler waits %v per record\n", n, keys, parts, work)
	var rates []float64
	for _, max := range []int{1, conc} {
		r, err := consume(brokers, topic, n, work, max)
		if err != nil {
			return err
		}
		rates = append(rates, r.rate)
		fmt.Printf("concurrency %-3d %8.0f records/s  %v  CPU %.1f µs/record  per-key order violations %d\n",
			max, r.rate, r.window.Round(time.Millisecond), r.cpuPerRecord, r.violations)
	}
	ratio := rates[1] / rates[0]
	verdict := "PASS"
	if ratio < 12 {
		verdict = "MISS"
	}
	fmt.Printf("keyed %d / one at a time: %.1f× (target ≥ 12×): %s\n", conc, ratio, verdict)
	return nil
}

// limit runs, for each number of calls in flight, rounds consumers with the
// default settings but Concurrency.Max, interleaved (round 1 of every level,
// then round 2, ...), and prints each level's median records/s against the
// physical limit of the workload: calls in flight ÷ the handler's measured
// mean time. With a peer, each run is followed by the Parallel Consumer's
// on the same topic at the same calls in flight.
func limit(brokers []string, n, keys int, parts int32, work time.Duration, levels []int, rounds int, peerDir string) error {
	pc, err := buildPeer(peerDir)
	if err != nil {
		return err
	}
	topic := "concbench-" + time.Now().Format("150405")
	if err := fill(brokers, topic, n, keys, parts); err != nil {
		return err
	}
	defer drop(brokers, topic)
	fmt.Printf("%d records of %d keys on %d partitions; the handler waits %v per record; default buffer limits\n", n, keys, parts, work)
	res := make(map[int][]result)
	peers := make(map[int][]result)
	for round := 1; round <= rounds; round++ {
		for _, lv := range levels {
			r, err := consume(brokers, topic, n, work, lv/int(parts))
			if err != nil {
				return err
			}
			res[lv] = append(res[lv], r)
			fmt.Fprintf(os.Stderr, "round %d, %d in flight: antidote %8.0f records/s, %.0f%% of the limit, handler %v, CPU %.1f µs/record, fetched %d%s, violations %d\n",
				round, lv, r.rate, 100*r.rate/r.limit(lv), r.handler.Round(time.Microsecond), r.cpuPerRecord, r.fetched, mismatch(r.fetched, n), r.violations)
			if pc == nil {
				continue
			}
			q, err := pc.run(brokers, topic, n, lv, work)
			if err != nil {
				return err
			}
			peers[lv] = append(peers[lv], q)
			fmt.Fprintf(os.Stderr, "round %d, %d in flight: parallel %8.0f records/s, %.0f%% of the limit, handler %v, CPU %.1f µs/record, violations %d\n",
				round, lv, q.rate, 100*q.rate/q.limit(lv), q.handler.Round(time.Microsecond), q.cpuPerRecord, q.violations)
		}
	}
	fmt.Printf("%-10s %-9s %12s %20s %10s %10s %10s %10s\n", "in flight", "consumer", "records/s", "min-max", "limit", "of limit", "µs/rec", "check")
	for _, lv := range levels {
		row(lv, "antidote", res[lv], n, true)
		if pc != nil {
			row(lv, "parallel", peers[lv], n, false)
			ratios := make([]float64, len(res[lv]))
			for i := range ratios {
				ratios[i] = res[lv][i].rate / peers[lv][i].rate
			}
			verdict := "PASS"
			if median(ratios) < 1.2 {
				verdict = "MISS"
			}
			fmt.Printf("%-10d antidote / parallel, same round: median %.2f× (%.2f-%.2f; target ≥ 1.2×): %s\n",
				lv, median(ratios), slices.Min(ratios), slices.Max(ratios), verdict)
		}
	}
	fmt.Println(`"limit" is calls in flight ÷ the handler's measured mean time (target: antidote ≥ 90%); "check": every run kept per-key order (antidote: and fetched each record once)`)
	if pc == nil && peerDir != "" {
		fmt.Println("no java or mvn on the PATH: the Parallel Consumer side was not run")
	}
	return nil
}

// row prints one consumer's figures at one level.
func row(lv int, name string, rs []result, n int, fetched bool) {
	rates := make([]float64, len(rs))
	fracs := make([]float64, len(rs))
	cpus := make([]float64, len(rs))
	check := "ok"
	for i, r := range rs {
		rates[i], fracs[i], cpus[i] = r.rate, r.rate/r.limit(lv), r.cpuPerRecord
		if (fetched && r.fetched != int64(n)) || r.violations != 0 {
			check = "FAILED"
		}
	}
	fmt.Printf("%-10d %-9s %12.0f %9.0f-%-10.0f %10.0f %9.0f%% %10.1f %10s\n", lv, name, median(rates), slices.Min(rates), slices.Max(rates),
		median(rates)/median(fracs), 100*median(fracs), median(cpus), check)
}

// peer is the Confluent Parallel Consumer side: a Maven project built once,
// run as its own process for each run.
type peer struct{ classpath string }

// buildPeer builds the Maven project in dir, or returns nil when dir is
// empty or java or mvn is not on the PATH.
func buildPeer(dir string) (*peer, error) {
	cp, err := maven.Build(dir, "Parallel Consumer")
	if cp == "" || err != nil {
		return nil, err
	}
	return &peer{classpath: cp}, nil
}

// run consumes topic with the Parallel Consumer, KEY ordering,
// maxConcurrency inflight, a fresh group, and reads its result.
func (p *peer) run(brokers []string, topic string, n, inflight int, work time.Duration) (result, error) {
	cmd := exec.Command("java", "-cp", p.classpath, "dev.antidote.bench.ParallelConsumerBench",
		strings.Join(brokers, ","), topic, strconv.Itoa(n), strconv.Itoa(inflight), strconv.FormatInt(work.Microseconds(), 10))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("parallel consumer at %d in flight: %v", inflight, err)
	}
	var j struct {
		Rate       float64 `json:"rate"`
		WindowNs   int64   `json:"window_ns"`
		HandlerNs  int64   `json:"handler_ns"`
		CPUPerRec  float64 `json:"cpu_us_per_record"`
		Violations int     `json:"violations"`
	}
	if err := json.Unmarshal(out, &j); err != nil {
		return result{}, fmt.Errorf("parallel consumer output %q: %v", out, err)
	}
	return result{rate: j.Rate, window: time.Duration(j.WindowNs), handler: time.Duration(j.HandlerNs), cpuPerRecord: j.CPUPerRec, violations: j.Violations}, nil
}

func mismatch(fetched int64, n int) string {
	if fetched != int64(n) {
		return fmt.Sprintf(" <-- FETCHED %d != PRODUCED %d", fetched, n)
	}
	return ""
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func fill(brokers []string, topic string, n, keys int, parts int32) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(n))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return err
	}
	rng := rand.New(rand.NewPCG(3, 4))
	seq := make([]int, keys)
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := 0; i < n; i++ {
		k := rng.IntN(keys)
		v := strconv.Itoa(seq[k])
		seq[k]++
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte("key-" + strconv.Itoa(k)), Value: []byte(v)}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		return err
	}
	return nil
}

// drop deletes the bench's topic.
func drop(brokers []string, topic string) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = kadm.NewClient(cl).DeleteTopics(ctx, topic)
}

type result struct {
	rate         float64
	window       time.Duration
	cpuPerRecord float64
	violations   int
	handler      time.Duration // mean time of one handler call
	fetched      int64         // records in the fetch batches the client read
}

// limit is the physical limit of the run at inflight calls: calls in flight
// ÷ the handler's mean time, in records/s.
func (r result) limit(inflight int) float64 { return float64(inflight) / r.handler.Seconds() }

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// fetchCount counts the records of every fetch batch the client reads.
type fetchCount struct{ n atomic.Int64 }

func (f *fetchCount) OnFetchBatchRead(_ kgo.BrokerMetadata, _ string, _ int32, m kgo.FetchBatchMetrics) {
	f.n.Add(int64(m.NumRecords))
}

// consume reads the topic with a fresh group and returns the records/s from
// the first handler call to the last, the process CPU per record over that
// window, and the per-key order violations (a key's sequence number seen
// before the one before it).
func consume(brokers []string, topic string, n int, work time.Duration, max int) (result, error) {
	var mu sync.Mutex
	next := map[string]int{}
	violations := 0
	var done, busy atomic.Int64
	var first, last atomic.Int64
	var cpu0 atomic.Int64
	var fetched fetchCount
	finished := make(chan struct{})
	c, err := consumer.New(consumer.Config[string, string]{
		Brokers: brokers, Topics: []string{topic}, Group: fmt.Sprintf("concbench-%d-%d", max, time.Now().UnixNano()),
		Key: serde.String(), Value: serde.String(),
		Concurrency: consumer.Concurrency{Max: max},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts:  []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()), kgo.WithHooks(&fetched)},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			t0 := time.Now()
			if first.CompareAndSwap(0, t0.UnixNano()) {
				cpu0.Store(int64(cpu()))
			}
			time.Sleep(work)
			seq, _ := strconv.Atoi(r.Value)
			mu.Lock()
			if seq != next[r.Key] {
				violations++
			}
			next[r.Key] = seq + 1
			mu.Unlock()
			now := time.Now()
			busy.Add(int64(now.Sub(t0)))
			last.Store(now.UnixNano())
			if done.Add(1) == int64(n) {
				close(finished)
			}
			return nil
		},
	})
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	select {
	case <-finished:
	case <-ctx.Done():
		return result{}, fmt.Errorf("concurrency %d: %d of %d records in 30 minutes", max, done.Load(), n)
	}
	used := cpu() - time.Duration(cpu0.Load())
	cancel()
	if err := <-errc; err != nil {
		return result{}, err
	}
	w := time.Duration(last.Load() - first.Load())
	return result{
		rate: float64(n) / w.Seconds(), window: w, cpuPerRecord: float64(used.Microseconds()) / float64(n), violations: violations,
		handler: time.Duration(busy.Load() / int64(n)), fetched: fetched.n.Load(),
	}, nil
}
