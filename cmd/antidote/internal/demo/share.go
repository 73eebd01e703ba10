package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// The share-group demo (--share): jobs on a topic of few partitions, and
// more workers than partitions in one share group (KIP-932), each job
// acquired by one worker at a time. Poison pills are dead-lettered at once,
// jobs that fail once are released and done by a later delivery, jobs that
// never succeed are released until the group's delivery limit and then
// dead-lettered, and a worker leaves midway, its jobs going to the others.

const (
	sharePartitions = 2
	shareWorkers    = 6
	shareTopic      = "jobs"
	shareGroup      = "antidote-demo-workers"
	// shareWork is the I/O a job waits on: the workers' concurrency, not
	// the partitions, bounds the throughput.
	shareWork = time.Millisecond
)

// Kinds of the share demo's jobs.
const (
	shareOK     = "ok"      // done on its first delivery
	shareOnce   = "flaky"   // fails on its first delivery: released, done by a later one
	shareNever  = "stuck"   // always fails, transiently: released up to the delivery limit, then dead-lettered
	shareReject = "invalid" // fails permanently: dead-lettered at once
	sharePoison = "garbage" // not JSON: dead-lettered at once, never handled
)

var shareKinds = []string{shareOK, shareOnce, shareNever, shareReject, sharePoison}

// shareKind is the kind of job i: about 3% poison of each bad kind, 1%
// that never succeed, 5% flaky.
func shareKind(i int) string {
	switch m := i % 100; {
	case m == 17, m == 51, m == 83:
		return sharePoison
	case m == 29, m == 64, m == 95:
		return shareReject
	case m == 42:
		return shareNever
	case m%20 == 3:
		return shareOnce
	}
	return shareOK
}

// shareJob is a job's value.
type shareJob struct {
	ID   int    `json:"id"`
	Kind string `json:"kind"`
}

// shareSummary is the share demo's result; -o json prints it as is.
type shareSummary struct {
	Produced     int `json:"produced"`
	Processed    int `json:"processed"`
	DeadLettered int `json:"dead_lettered"`
	Lost         int `json:"lost"`
	// Duplicates counts dead letters of the same job written twice, and
	// jobs both processed and dead-lettered.
	Duplicates int `json:"duplicates"`
	// ProcessedTwice counts jobs done twice: a share group delivers at
	// least once, and a worker that leaves may have done a job whose
	// ACCEPT did not reach the broker.
	ProcessedTwice int            `json:"processed_twice"`
	ByKind         []shareKindRow `json:"by_kind"`
	// ByWorker is the jobs each worker did.
	ByWorker []int `json:"by_worker"`
	// Deliveries counts acquisitions by delivery count, over every worker:
	// those the workers saw. A fetch the client drops (its share session
	// reset while it was in flight) leaves no trace but the next delivery's
	// count.
	Deliveries    map[int32]uint64 `json:"deliveries"`
	Released      uint64           `json:"released"`
	Redelivered   uint64           `json:"redelivered"`
	DeliveryLimit int              `json:"delivery_limit"`
	WorkerLeft    int              `json:"worker_left"` // the worker that left midway
	Cluster       string           `json:"cluster"`
	Brokers       []string         `json:"brokers"`
	Topic         string           `json:"topic"`
	DLQTopic      string           `json:"dlq_topic"`
	Group         string           `json:"group"`
	DurationMS    int64            `json:"duration_ms"`
	Problems      []string         `json:"problems,omitempty"`
}

type shareKindRow struct {
	Kind         string `json:"kind"`
	Produced     int    `json:"produced"`
	Processed    int    `json:"processed"`
	DeadLettered int    `json:"dead_lettered"`
	// LetterDelivery is the delivery count written in the letters of the
	// kind (antidote.delivery.count), by count.
	LetterDelivery map[string]int `json:"letter_delivery,omitempty"`
}

// shareRun is one run of the share demo.
type shareRun struct {
	opts    demoOptions
	g       cli.Globals
	live    *cli.Live
	brokers []string
	cluster string
	topic   string
	group   string
	dlq     string

	mu       sync.Mutex
	kinds    map[recKey]string // each produced job's kind
	done     map[recKey]int    // handler successes per job
	byWorker []int
}

