package main

import (
	"context"
	"encoding/json"
	"errors"
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
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/bench/internal/maven"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// keyed is a record of the ordered workload: its key's sequence number, how
// many times it fails, and whether its key is free (no record of it fails,
// so per-key order never holds it).
type keyed struct {
	ID    int    `json:"id"`
	Seq   int    `json:"seq"`
	Fails int    `json:"fails"`
	Free  int    `json:"free"`
	Pad   string `json:"pad"`
}

// orderedSpec is the ordered workload.
type orderedSpec struct {
	records, keys int
	parts         int32
	share         float64
	tiers         []time.Duration
	rounds        int
	timeout       time.Duration
	peer          string // the Maven project of the Spring side; empty: none
	sides         map[string]bool
}

// orderedResult is one run of the ordered workload.
type orderedResult struct {
	rate       float64       // records that never fail, per second, from the first call to the last of them
	free       float64       // records of free keys, per second, from the first call to the last of them
	orderTail  time.Duration // from the last free record to the last record that never fails
	total      time.Duration // from the first call until every record succeeded
	violations int64         // a record succeeded while an earlier one of its key had not
	held       int64         // records that never fail found in the tiers (held behind a failing record of their key)
	writes     int64         // the copies of those in the tiers
	duplicates int64
}

// runOrdered measures retry tiers that keep per-key order against Spring
// Kafka's non-blocking retries on the same records: share of them fail
// transiently 1 to 3 times, each key has a sequence number, and each side
// checks its order.
func runOrdered(brokers []string, s orderedSpec) error {
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ProducerLinger(5*time.Millisecond), kgo.MaxBufferedRecords(s.records))
	if err != nil {
		return err
	}
	defer cl.Close()
	topic := "rtbench-ordered-" + time.Now().Format("150405")
	failing, failWrites, chain, err := fillOrdered(cl, topic, s)
	if err != nil {
		return err
	}
	fmt.Printf("%d records of %d keys (~200 B, %d partitions); %d fail transiently 1-3 times (%.1f%%), %d times in all\n",
		s.records, s.keys, s.parts, failing, 100*s.share, failWrites)
	fmt.Printf("the longest chain of one key's retry delays is %v: in order, that key's last record cannot succeed sooner after its first failure\n", chain)
	fmt.Printf("tiers %v; per-key order checked on every side\n", s.tiers)
	wantSpring := s.sides["spring"] || s.sides["spring-noseek"]
	var peer *spring
	if wantSpring {
		if peer, err = buildSpring(s.peer); err != nil {
			return err
		}
		if peer == nil {
			fmt.Println("no java or mvn on the PATH (or -spring \"\"): the Spring side is not run")
		}
	}
	type side struct {
		name string
		run  func(round int) (orderedResult, error)
	}
	var sides []side
	if s.sides["antidote"] {
		sides = append(sides, side{"antidote", func(int) (orderedResult, error) { return consumeOrdered(brokers, topic, s) }})
	}
	if peer != nil {
		for _, seek := range []bool{true, false} {
			name := "spring"
			if !seek {
				name = "spring-noseek"
			}
			if !s.sides[name] {
				continue
			}
			sides = append(sides, side{name, func(round int) (orderedResult, error) {
				return peer.run(brokers, topic, s, seek, fmt.Sprintf("%s-%d-%d", name, round, time.Now().UnixNano()))
			}})
		}
	}
	res := map[string][]orderedResult{}
	for r := 1; r <= s.rounds; r++ {
		for _, sd := range sides {
			o, err := sd.run(r)
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", r, sd.name, err)
			}
			res[sd.name] = append(res[sd.name], o)
			fmt.Printf("round %d  %-14s %9.0f good records/s  %9.0f of free keys  order tail %-8v all done in %-8v %6d order violations",
				r, sd.name, o.rate, o.free, o.orderTail.Round(time.Millisecond), o.total.Round(time.Millisecond), o.violations)
			if sd.name == "antidote" {
				fmt.Printf("  %d held, %d tier writes (%.2f per held record)", o.held, o.writes, perHeld(o))
			}
			if o.duplicates > 0 {
				fmt.Printf("  %d handled twice", o.duplicates)
			}
			fmt.Println()
		}
	}
	fmt.Println()
	fmt.Printf("%-14s %28s %28s %16s %16s %10s\n", "side", "good rec/s: median (min-max)", "free-key rec/s: median", "order tail", "all done", "violations")
	for _, sd := range sides {
		rates, totals := pluck(res[sd.name], func(o orderedResult) float64 { return o.rate }), pluck(res[sd.name], func(o orderedResult) float64 { return o.total.Seconds() })
		free, tails := pluck(res[sd.name], func(o orderedResult) float64 { return o.free }), pluck(res[sd.name], func(o orderedResult) float64 { return o.orderTail.Seconds() })
		var v int64
		for _, o := range res[sd.name] {
			v += o.violations
		}
		fmt.Printf("%-14s %12.0f (%6.0f-%6.0f) %12.0f (%6.0f-%6.0f) %15.2fs %15.2fs %10d\n", sd.name, median(rates), slices.Min(rates), slices.Max(rates),
			median(free), slices.Min(free), slices.Max(free), median(tails), median(totals), v)
	}
	for _, other := range []string{"spring", "spring-noseek"} {
		if len(res[other]) == 0 || len(res["antidote"]) == 0 {
			continue
		}
		var rate, free, done []float64
		for i, o := range res["antidote"] {
			rate = append(rate, o.rate/res[other][i].rate)
			free = append(free, o.free/res[other][i].free)
			done = append(done, res[other][i].total.Seconds()/o.total.Seconds())
		}
		fmt.Printf("antidote / %-14s good rec/s %.2f (%.2f-%.2f); free-key rec/s %.2f (%.2f-%.2f); done %.2fx sooner (%.2f-%.2f)\n", other,
			median(rate), slices.Min(rate), slices.Max(rate), median(free), slices.Min(free), slices.Max(free), median(done), slices.Min(done), slices.Max(done))
	}
	var writes []float64
	for _, o := range res["antidote"] {
		writes = append(writes, perHeld(o))
	}
	if len(writes) == 0 {
		return nil
	}
	fmt.Printf("antidote tier writes per held record: %.2f (%.2f-%.2f); target at most 1\n", median(writes), slices.Min(writes), slices.Max(writes))
	return nil
}

