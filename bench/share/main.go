// Command share measures the share-group mode (Config.ShareGroup) against a
// consumer group on the same data:
//
//  1. a no-op handler at 0%, 1% and 10% poison pills (garbage bytes, each
//     dead-lettered), one member of each kind, the share-group member also
//     with Concurrency.Max 16;
//  2. an I/O-bound handler (-work per record, one record at a time per
//     member) on a topic of 2 partitions, with 1, 2, 4 and 8 share-group
//     members against 8 consumer-group members, of which only 2 get a
//     partition: a share group puts every member to work.
//
// Each figure is the median of -rounds runs, with the least and the most,
// in records/s from the first record handled to the last settled (group
// join excluded). Every run uses a fresh group and the members run in this
// process.
//
//	go run ./bench/share -brokers 127.0.0.1:39792
//
// See bench/README.md, "Share groups".
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
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/serde"
)

type order struct {
	ID  int    `json:"id"`
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

func main() {
	brokers := flag.String("brokers", "127.0.0.1:39092", "seed brokers, comma-separated")
	records := flag.Int("records", 50_000, "records of the no-op runs")
	ioRecords := flag.Int("io-records", 3_000, "records of the I/O-bound runs")
	partitions := flag.Int("partitions", 4, "partitions of the no-op runs' topics")
	work := flag.Duration("work", 3*time.Millisecond, "what the I/O-bound handler waits per record")
	rounds := flag.Int("rounds", 3, "runs of each figure")
	flag.Parse()
	b := &bench{brokers: strings.Split(*brokers, ","), rounds: *rounds}
	if err := b.noop(*records, int32(*partitions), []float64{0, 0.01, 0.10}); err != nil {
		fmt.Fprintln(os.Stderr, "share:", err)
		os.Exit(1)
	}
	if err := b.io(*ioRecords, *work, []int{1, 2, 4, 8}); err != nil {
		fmt.Fprintln(os.Stderr, "share:", err)
		os.Exit(1)
	}
}

type bench struct {
	brokers []string
	rounds  int
}

// fill makes a topic of n JSON orders, a share of them garbage.
func (b *bench) fill(name string, n int, parts int32, poison float64) (string, error) {
	cl, err := kgo.NewClient(kgo.SeedBrokers(b.brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(n))
	if err != nil {
		return "", err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	topic := fmt.Sprintf("sharebench-%s-%d", name, time.Now().UnixNano())
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, parts, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return "", err
	}
	rng := rand.New(rand.NewPCG(7, uint64(poison*1000)))
	var wg sync.WaitGroup
	var perr atomic.Value
	for i := range n {
		v, _ := json.Marshal(order{ID: i, SKU: fmt.Sprintf("sku-%d", i%97), Qty: 1 + i%5})
		if rng.Float64() < poison {
			v = []byte("\x00\xffgarbage")
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: []byte(fmt.Sprint(i)), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		return "", err
	}
	return topic, nil
}

// run consumes topic's n records with members members (share or consumer
// group) and returns records/s from the first record handled to the last
// settled.
func (b *bench) run(topic string, n int, share bool, members, maxRecords, conc int, handle func(context.Context) error) (float64, error) {
	var first atomic.Int64
	var settledAt atomic.Int64
	group := fmt.Sprintf("sharebench-%d", time.Now().UnixNano())
	cs := make([]*consumer.Consumer[string, order], members)
	for i := range cs {
		cfg := consumer.Config[string, order]{
			Brokers: b.brokers, Topics: []string{topic},
			Key: serde.String(), Value: serde.JSON[order](),
			Logger:      slog.New(slog.NewTextHandler(io.Discard, nil)),
			Concurrency: consumer.Concurrency{Max: conc},
			Handler: func(ctx context.Context, _ *consumer.Record[string, order]) error {
				first.CompareAndSwap(0, time.Now().UnixNano())
				return handle(ctx)
			},
		}
		if share {
			cfg.ShareGroup = group
			cfg.Share = consumer.Share{FromEarliest: true, MaxRecords: maxRecords}
		} else {
			cfg.Group = group
			cfg.ClientOpts = []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}
		}
		c, err := consumer.New(cfg)
		if err != nil {
			return 0, err
		}
		cs[i] = c
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	for _, c := range cs {
		wg.Go(func() { _ = c.Run(ctx) })
	}
	defer func() { cancel(); wg.Wait() }()
	for {
		var settled uint64
		for _, c := range cs {
			s := c.Stats()
			settled += s.Processed + s.DeadLettered
		}
		if settled >= uint64(n) {
			settledAt.Store(time.Now().UnixNano())
			break
		}
		if ctx.Err() != nil {
			return 0, fmt.Errorf("%d of %d records settled in 20 minutes", settled, n)
		}
		time.Sleep(time.Millisecond)
	}
	return float64(n) / time.Duration(settledAt.Load()-first.Load()).Seconds(), nil
}

// spread is "median (min–max)" of rates.
func spread(rates []float64) string {
	s := slices.Sorted(slices.Values(rates))
	return fmt.Sprintf("%8.0f (%.0f–%.0f)", s[len(s)/2], s[0], s[len(s)-1])
}

func median(rates []float64) float64 {
	s := slices.Sorted(slices.Values(rates))
	return s[len(s)/2]
}

func (b *bench) noop(n int, parts int32, ratios []float64) error {
	fmt.Printf("no-op handler, %d records on %d partitions, one member; records/s, median (min–max) of %d runs\n", n, parts, b.rounds)
	fmt.Printf("%-7s %-24s %-24s %-24s %s\n", "poison", "consumer group", "share group", "share, Concurrency 16", "share/consumer")
	noop := func(context.Context) error { return nil }
	for _, p := range ratios {
		topic, err := b.fill(fmt.Sprintf("noop%03.0f", p*100), n, parts, p)
		if err != nil {
			return err
		}
		var cg, sg, sg16 []float64
		for range b.rounds {
			r, err := b.run(topic, n, false, 1, 0, 0, noop)
			if err != nil {
				return err
			}
			cg = append(cg, r)
			if r, err = b.run(topic, n, true, 1, 0, 0, noop); err != nil {
				return err
			}
			sg = append(sg, r)
			if r, err = b.run(topic, n, true, 1, 0, 16, noop); err != nil {
				return err
			}
			sg16 = append(sg16, r)
		}
		fmt.Printf("%-7s %-24s %-24s %-24s %.2f, %.2f\n", fmt.Sprintf("%.0f%%", p*100), spread(cg), spread(sg), spread(sg16), median(sg)/median(cg), median(sg16)/median(cg))
	}
	return nil
}

func (b *bench) io(n int, work time.Duration, members []int) error {
	topic, err := b.fill("io", n, 2, 0)
	if err != nil {
		return err
	}
	handle := func(ctx context.Context) error {
		t := time.NewTimer(work)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
			return nil
		}
	}
	fmt.Printf("\nI/O-bound handler (%v a record, one at a time per member), %d records on 2 partitions; records/s, median (min–max) of %d runs\n", work, n, b.rounds)
	most := slices.Max(members)
	var cg []float64
	for range b.rounds {
		r, err := b.run(topic, n, false, most, 0, 0, handle)
		if err != nil {
			return err
		}
		cg = append(cg, r)
	}
	fmt.Printf("consumer group, %d members (2 with a partition) %s\n", most, spread(cg))
	for _, m := range members {
		var sg []float64
		for range b.rounds {
			r, err := b.run(topic, n, true, m, 10, 0, handle)
			if err != nil {
				return err
			}
			sg = append(sg, r)
		}
		fmt.Printf("share group, %d member(s)%s %s  (%.1f× the consumer group)\n", m, strings.Repeat(" ", 18-len(fmt.Sprint(m))), spread(sg), median(sg)/median(cg))
	}
	return nil
}