func runShareDemo(ctx context.Context, stdout, stderr io.Writer, g cli.Globals, o demoOptions) error {
	r := &shareRun{opts: o, g: g, topic: shareTopic, group: shareGroup, cluster: "kfake",
		kinds: make(map[recKey]string, o.records), done: make(map[recKey]int, o.records), byWorker: make([]int, shareWorkers)}
	if g.Explicit {
		r.brokers, r.cluster = g.Brokers, "kafka"
		suffix := randomSuffix()
		r.topic, r.group = shareTopic+"-"+suffix, shareGroup+"-"+suffix
	} else {
		opts := []kfake.Opt{kfake.NumBrokers(1)}
		if o.port > 0 {
			opts = append(opts, kfake.Ports(o.port))
		}
		fake, err := kfake.NewCluster(opts...)
		if err != nil {
			return fmt.Errorf("starting the in-process Kafka cluster: %w", err)
		}
		defer fake.Close()
		r.brokers = fake.ListenAddrs()
	}
	r.dlq = deadletter.Template(deadletter.DefaultTemplate).Name(r.topic, r.group)
	if g.JSON() {
		r.live = cli.NewLive(stderr, cli.IsTerminal(stderr))
	} else {
		r.live = cli.NewLive(stdout, true)
	}
	sum, err := r.run(ctx, stderr)
	if err != nil {
		return err
	}
	if g.JSON() {
		if err := cli.WriteJSON(stdout, sum); err != nil {
			return err
		}
	} else {
		r.print(stdout, sum)
	}
	if sum.Lost != 0 || sum.Duplicates != 0 {
		return fmt.Errorf("%d job(s) lost, %d dead-lettered twice or also done: produced %d, processed %d, dead-lettered %d; this is a bug, please report it",
			sum.Lost, sum.Duplicates, sum.Produced, sum.Processed, sum.DeadLettered)
	}
	return nil
}

func (r *shareRun) run(ctx context.Context, stderr io.Writer) (*shareSummary, error) {
	o := r.opts
	r.live.Event(fmt.Sprintf("Antidote share-group demo: %d jobs on %s", o.records, r.clusterDesc()))
	r.live.Event(fmt.Sprintf("  topic %s (%d partitions), share group %s with %d workers: more workers than partitions,", r.topic, sharePartitions, r.group, shareWorkers))
	r.live.Event("  each job acquired by one worker at a time and acknowledged on its own; dead letters to " + r.dlq)
	r.live.Event("  3% garbage and 3% invalid jobs (dead-lettered at once), 5% flaky (fail on their first delivery: released,")
	r.live.Event("  done by a later one), 1% that never succeed (released until the group's delivery limit, then dead-lettered);")
	r.live.Event("  midway, one worker leaves: the jobs it holds go back to the group (it leaves holding none on its last")
	r.live.Event("  delivery: the broker archives such a job rather than deliver it again)")
	r.live.Event("")

	pcl, err := cli.DialCluster(ctx, r.brokers, r.g.Timeout, kgo.ProducerLinger(5*time.Millisecond), kgo.ClientID("antidote-demo-producer"),
		kgo.RecordPartitioner(kgo.RoundRobinPartitioner()))
	if err != nil {
		return nil, err
	}
	defer pcl.Close()
	if err := r.requireShareGroups(ctx, pcl); err != nil {
		return nil, err
	}
	adm := kadm.NewClient(pcl)
	actx, cancel := context.WithTimeout(ctx, r.g.Timeout)
	resp, err := adm.CreateTopic(actx, sharePartitions, -1, nil, r.topic)
	cancel()
	if err == nil {
		err = resp.Err
	}
	if err != nil {
		return nil, fmt.Errorf("creating topic %s: %w", r.topic, err)
	}
	if err := r.produce(ctx, pcl); err != nil {
		return nil, err
	}

	start := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	workers := make([]*consumer.Consumer[string, shareJob], shareWorkers)
	stops := make([]context.CancelFunc, shareWorkers)
	var wg sync.WaitGroup
	runErrs := make(chan error, shareWorkers)
	const leaver = 0
	held := make([]*holdings, shareWorkers)
	for i := range workers {
		wctx, wstop := context.WithCancel(runCtx)
		stops[i] = wstop
		held[i] = &holdings{held: map[recKey]int32{}, left: -1}
		if i == leaver {
			held[i].due = func() bool {
				r.mu.Lock()
				defer r.mu.Unlock()
				return len(r.done) >= o.records/3
			}
			held[i].leave = wstop
		}
		w, err := r.worker(i, held[i], stderr)
		if err != nil {
			return nil, err
		}
		workers[i] = w
		if i == leaver {
			held[i].limit = func() int { return w.Stats().ShareGroup.DeliveryLimit }
		}
		wg.Go(func() {
			if err := w.Run(wctx); err != nil {
				runErrs <- fmt.Errorf("worker %d: %w", i, err)
			}
		})
	}
	defer func() { stop(); wg.Wait() }()

	left := false
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(o.drain)
	var settled uint64
watch:
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case err := <-runErrs:
			return nil, err
		case <-deadline:
			r.live.Event(fmt.Sprintf("  the workers did not settle every job within %v; stopping", o.drain))
			break watch
		case <-tick.C:
			// Jobs done (each once, however often) and dead-lettered.
			r.mu.Lock()
			settled = uint64(len(r.done))
			r.mu.Unlock()
			var holding int
			for _, w := range workers {
				st := w.Stats()
				settled += st.DeadLettered
				holding += st.ShareGroup.Held
			}
			if n := held[leaver].leftWith(); !left && n >= 0 {
				left = true
				r.live.Event(fmt.Sprintf("  %5.1fs  worker %d left holding %d job(s): they go back to the group, delivered again to the others",
					time.Since(start).Seconds(), leaver, n))
			}
			r.live.Status(fmt.Sprintf("  %5.1fs  %d of %d jobs settled, %d held by the workers", time.Since(start).Seconds(), settled, o.records, holding), false)
			if settled >= uint64(o.records) {
				break watch
			}
		}
	}
	stop()
	wg.Wait()
	elapsed := time.Since(start)
	if n := held[leaver].leftWith(); !left && n >= 0 {
		// A leave the ticks did not see: the jobs settled first.
		left = true
		r.live.Event(fmt.Sprintf("  %5.1fs  worker %d left holding %d job(s): they went back to the group, delivered again to the others",
			elapsed.Seconds(), leaver, n))
	}
	r.live.Event(fmt.Sprintf("  done in %.1fs; reading the dead-letter topic back to account for every job", elapsed.Seconds()))
	dead, err := r.readLetters(ctx)
	if err != nil {
		return nil, err
	}
	sum := r.summarize(workers, dead, elapsed)
	if !left {
		sum.WorkerLeft = -1
	}
	return sum, nil
}

