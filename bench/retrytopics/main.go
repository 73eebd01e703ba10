// Command retrytopics measures what retry topics buy: the throughput of the
// records that never fail, while 1% of the records fail transiently twice,
// with retry topics against retrying in place, each as a share of a run
// where nothing fails, on the same data and the same broker.
//
//	go run ./bench/retrytopics -brokers 127.0.0.1:39092
//
// See bench/README.md, "Retry topics".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

type order struct {
	ID    int    `json:"id"`
	Fails int    `json:"fails"`
	Pad   string `json:"pad"`
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "seed brokers, comma-separated")
	records := flag.Int("records", 100_000, "records per topic")
	partitions := flag.Int("partitions", 4, "partitions per topic")
	failing := flag.Float64("failing", 0.01, "share of the records that fail transiently, twice each (with -ordered: 1 to 3 times; default 0.05)")
	rounds := flag.Int("rounds", 5, "rounds; each runs the three modes in turn")
	timeout := flag.Duration("timeout", 10*time.Minute, "bound of one run")
	only := flag.String("only", "", "run only this mode (no failures, retry topics, retry in place) after the baseline")
	profile := flag.String("cpuprofile", "", "write a CPU profile of the retry-topics runs to this file")
	ordered := flag.Bool("ordered", false, "the ordered workload against Spring Kafka instead: 50,000 records of 2,000 keys, 5% failing 1-3 times, tiers 100ms, 300ms, 1s (-records, -failing and -rounds apply; default 3 rounds)")
	keys := flag.Int("keys", 2000, "with -ordered: keys")
	peer := flag.String("spring", "bench/retrytopics/spring", "with -ordered: the Maven project of the Spring Kafka side, run in each round when java and mvn are on the PATH; empty: none")
	sides := flag.String("sides", "antidote,spring,spring-noseek", "with -ordered: the sides to run in each round")
	flag.Parse()
	onlyMode, cpuProfile = *only, *profile
	if *ordered {
		set := map[string]bool{}
		flag.Visit(func(f *flag.Flag) { set[f.Name] = true })
		s := orderedSpec{records: 50_000, keys: *keys, parts: int32(*partitions), share: 0.05,
			tiers: []time.Duration{100 * time.Millisecond, 300 * time.Millisecond, time.Second}, rounds: 3, timeout: *timeout, peer: *peer, sides: map[string]bool{}}
		for _, sd := range strings.Split(*sides, ",") {
			switch sd = strings.TrimSpace(sd); sd {
			case "antidote", "spring", "spring-noseek":
				s.sides[sd] = true
			default:
				fmt.Fprintf(os.Stderr, "retrytopics: -sides: %q is none of antidote, spring, spring-noseek\n", sd)
				os.Exit(2)
			}
		}
		if set["records"] {
			s.records = *records
		}
		if set["failing"] {
			s.share = *failing
		}
		if set["rounds"] {
			s.rounds = *rounds
		}
		if s.keys < 1 || s.records < 1 || s.rounds < 1 {
			fmt.Fprintln(os.Stderr, "retrytopics: -keys, -records and -rounds must be at least 1")
			os.Exit(2)
		}
		if err := runOrdered(strings.Split(*brokers, ","), s); err != nil {
			fmt.Fprintln(os.Stderr, "retrytopics:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(strings.Split(*brokers, ","), *records, int32(*partitions), *failing, *rounds, *timeout); err != nil {
		fmt.Fprintln(os.Stderr, "retrytopics:", err)
		os.Exit(1)
	}
}

// mode is one way of consuming.
type mode struct {
	name    string
	failing bool // on the topic where some records fail
	topics  bool // retry topics, else retry in place
	dlq     bool // straight to the dead-letter topic (with -only "dead letters")
}

var (
	onlyMode   string
	cpuProfile string
)

var modes = []mode{
	{"no failures", false, true, false},
	{"retry topics", true, true, false},
	{"retry in place", true, false, false},
}

func run(brokers []string, n int, parts int32, share float64, rounds int, timeout time.Duration) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(n))
	if err != nil {
		return err
	}
	defer cl.Close()
	stamp := time.Now().Format("150405")
	clean := "rtbench-clean-" + stamp
	dirty := "rtbench-failing-" + stamp
	good, err := fill(cl, clean, dirty, n, parts, share)
	if err != nil {
		return err
	}
	fmt.Printf("%d records of ~200 B on %d partitions; %d fail transiently twice (%.1f%%), %d never fail\n",
		n, parts, n-good, 100*share, good)
	fmt.Println("tiers 1s, 5s (retry topics: no retry in place); retry in place: the default policy (exponential from 100ms, 4 tries)")
	rates := map[string][]float64{}
	for r := 1; r <= rounds; r++ {
		ms := modes
		if onlyMode == "dead letters" {
			ms = append(ms, mode{"dead letters", true, false, true})
		}
		for _, m := range ms {
			if onlyMode != "" && m.name != onlyMode && m.name != "no failures" {
				continue
			}
			topic, want := clean, n
			if m.failing {
				topic, want = dirty, good
			}
			rate, d, err := consume(brokers, topic, m, want, timeout)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, m.name, err)
			}
			rates[m.name] = append(rates[m.name], rate)
			fmt.Printf("round %d  %-15s %9.0f good records/s  (%v)\n", r, m.name, rate, d.Round(time.Millisecond))
		}
	}
	fmt.Println()
	fmt.Printf("%-15s %14s %26s\n", "mode", "median rec/s", "share of no failures: median (min-max)")
	base := rates["no failures"]
	for _, m := range append(modes, mode{name: "dead letters"}) {
		if len(rates[m.name]) == 0 {
			continue
		}
		var ratios []float64
		for i, v := range rates[m.name] {
			ratios = append(ratios, v/base[i])
		}
		fmt.Printf("%-15s %14.0f %14.2f (%.2f-%.2f)\n", m.name, median(rates[m.name]), median(ratios), slices.Min(ratios), slices.Max(ratios))
	}
	var rt []float64
	for i, v := range rates["retry topics"] {
		rt = append(rt, v/base[i])
	}
	if len(rt) == 0 {
		return nil
	}
	verdict := "PASS"
	if median(rt) < 0.9 {
		verdict = "MISS"
	}
	fmt.Printf("target: retry topics at least 0.90 of no failures: %s\n", verdict)
	return nil
}