// perHeld is the tier writes of a run per record held behind a failing
// record of its key.
func perHeld(o orderedResult) float64 {
	if o.held == 0 {
		return 0
	}
	return float64(o.writes) / float64(o.held)
}

func pluck(os []orderedResult, f func(orderedResult) float64) []float64 {
	out := make([]float64, len(os))
	for i, o := range os {
		out[i] = f(o)
	}
	return out
}

// fillOrdered creates topic and writes the workload to it. It returns the
// failing records, the sum of their failures (the tier writes they make
// themselves), and the longest chain of one key's retry delays: the sum of
// the delays of all the failures of its records, which per-key order runs
// one after another.
func fillOrdered(cl *kgo.Client, topic string, s orderedSpec) (failing int, failWrites int64, chain time.Duration, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	resp, err := kadm.NewClient(cl).CreateTopic(ctx, s.parts, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return 0, 0, 0, fmt.Errorf("create %s: %w", topic, err)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pad := strings.Repeat("x", 160)
	seq := make([]int, s.keys)
	recs, keyOf := make([]keyed, s.records), make([]int, s.records)
	failingKey, chains := make([]bool, s.keys), make([]time.Duration, s.keys)
	for i := range recs {
		k := rng.IntN(s.keys)
		recs[i], keyOf[i] = keyed{ID: i, Seq: seq[k], Pad: pad}, k
		seq[k]++
		if rng.Float64() < s.share {
			recs[i].Fails = 1 + rng.IntN(3)
			failingKey[k] = true
			failing++
			failWrites += int64(recs[i].Fails)
			for _, d := range s.tiers[:min(recs[i].Fails, len(s.tiers))] {
				chains[k] += d
			}
		}
	}
	var wg sync.WaitGroup
	var perr atomic.Value
	for i, o := range recs {
		k := keyOf[i]
		if !failingKey[k] {
			o.Free = 1
		}
		v, _ := json.Marshal(o)
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: topic, Key: fmt.Appendf(nil, "key-%05d", k), Value: v}, func(_ *kgo.Record, err error) {
			if err != nil {
				perr.Store(err)
			}
			wg.Done()
		})
	}
	wg.Wait()
	if err, _ := perr.Load().(error); err != nil {
		return 0, 0, 0, err
	}
	return failing, failWrites, slices.Max(chains), nil
}