func (r *shareRun) clusterDesc() string {
	if r.cluster == "kfake" {
		return "an in-process Kafka cluster (kfake)"
	}
	return strings.Join(r.brokers, ",")
}

// requireShareGroups says, on a cluster without share groups, which Kafka
// has them.
func (r *shareRun) requireShareGroups(ctx context.Context, cl *kgo.Client) error {
	if r.cluster == "kfake" {
		return nil
	}
	actx, cancel := context.WithTimeout(ctx, r.g.Timeout)
	defer cancel()
	req := kmsg.NewPtrApiVersionsRequest()
	req.ClientSoftwareName, req.ClientSoftwareVersion = "antidote-demo", "0"
	resp, err := req.RequestWith(actx, cl)
	if err != nil {
		return err
	}
	for _, f := range resp.FinalizedFeatures {
		if f.Name == "share.version" && f.MaxVersionLevel >= 1 {
			return nil
		}
	}
	return fmt.Errorf("the cluster at %s has no share groups: they are in Kafka 4.2 and later, with the share.version feature on", strings.Join(r.brokers, ","))
}

// produce writes the jobs and remembers where each went.
func (r *shareRun) produce(ctx context.Context, cl *kgo.Client) error {
	var (
		mu   sync.Mutex
		ferr error
		wg   sync.WaitGroup
	)
	for i := range r.opts.records {
		kind := shareKind(i)
		v, _ := json.Marshal(shareJob{ID: i, Kind: kind})
		if kind == sharePoison {
			v = []byte("\x00\x01 not a job " + strconv.Itoa(i))
		}
		wg.Add(1)
		cl.Produce(ctx, &kgo.Record{Topic: r.topic, Key: []byte(strconv.Itoa(i)), Value: v}, func(rec *kgo.Record, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				ferr = cmpErr(ferr, err)
				return
			}
			r.kinds[recKey{rec.Partition, rec.Offset}] = kind
		})
	}
	wg.Wait()
	if ferr != nil {
		return fmt.Errorf("producing the jobs: %w", ferr)
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// worker is worker i: a share-group member.
func (r *shareRun) worker(i int, h *holdings, stderr io.Writer) (*consumer.Consumer[string, shareJob], error) {
	w, err := consumer.New(consumer.Config[string, shareJob]{
		Hooks:      h,
		Brokers:    r.brokers,
		Topics:     []string{r.topic},
		ShareGroup: r.group,
		Share:      consumer.Share{FromEarliest: true, MaxRecords: 100},
		Key:        serde.String(),
		Value:      serde.JSON[shareJob](),
		Handler: func(ctx context.Context, rec *consumer.Record[string, shareJob]) error {
			if err := sleepCtx(ctx, shareWork); err != nil {
				return err
			}
			switch rec.Value.Kind {
			case shareOnce:
				if rec.Raw.DeliveryCount() == 1 {
					return failure.Transient(errors.New("payment provider timed out"))
				}
			case shareNever:
				return failure.Transient(errors.New("payment provider timed out"))
			case shareReject:
				return failure.Permanent(errors.New("job references an unknown account"))
			}
			r.mu.Lock()
			r.done[recKey{rec.Raw.Partition, rec.Raw.Offset}]++
			r.byWorker[i]++
			r.mu.Unlock()
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			// Two quick tries here, then another worker's turn.
			Transient: consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(5*time.Millisecond), 2)},
		}},
		Concurrency: consumer.Concurrency{Max: 8},
		ClientOpts: []kgo.Opt{
			kgo.ClientID(fmt.Sprintf("antidote-demo-worker-%d", i)),
			kgo.ProducerLinger(0),
			kgo.DialTimeout(min(r.g.Timeout, 10*time.Second)),
		},
		Logger: r.logger(stderr),
	})
	if err != nil {
		return nil, fmt.Errorf("worker %d: %w", i, err)
	}
	return w, nil
}

