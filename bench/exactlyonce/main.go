// Command exactlyonce measures what the exactly-once mode costs: a handler
// that writes one output record per input record, 4 partitions, 200,000
// records, at 0% and 1% poison pills, with the outputs written by a plain
// producer client (at least once) against Config.ExactlyOnce (outputs, dead
// letters and commits in transactions). Each round runs both modes on the
// same topic, each with a fresh group; the median ratio and its spread are
// printed.
//
//	go run ./bench/exactlyonce -brokers 127.0.0.1:39092
//
// See bench/README.md, "Exactly once".
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime"
	"slices"
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

type order struct {
	ID    int    `json:"id"`
	Item  string `json:"item"`
	Price int    `json:"price"`
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "seed brokers, comma-separated")
	records := flag.Int("records", 200_000, "records per poison ratio")
	partitions := flag.Int("partitions", 4, "partitions")
	rounds := flag.Int("rounds", 5, "rounds; each runs both modes on every ratio")
	poison := flag.String("poison", "0,0.01", "comma-separated poison-pill ratios")
	maxRecords := flag.Int("max-records", 0, "ExactlyOnce.MaxRecords (0: the default)")
	interval := flag.Duration("interval", 0, "ExactlyOnce.Interval (0: the default)")
	flag.Parse()
	var ratios []float64
	for _, s := range strings.Split(*poison, ",") {
		r, err := strconv.ParseFloat(s, 64)
		if err != nil || r < 0 || r >= 1 {
			fmt.Fprintf(os.Stderr, "exactlyonce: -poison: %q is not a ratio in [0,1)\n", s)
			os.Exit(2)
		}
		ratios = append(ratios, r)
	}
	eo := consumer.ExactlyOnce{MaxRecords: *maxRecords, Interval: *interval}
	if err := run(strings.Split(*brokers, ","), *records, int32(*partitions), *rounds, ratios, eo); err != nil {
		fmt.Fprintln(os.Stderr, "exactlyonce:", err)
		os.Exit(1)
	}
}

func run(brokers []string, n int, parts int32, rounds int, ratios []float64, eo consumer.ExactlyOnce) error {
	stamp := time.Now().Format("150405")
	out := "eosbench-out-" + stamp
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(n))
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	if err := create(adm, out, parts); err != nil {
		return err
	}
	topics := []string{out}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = adm.DeleteTopics(ctx, topics...)
	}()
	fmt.Printf("%d records per ratio on %d partitions, one output per good record; %d rounds; GOMAXPROCS %d\n", n, parts, rounds, runtime.GOMAXPROCS(0))
	fmt.Printf("%7s  %-13s  %12s  %12s  %9s  %-17s  %-11s  %s\n", "poison", "mode", "median rec/s", "µs CPU/rec", "tail", "ratio (min-max)", "txns", "check")
	for _, ratio := range ratios {
		in := fmt.Sprintf("eosbench-in-%s-%g", stamp, ratio*100)
		pills, err := fill(cl, adm, in, n, parts, ratio)
		if err != nil {
			return err
		}
		topics = append(topics, in, in+".dlq")
		var plain, txn []result
		for r := 0; r < rounds; r++ {
			p, err := consume(brokers, in, out, n, consumer.ExactlyOnce{})
			if err != nil {
				return err
			}
			e := eo
			e.TransactionalID = fmt.Sprintf("eosbench-%s-%d", stamp, r)
			x, err := consume(brokers, in, out, n, e)
			if err != nil {
				return err
			}
			plain, txn = append(plain, p), append(txn, x)
			fmt.Fprintf(os.Stderr, "  %g%% round %d: plain %.0f rec/s, exactly-once %.0f rec/s\n", ratio*100, r+1, p.rate, x.rate)
		}
		ratiosOf := make([]float64, rounds)
		for i := range ratiosOf {
			ratiosOf[i] = txn[i].rate / plain[i].rate
		}
		for _, m := range []struct {
			name string
			rs   []result
		}{{"plain", plain}, {"exactly-once", txn}} {
			rate := median(m.rs, func(r result) float64 { return r.rate })
			cpu := median(m.rs, func(r result) float64 { return r.cpuPerRecord })
			tail, ratioCol, txns := "-", "1", "-"
			if m.name == "exactly-once" {
				tail = time.Duration(median(m.rs, func(r result) float64 { return float64(r.tail) })).Round(time.Millisecond).String()
				ratioCol = fmt.Sprintf("%.3f (%.3f-%.3f)", med(ratiosOf), slices.Min(ratiosOf), slices.Max(ratiosOf))
				txns = fmt.Sprintf("%.0f/%.0f", median(m.rs, func(r result) float64 { return float64(r.committed) }), median(m.rs, func(r result) float64 { return float64(r.aborted) }))
			}
			check := "ok"
			for _, r := range m.rs {
				if r.deadLettered != uint64(pills) {
					check = fmt.Sprintf("dead-lettered %d, want %d", r.deadLettered, pills)
				}
			}
			fmt.Printf("%6g%%  %-13s  %12.0f  %12.2f  %9s  %-17s  %-11s  %s\n", ratio*100, m.name, rate, cpu, tail, ratioCol, txns, check)
		}
	}
	fmt.Println("rec/s: first record handled to last settled. tail (exactly-once): last settled to the group's offsets committed at the end. txns: committed/aborted per run.")
	return nil
}