// keyOrder is what succeeded of one key: the next sequence number due, and
// those done past it.
type keyOrder struct {
	next  int
	ahead map[int]bool
}

// orderCheck counts the records that succeed while an earlier record of
// their key has not.
type orderCheck struct {
	mu         sync.Mutex
	keys       map[string]*keyOrder
	violations int64
}

func (c *orderCheck) done(key string, seq int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := c.keys[key]
	if k == nil {
		k = &keyOrder{ahead: map[int]bool{}}
		c.keys[key] = k
	}
	if seq != k.next {
		c.violations++
		k.ahead[seq] = true
		return
	}
	for k.next++; k.ahead[k.next]; k.next++ {
		delete(k.ahead, k.next)
	}
}

// consumeOrdered runs one consumer with ordered retry tiers on topic until
// every record succeeded.
func consumeOrdered(brokers []string, topic string, s orderedSpec) (orderedResult, error) {
	group := fmt.Sprintf("rtbench-ordered-%d", time.Now().UnixNano())
	var done, good, free, dups atomic.Int64
	var first, lastGood, lastFree, last atomic.Int64
	check := &orderCheck{keys: map[string]*keyOrder{}}
	var seen sync.Map
	finished := make(chan struct{})
	cfg := consumer.Config[string, keyed]{
		Brokers: brokers, Topics: []string{topic}, Group: group,
		Value:  serde.JSON[keyed](),
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		Handler: func(_ context.Context, r *consumer.Record[string, keyed]) error {
			first.CompareAndSwap(0, time.Now().UnixNano())
			if r.Attempt <= r.Value.Fails {
				return failure.Transient(errors.New("flaky dependency"))
			}
			if _, again := seen.LoadOrStore(r.Value.ID, true); again {
				dups.Add(1)
				return nil
			}
			check.done(string(r.Raw.Key), r.Value.Seq)
			now := time.Now().UnixNano()
			if r.Value.Fails == 0 {
				good.Add(1)
				storeMax(&lastGood, now)
			}
			if r.Value.Free == 1 {
				free.Add(1)
				storeMax(&lastFree, now)
			}
			storeMax(&last, now)
			if done.Add(1) == int64(s.records) {
				close(finished)
			}
			return nil
		},
		RetryTopics: consumer.RetryTopics{Tiers: s.tiers, Topic: "{topic}.{group}.retry.{delay}"},
		ClientOpts:  []kgo.Opt{kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())},
	}
	cfg.Policy.Process.Transient = consumer.Rule{Retry: backoff.None(), Then: consumer.ActionRetryTopic}
	if err := createTiers(brokers, topic, group, cfg.RetryTopics); err != nil {
		return orderedResult{}, err
	}
	c, err := consumer.New(cfg)
	if err != nil {
		return orderedResult{}, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	errc := make(chan error, 1)
	go func() { errc <- c.Run(ctx) }()
	select {
	case <-finished:
	case <-ctx.Done():
		return orderedResult{}, fmt.Errorf("%d of %d records succeeded in %v", done.Load(), s.records, s.timeout)
	}
	cancel()
	if err := <-errc; err != nil {
		return orderedResult{}, err
	}
	held, writes, err := tierWrites(brokers, topic, group, cfg.RetryTopics)
	if err != nil {
		return orderedResult{}, err
	}
	window, freeWindow := time.Duration(lastGood.Load()-first.Load()), time.Duration(lastFree.Load()-first.Load())
	return orderedResult{
		rate: float64(good.Load()) / window.Seconds(), total: time.Duration(last.Load() - first.Load()),
		free: float64(free.Load()) / freeWindow.Seconds(), orderTail: time.Duration(lastGood.Load() - lastFree.Load()),
		violations: check.violations, held: held, writes: writes, duplicates: dups.Load(),
	}, nil
}