func (r *shareRun) logger(stderr io.Writer) *slog.Logger {
	if r.opts.verbose {
		return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// holdings is what a worker holds: the jobs it acquired and has not
// accepted or released, with their delivery counts (from its hooks). When
// due says so, it makes its worker leave as soon as that loses nothing.
type holdings struct {
	consumer.NopHooks
	due   func() bool // time for the worker to leave
	limit func() int  // the group's delivery limit
	leave func()

	mu   sync.Mutex
	held map[recKey]int32
	left int // the jobs held when it left; -1 until it leaves
}

// RecordAcquired notes the job, and leaves when due and safe: with jobs,
// none on its last delivery (the broker archives a job released on its
// last delivery instead of delivering it again, so a worker that leaves
// holding one loses it; see the consumer's doc on share groups).
func (h *holdings) RecordAcquired(e consumer.AcquiredEvent) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.held[recKey{e.Partition, e.Offset}] = e.DeliveryCount
	if h.left >= 0 || h.due == nil || !h.due() {
		return
	}
	limit := h.limit()
	if limit == 0 {
		return
	}
	for _, n := range h.held {
		if int(n) >= limit {
			return
		}
	}
	h.left = len(h.held)
	h.leave()
}

func (h *holdings) RecordAcknowledged(e consumer.AckEvent) {
	if e.Ack == consumer.AckRenew {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.held, recKey{e.Partition, e.Offset})
}

// leftWith is the jobs the worker held when it left, -1 while it has not.
func (h *holdings) leftWith() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.left
}

// shareLetter is what the summary needs of one dead letter.
type shareLetter struct {
	key      recKey
	delivery string
}

func (r *shareRun) readLetters(ctx context.Context) ([]shareLetter, error) {
	cl, err := cli.DialCluster(ctx, r.brokers, r.g.Timeout)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, r.g.Timeout)
	defer cancel()
	var out []shareLetter
	err = deadletter.Scan(mctx, cl, deadletter.ScanConfig{Topic: r.dlq}, func(rec *kgo.Record) error {
		l := shareLetter{key: recKey{-1, rec.Offset}}
		if f, err := deadletter.ParseHeaders(deadletter.RecordOf(rec).Headers); err == nil {
			l.key = recKey{f.Partition, f.Offset}
		}
		for _, h := range rec.Headers {
			if h.Key == consumer.HeaderDeliveryCount {
				l.delivery = string(h.Value)
			}
		}
		out = append(out, l)
		return nil
	})
	switch {
	case errors.Is(err, deadletter.ErrUnknownTopic):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("dead-letter topic %s: %w", r.dlq, err)
	}
	return out, nil
}