// fill creates the two topics and writes the same records to both; in the
// second, share of them fail twice. It returns the records that never fail.
func fill(cl *kgo.Client, clean, dirty string, n int, parts int32, share float64) (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	for _, t := range []string{clean, dirty} {
		resp, err := adm.CreateTopic(ctx, parts, -1, nil, t)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return 0, fmt.Errorf("create %s: %w", t, err)
		}
	}
	rng := rand.New(rand.NewPCG(1, 2))
	pad := strings.Repeat("x", 160)
	good := 0
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := 0; i < n; i++ {
		// A failing record has a key of its own, so the records that never
		// fail are never parked behind it: they measure how well the other
		// keys flow (records of a failing key wait for it, by design).
		fails := 0
		key := []byte(fmt.Sprintf("order-%05d", rng.IntN(10000)))
		if rng.Float64() < share {
			fails = 2
			key = []byte(fmt.Sprintf("flaky-%07d", i))
		} else {
			good++
		}
		for _, t := range []string{clean, dirty} {
			o := order{ID: i, Pad: pad}
			if t == dirty {
				o.Fails = fails
			}
			v, _ := json.Marshal(o)
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Topic: t, Key: key, Value: v}, func(_ *kgo.Record, err error) {
				if err != nil {
					perr.Store(err)
				}
				wg.Done()
			})
		}
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		return 0, err
	}
	return good, nil
}

// consume runs one consumer on topic until it has processed want records
// that never fail, and returns their rate from the first handler call to the
// last of them.
func consume(brokers []string, topic string, m mode, want int, timeout time.Duration) (float64, time.Duration, error) {
	group := fmt.Sprintf("rtbench-%s-%d", strings.ReplaceAll(m.name, " ", "-"), time.Now().UnixNano())
	var done atomic.Int64
	var first, last atomic.Int64
	finished := make(chan struct{})
	cfg := consumer.Config[string, order]{
		Brokers: brokers, Topics: []string{topic}, Group: group,
		Value:  serde.JSON[order](),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(_ context.Context, r *consumer.Record[string, order]) error {
			now := time.Now().UnixNano()
			first.CompareAndSwap(0, now)
			if r.Attempt <= r.Value.Fails {
				return failure.Transient(errors.New("flaky dependency"))
			}
			if r.Value.Fails == 0 {
				last.Store(now)
				if done.Add(1) == int64(want) {
					close(finished)
				}
			}
			return nil
		},
		ClientOpts: []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	}
	if m.dlq {
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.None()}
	}
	if m.topics {
		cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic}
		cfg.RetryTopics = consumer.RetryTopics{Tiers: []time.Duration{time.Second, 5 * time.Second}, Topic: "{topic}.{group}.retry.{delay}"}
		// The tier topics exist, as they do after a consumer's first start
		// (which creates them, and rebalances once to read them).
		if err := createTiers(brokers, topic, group, cfg.RetryTopics); err != nil {
			return 0, 0, err
		}
	}
	c, err := consumer.New(cfg)
	if err != nil {
		return 0, 0, err
	}
	if cpuProfile != "" && m.topics && m.failing {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return 0, 0, err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return 0, 0, err
		}
		defer pprof.StopCPUProfile()
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	select {
	case <-finished:
	case <-ctx.Done():
		return 0, 0, fmt.Errorf("processed %d of %d good records in %v", done.Load(), want, timeout)
	}
	cancel()
	if err := <-errc; err != nil {
		return 0, 0, err
	}
	d := time.Duration(last.Load() - first.Load())
	return float64(want) / d.Seconds(), d, nil
}

func createTiers(brokers []string, topic, group string, rt consumer.RetryTopics) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...))
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	adm := kadm.NewClient(cl)
	td, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return err
	}
	parts := int32(len(td[topic].Partitions))
	for _, d := range rt.Tiers {
		name := rt.TierTopic(topic, group, d)
		resp, err := adm.CreateTopic(ctx, parts, -1, nil, name)
		if err == nil {
			err = resp.Err
		}
		if err != nil {
			return fmt.Errorf("create %s: %w", name, err)
		}
	}
	return nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