// storeMax stores v in a unless a holds more.
func storeMax(a *atomic.Int64, v int64) {
	for {
		old := a.Load()
		if v <= old || a.CompareAndSwap(old, v) {
			return
		}
	}
}

// tierWrites reads a group's tier topics: the records that never fail
// found there (held behind a failing record of their key), and the copies
// of them.
func tierWrites(brokers []string, topic, group string, rt consumer.RetryTopics) (held, copies int64, err error) {
	var names []string
	for _, d := range rt.Tiers {
		names = append(names, rt.TierTopic(topic, group, d))
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.ConsumeTopics(names...), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		return 0, 0, err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ends, err := kadm.NewClient(cl).ListEndOffsets(ctx, names...)
	if err != nil {
		return 0, 0, err
	}
	if err := ends.Error(); err != nil {
		return 0, 0, err
	}
	var want int64
	ends.Each(func(o kadm.ListedOffset) { want += o.Offset })
	ids := map[int]bool{}
	for n := int64(0); n < want; {
		fs := cl.PollFetches(ctx)
		if err := fs.Err0(); err != nil {
			return 0, 0, fmt.Errorf("reading the tiers (%d of %d records): %w", n, want, err)
		}
		fs.EachRecord(func(r *kgo.Record) {
			n++
			var v keyed
			if json.Unmarshal(r.Value, &v) == nil && v.Fails == 0 {
				ids[v.ID] = true
				copies++
			}
		})
	}
	return int64(len(ids)), copies, nil
}

// spring is the Spring Kafka side: a Maven project built once, run as its
// own process for each run.
type spring struct{ classpath string }

// buildSpring builds the Maven project in dir, or returns nil when dir is
// empty or java or mvn is not on the PATH.
func buildSpring(dir string) (*spring, error) {
	cp, err := maven.Build(dir, "Spring")
	if cp == "" || err != nil {
		return nil, err
	}
	return &spring{classpath: cp}, nil
}

// run consumes topic with Spring's retry topics (their names end in suffix,
// fresh for each run) and reads its result.
func (p *spring) run(brokers []string, topic string, s orderedSpec, seekAfterError bool, suffix string) (orderedResult, error) {
	var delays []string
	for _, d := range s.tiers {
		delays = append(delays, strconv.FormatInt(d.Milliseconds(), 10))
	}
	cmd := exec.Command("java", "-cp", p.classpath, "dev.antidote.bench.SpringRetryBench",
		strings.Join(brokers, ","), topic, strconv.Itoa(s.records), strconv.Itoa(int(s.parts)),
		strings.Join(delays, ","), strconv.FormatBool(seekAfterError), suffix, strconv.Itoa(int(s.timeout.Seconds())))
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return orderedResult{}, fmt.Errorf("spring: %v", err)
	}
	var j struct {
		Rate       float64 `json:"rate"`
		FreeRate   float64 `json:"free_rate"`
		TailNs     int64   `json:"order_tail_ns"`
		TotalNs    int64   `json:"total_ns"`
		Done       int     `json:"done"`
		Violations int64   `json:"violations"`
		Duplicates int64   `json:"duplicates"`
	}
	if err := json.Unmarshal(out, &j); err != nil {
		return orderedResult{}, fmt.Errorf("spring output %q: %v", out, err)
	}
	if j.Done != s.records {
		return orderedResult{}, fmt.Errorf("spring: %d of %d records succeeded", j.Done, s.records)
	}
	return orderedResult{rate: j.Rate, free: j.FreeRate, orderTail: time.Duration(j.TailNs), total: time.Duration(j.TotalNs), violations: j.Violations, duplicates: j.Duplicates}, nil
}
