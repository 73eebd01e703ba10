// Command concurrency measures keyed concurrency: a handler that waits 5 ms
// per record (a database call), 4 partitions, 10,000 keys, 100,000 records,
// one record at a time per partition against Concurrency.Max 64, with
// per-key order checked in the run.
//
//	go run ./bench/concurrency -brokers 127.0.0.1:39092
//
// See bench/README.md, "Keyed concurrency".
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

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
	flag.Parse()
	if err := run(strings.Split(*brokers, ","), *records, *keys, int32(*partitions), *work, *conc); err != nil {
		fmt.Fprintln(os.Stderr, "concurrency:", err)
		os.Exit(1)
	}
}

func run(brokers []string, n, keys int, parts int32, work time.Duration, conc int) error {
	topic := "concbench-" + time.Now().Format("150405")
	if err := fill(brokers, topic, n, keys, parts); err != nil {
		return err
	}
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

type result struct {
	rate         float64
	window       time.Duration
	cpuPerRecord float64
	violations   int
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// consume reads the topic with a fresh group and returns the records/s from
// the first handler call to the last, the process CPU per record over that
// window, and the per-key order violations (a key's sequence number seen
// before the one before it).
func consume(brokers []string, topic string, n int, work time.Duration, max int) (result, error) {
	var mu sync.Mutex
	next := map[string]int{}
	violations := 0
	var done atomic.Int64
	var first, last atomic.Int64
	var cpu0 atomic.Int64
	finished := make(chan struct{})
	c, err := consumer.New(consumer.Config[string, string]{
		Brokers: brokers, Topics: []string{topic}, Group: fmt.Sprintf("concbench-%d-%d", max, time.Now().UnixNano()),
		Key: serde.String(), Value: serde.String(),
		Concurrency: consumer.Concurrency{Max: max},
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts:  []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			if first.CompareAndSwap(0, time.Now().UnixNano()) {
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
			last.Store(time.Now().UnixNano())
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
	return result{rate: float64(n) / w.Seconds(), window: w, cpuPerRecord: float64(used.Microseconds()) / float64(n), violations: violations}, nil
}