func create(adm *kadm.Client, topic string, parts int32) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	resp, err := adm.CreateTopic(ctx, parts, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	return err
}

// fill creates topic and writes n orders to it, round(ratio×n) of them
// garbage bytes at random offsets. It returns the number of pills.
func fill(cl *kgo.Client, adm *kadm.Client, topic string, n int, parts int32, ratio float64) (int, error) {
	if err := create(adm, topic, parts); err != nil {
		return 0, err
	}
	rng := rand.New(rand.NewPCG(5, 6))
	pill := make([]bool, n)
	pills := int(ratio*float64(n) + 0.5)
	for _, i := range rng.Perm(n)[:pills] {
		pill[i] = true
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := 0; i < n; i++ {
		v := []byte(fmt.Sprintf(`{"id":%d,"item":"item-%06d","price":%d}`, i, i%997, i%1000))
		if pill[i] {
			v = []byte{0xde, 0xad, 0xbe, 0xef}
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Partition: int32(i) % parts, Key: []byte(strconv.Itoa(i)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		return 0, err
	}
	return pills, nil
}

type result struct {
	rate, cpuPerRecord float64
	tail               time.Duration
	deadLettered       uint64
	committed, aborted uint64
}

func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// consume reads in with a fresh group, writing one output per record to
// out: through a plain producer (eo off), or in the consumer's transactions.
// Its window runs from the first handler call to the last record settled.
func consume(brokers []string, in, out string, n int, eo consumer.ExactlyOnce) (result, error) {
	var first atomic.Int64
	var cpu0 atomic.Int64
	var outErr atomic.Value
	group := fmt.Sprintf("eosbench-%d", time.Now().UnixNano())
	var outputs *kgo.Client
	if eo.TransactionalID == "" {
		var err error
		if outputs, err = kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(0)); err != nil {
			return result{}, err
		}
		defer outputs.Close()
	}
	c, err := consumer.New(consumer.Config[string, order]{
		Brokers: brokers, Topics: []string{in}, Group: group,
		Key: serde.String(), Value: serde.JSON[order](),
		ExactlyOnce: eo,
		Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
		ClientOpts:  []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
		Handler: func(_ context.Context, r *consumer.Record[string, order]) error {
			if first.CompareAndSwap(0, time.Now().UnixNano()) {
				cpu0.Store(int64(cpu()))
			}
			o := &kgo.Record{Topic: out, Key: r.Raw.Key, Value: []byte(r.Value.Item + " " + strconv.Itoa(r.Value.Price))}
			if outputs == nil {
				return r.Produce(o)
			}
			outputs.Produce(context.Background(), o, func(_ *kgo.Record, err error) {
				if err != nil {
					outErr.Store(err)
				}
			})
			return nil
		},
	})
	if err != nil {
		return result{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	var s consumer.Stats
	for s = c.Stats(); s.Processed+s.DeadLettered < uint64(n); s = c.Stats() {
		if ctx.Err() != nil {
			return result{}, fmt.Errorf("%d of %d records settled in 10 minutes", s.Processed+s.DeadLettered, n)
		}
		time.Sleep(time.Millisecond)
	}
	end := time.Now()
	res := result{deadLettered: s.DeadLettered}
	if outputs != nil {
		if err := outputs.Flush(ctx); err != nil {
			return result{}, err
		}
	} else if res.tail, err = waitCommitted(ctx, c.Client(), group, in); err != nil {
		return result{}, err
	}
	used := cpu() - time.Duration(cpu0.Load())
	cancel()
	if err := <-errc; err != nil {
		return result{}, err
	}
	if err, _ := outErr.Load().(error); err != nil {
		return result{}, fmt.Errorf("output write: %w", err)
	}
	if eo.TransactionalID != "" {
		s = c.Stats()
		res.committed, res.aborted = s.TransactionsCommitted, s.TransactionsAborted
	}
	w := end.Sub(time.Unix(0, first.Load()))
	res.rate = float64(n) / w.Seconds()
	res.cpuPerRecord = float64(used.Microseconds()) / float64(n)
	return res, nil
}

// waitCommitted waits until the group's committed offsets of topic reach its
// end offsets and returns how long that took.
func waitCommitted(ctx context.Context, cl *kgo.Client, group, topic string) (time.Duration, error) {
	start := time.Now()
	adm := kadm.NewClient(cl)
	ends, err := adm.ListEndOffsets(ctx, topic)
	if err != nil {
		return 0, err
	}
	for {
		offs, err := adm.FetchOffsets(ctx, group)
		if err == nil {
			done := true
			ends.Each(func(e kadm.ListedOffset) {
				if o, ok := offs.Lookup(topic, e.Partition); !ok || o.At < e.Offset {
					done = false
				}
			})
			if done {
				return time.Since(start), nil
			}
		}
		if ctx.Err() != nil {
			return 0, ctx.Err()
		}
		time.Sleep(2 * time.Millisecond)
	}
}

func median(rs []result, f func(result) float64) float64 {
	xs := make([]float64, len(rs))
	for i, r := range rs {
		xs[i] = f(r)
	}
	return med(xs)
}

func med(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