func (r *shareRun) summarize(workers []*consumer.Consumer[string, shareJob], dead []shareLetter, elapsed time.Duration) *shareSummary {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := &shareSummary{Produced: len(r.kinds), ByWorker: slices.Clone(r.byWorker), Deliveries: map[int32]uint64{},
		Cluster: r.cluster, Brokers: r.brokers, Topic: r.topic, DLQTopic: r.dlq, Group: r.group, DurationMS: elapsed.Milliseconds()}
	for _, w := range workers {
		sg := w.Stats().ShareGroup
		s.Released += sg.Released
		s.Redelivered += sg.Redelivered
		s.DeliveryLimit = max(s.DeliveryLimit, sg.DeliveryLimit)
		for n, c := range sg.Deliveries {
			s.Deliveries[n] += c
		}
		for _, p := range sg.Problems {
			if !slices.Contains(s.Problems, p) {
				s.Problems = append(s.Problems, p)
			}
		}
	}
	rows := map[string]*shareKindRow{}
	for _, k := range shareKinds {
		rows[k] = &shareKindRow{Kind: k}
	}
	letters := map[recKey]int{}
	for _, l := range dead {
		letters[l.key]++
		if letters[l.key] == 1 {
			if k, ok := r.kinds[l.key]; ok {
				row := rows[k]
				row.DeadLettered++
				if row.LetterDelivery == nil {
					row.LetterDelivery = map[string]int{}
				}
				row.LetterDelivery[l.delivery]++
			}
		} else {
			s.Duplicates++
		}
	}
	for k, kind := range r.kinds {
		rows[kind].Produced++
		n := r.done[k]
		if n > 0 {
			rows[kind].Processed++
			s.Processed++
			if n > 1 {
				s.ProcessedTwice++
			}
			if letters[k] > 0 {
				s.Duplicates++
			}
		}
		if letters[k] > 0 {
			s.DeadLettered++
		}
		if n == 0 && letters[k] == 0 {
			s.Lost++
		}
	}
	for _, k := range shareKinds {
		s.ByKind = append(s.ByKind, *rows[k])
	}
	return s
}

func (r *shareRun) print(w io.Writer, s *shareSummary) {
	fmt.Fprintln(w)
	fmt.Fprintln(w, "What happened to every job (read back from the handler and the dead-letter topic):")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tproduced\tprocessed\tdead-lettered\tletters' delivery count\t")
	for _, row := range s.ByKind {
		counts := slices.Sorted(maps.Keys(row.LetterDelivery))
		var at []string
		for _, c := range counts {
			at = append(at, fmt.Sprintf("%s (%d)", c, row.LetterDelivery[c]))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%s\t\n", row.Kind, row.Produced, row.Processed, row.DeadLettered, cli.Dash(strings.Join(at, ", ")))
	}
	tw.Flush()
	fmt.Fprintln(w)
	fmt.Fprintf(w, "produced %d = processed %d + dead-lettered %d; lost %d, dead-lettered twice or also processed %d\n",
		s.Produced, s.Processed, s.DeadLettered, s.Lost, s.Duplicates)
	if s.ProcessedTwice > 0 {
		fmt.Fprintf(w, "%d job(s) done twice: a share group delivers at least once, and the worker that left did them without its ACCEPT reaching the broker\n", s.ProcessedTwice)
	}
	fmt.Fprintf(w, "jobs done by worker: %v", s.ByWorker)
	if s.WorkerLeft >= 0 {
		fmt.Fprintf(w, " (worker %d left midway)", s.WorkerLeft)
	}
	fmt.Fprintln(w)
	var ds []string
	for _, n := range slices.Sorted(maps.Keys(s.Deliveries)) {
		ds = append(ds, fmt.Sprintf("%d: %d", n, s.Deliveries[n]))
	}
	fmt.Fprintf(w, "acquisitions by delivery count: %s; %d released for another delivery; the group's delivery limit is %d\n",
		strings.Join(ds, ", "), s.Released, s.DeliveryLimit)
	for _, p := range s.Problems {
		fmt.Fprintf(w, "share group setup: %s\n", p)
	}
	if s.Cluster == "kfake" {
		return
	}
	fmt.Fprintf(w, "inspect the letters: %s dlq ls --brokers %s --topic %s\n", cli.SelfCommand(), strings.Join(s.Brokers, ","), s.DLQTopic)
}
