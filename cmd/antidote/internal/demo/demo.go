// Package demo is antidote demo: the Antidote consumer over a stream of
// orders full of poison pills (JSON, Avro with a schema registry that goes
// down, or retry topics), and the summary that accounts for every record.
package demo

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/admin"
	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
	"github.com/antidote-kafka/antidote/serde/avro"
)

// demoOptions are the flags of antidote demo.
type demoOptions struct {
	format     demoFormat
	records    int
	produceFor time.Duration
	outage     time.Duration
	seed       uint64
	keep       bool
	port       int
	verbose    bool
	drain      time.Duration
	admin      string // --admin HOST:PORT
	// retryTopics: the retry-topics demo (--retry-topics).
	retryTopics bool
	// share: the share-group demo (--share, share.go).
	share bool
}

const (
	demoPartitions = 4
	demoTopic      = "orders"
	demoGroup      = "antidote-demo"
)

// NewCommand builds antidote demo: a consumer over a stream full of poison
// pills, on an in-process cluster unless --brokers names one.
func NewCommand() *cobra.Command {
	var (
		o      demoOptions
		format string
	)
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Watch a consumer survive a stream full of poison pills (no setup needed)",
		Long: `Run the Antidote consumer over a stream of orders with the poison pills of
real life mixed in, and see what happens to every record.

With no flags, the demo starts an in-process Kafka cluster (nothing to install)
and a topic "orders" with 4 partitions. It produces orders at a steady pace;
about 4% of them are poison: garbage bytes, truncated JSON, JSON of the wrong
shape, empty values, orders the handler rejects, and orders whose payment call
is flaky. Midway, the inventory database the handler calls goes down for a few
seconds: the affected partitions pause and retry with backoff, and nothing is
dead-lettered because of it.

With --format avro, the orders are Avro in the schema-registry wire format,
with an in-process schema registry. The poison is Avro's: bytes without the
magic byte, an unknown schema id, truncated Avro, and refunds, a record type
the service has no Go type for (skipped, and counted). Midway, the schema
registry goes down instead of the database, as the producer moves to a new
schema version: the consumer waits for it behind a circuit breaker, without
spinning, and carries on by itself.

At the end it reads the dead-letter topic back and accounts for every record:
produced = processed + dead-lettered + skipped, and lost = 0.

With --retry-topics, the records are the events of orders (created, paid,
packed, shipped, delivered), keyed by order id, and the payment provider is
flaky for some orders. A failed payment gets 2 quick tries in place, then goes
through the delay tiers orders.retry.200ms, orders.retry.1s and
orders.retry.3s while its partition moves on, then to the dead-letter topic.
The later events of its order are parked behind it; the other orders flow on.
The handler checks that no event of an order is processed before an earlier
one, and the summary says how many were ("per-key order").

With --share, the records are jobs for a share group (KIP-932, "queues for
Kafka", Kafka 4.2+): six workers share a topic of two partitions, each job
acquired by one worker at a time and acknowledged on its own. Garbage and
invalid jobs are dead-lettered at once; flaky jobs fail on their first
delivery, are released, and are done by a later delivery, often another
worker's; jobs that never succeed are released until the group's delivery
limit, then dead-lettered with their delivery count. Midway a worker leaves
and the jobs it holds go back to the group. The in-process cluster serves
share groups; on your cluster it needs Kafka 4.2 or later.

With --brokers (or ANTIDOTE_BROKERS), the same demo runs on your cluster, with
topics named orders-<random> and orders-<random>.dlq (and with --retry-topics
its tiers), which it leaves there.`,
		Example: `  antidote demo
  antidote demo --keep          # then try: antidote dlq ls --brokers <addr> --topic orders.dlq
  antidote demo -o json
  antidote demo --format avro   # Avro, with a schema registry that goes down
  antidote demo --retry-topics  # delay tiers that keep each order's events in order
  antidote demo --share         # a share group: more workers than partitions
  antidote demo --brokers localhost:9092
  antidote demo --admin 127.0.0.1:9180 --keep   # admin API and /metrics; see antidote ctl --help`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch format {
			case formatJSON.String():
				o.format = formatJSON
			case formatAvro.String():
				o.format = formatAvro
			default:
				return cli.Usagef("--format %q: must be json or avro", format)
			}
			if o.records < 100 {
				return cli.Usagef("--records %d: must be at least 100", o.records)
			}
			if o.produceFor <= 0 {
				return cli.Usagef("--produce-for %v: must be positive", o.produceFor)
			}
			if o.outage < 0 {
				return cli.Usagef("--outage %v: must not be negative", o.outage)
			}
			if err := checkAdminAddr(o.admin); err != nil {
				return err
			}
			if o.share {
				for _, f := range []string{"format", "retry-topics", "outage", "keep", "admin"} {
					if cmd.Flags().Changed(f) {
						return cli.Usagef("--%s does not apply with --share: the share-group demo has its own story", f)
					}
				}
				return runShareDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), cli.ReadGlobals(cmd), o)
			}
			if o.retryTopics {
				if o.format != formatJSON {
					return cli.Usagef("--retry-topics: the retry-topics demo's events are JSON; drop --format %s", format)
				}
				if cmd.Flags().Changed("outage") {
					return cli.Usagef("--outage does not apply with --retry-topics: its dependency is the flaky payment provider")
				}
				o.outage = 0
			}
			g := cli.ReadGlobals(cmd)
			if o.keep && g.Explicit {
				return cli.Usagef("--keep applies to the in-process cluster only; with --brokers the topics stay on your cluster anyway")
			}
			return runDemo(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), g, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&format, "format", "json", "format of the orders: json, or avro (with an in-process schema registry)")
	f.IntVar(&o.records, "records", 20000, "number of records to produce")
	f.DurationVar(&o.outage, "outage", 3*time.Second, "how long the inventory database (with --format avro: the schema registry) is down (0: no outage)")
	f.BoolVar(&o.keep, "keep", false, "keep the in-process cluster up after the summary, to try antidote dlq on it; Ctrl-C ends it")
	f.BoolVarP(&o.verbose, "verbose", "v", false, "log the consumer's warnings and errors to stderr")
	f.DurationVar(&o.produceFor, "produce-for", 6*time.Second, "spread producing over this long")
	f.Uint64Var(&o.seed, "seed", 42, "seed of the poison-pill mix")
	f.IntVar(&o.port, "port", 0, "port of the in-process cluster (0: any free port)")
	f.BoolVar(&o.retryTopics, "retry-topics", false, "orders' events, a payment provider flaky for some orders, and delay tiers that keep each order's events in order")
	f.BoolVar(&o.share, "share", false, "jobs for a share group (Kafka 4.2+ queues) with more workers than partitions: releases, the delivery limit, a worker that leaves")
	f.StringVar(&o.admin, "admin", "", "serve the admin API and /metrics on this loopback HOST:PORT during the demo (and after it with --keep)")
	f.DurationVar(&o.drain, "drain-timeout", time.Minute, "how long to wait for the consumer to settle every record")
	for _, hidden := range []string{"produce-for", "seed", "port", "drain-timeout"} {
		_ = f.MarkHidden(hidden)
	}
	return cmd
}

// Order is the demo's record value.
type Order struct {
	ID          int    `json:"id" avro:"id"`
	Customer    string `json:"customer" avro:"customer"`
	SKU         string `json:"sku" avro:"sku"`
	Quantity    int    `json:"quantity" avro:"quantity"`
	AmountCents int64  `json:"amount_cents" avro:"amount_cents"`
}

// recKey identifies a record of the source topic.
type recKey struct {
	partition int32
	offset    int64
}

// depText is what the demo says about a dependency that goes down.
type depText struct {
	name       string // "inventory database"
	short      string // "database"
	intro      string // the outage, announced; %v is its duration
	downEvent  string // what the events say
	upEvent    string
	waited     string // the summary's notes
	failed     string
	failedNote string
}

var databaseDep = depText{
	name:       "inventory database",
	short:      "database",
	intro:      "the inventory database the handler calls goes down for %v",
	downEvent:  "calls fail with a transient error; affected partitions pause and retry with backoff",
	upEvent:    "partitions resume where they stopped",
	waited:     "held in their paused partitions, then processed in order",
	failed:     "failed calls retried",
	failedNote: "with exponential backoff (50ms, doubling, at most 1s): no busy loop",
}

// dependency is a dependency of the consumer that goes down midway: the
// simulated inventory database the handler calls, or the schema registry.
type dependency struct {
	depText
	// takeDown and bringUp, if set, stop and restart it (the database is
	// down while down is set).
	takeDown func()
	bringUp  func() error

	down     atomic.Bool
	failures atomic.Int64 // calls that failed because it was down

	mu        sync.Mutex
	start     time.Time // zero until it goes down
	end       time.Time // zero until it comes back
	recovered time.Time // first successful call after end
}

var errDependencyDown = errors.New("connection refused (simulated outage)")

func (d *dependency) call(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.down.Load() {
		d.failures.Add(1)
		return failure.Transient(fmt.Errorf("%s: %w", d.name, errDependencyDown))
	}
	d.succeeded()
	return nil
}

// succeeded notes a successful call: the first after the outage is its
// recovery.
func (d *dependency) succeeded() {
	d.mu.Lock()
	if !d.end.IsZero() && d.recovered.IsZero() {
		d.recovered = time.Now()
	}
	d.mu.Unlock()
}

func (d *dependency) times() (start, end, recovered time.Time) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.start, d.end, d.recovered
}

// ledger is what the demo saw: what it produced, and what the handler
// completed. The dead-letter topic is read back at the end.
type ledger struct {
	mu              sync.Mutex
	produced        map[recKey]demoKind
	processed       map[recKey]int // attempts
	delayed         int            // processed after the outage began, produced before it ended
	produceErrs     int
	firstProduceErr error
}

func newLedger(n int) *ledger {
	return &ledger{produced: make(map[recKey]demoKind, n), processed: make(map[recKey]int, n)}
}

func (l *ledger) sentOK(k recKey, kind demoKind) {
	l.mu.Lock()
	l.produced[k] = kind
	l.mu.Unlock()
}

func (l *ledger) sentErr(err error) {
	l.mu.Lock()
	l.produceErrs++
	if l.firstProduceErr == nil {
		l.firstProduceErr = err
	}
	l.mu.Unlock()
}

// done records a completed record and returns how many are done.
func (l *ledger) done(k recKey, attempts int, delayed bool) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, dup := l.processed[k]; !dup && delayed {
		l.delayed++
	}
	l.processed[k] = attempts
	return len(l.processed)
}

// demoRun is one run of the demo.
type demoRun struct {
	opts    demoOptions
	g       cli.Globals
	out     io.Writer
	brokers []string
	cluster string // kfake or kafka
	topic   string
	dlq     string
	group   string
	plan    *demoPlan
	db      dependency  // the inventory database the handler calls
	avro    *demoAvro   // with --format avro
	dep     *dependency // the one that goes down midway: db, or the registry
	ledger  *ledger
	live    *cli.Live
	start   time.Time
	admin   *demoAdmin  // with --admin
	retry   *retryWatch // with --retry-topics

	runCtx     context.Context // ends when the demo stops consuming
	outageOnce atomic.Bool
	bg         sync.WaitGroup // the outage
}

func runDemo(ctx context.Context, stdout, stderr io.Writer, g cli.Globals, o demoOptions) error {
	r := &demoRun{opts: o, g: g, out: stdout, ledger: newLedger(o.records)}
	if o.retryTopics {
		r.plan = newRetryPlan(o.records, o.seed)
	} else {
		r.plan = newDemoPlan(o.records, o.seed, o.format)
	}
	r.topic, r.group, r.cluster = demoTopic, demoGroup, "kfake"
	r.db.depText = databaseDep
	r.dep = &r.db
	adm, err := newDemoAdmin(o.admin)
	if err != nil {
		return err
	}
	r.admin = adm
	defer r.admin.close()

	var fake *kfake.Cluster
	if g.Explicit {
		r.brokers, r.cluster = g.Brokers, "kafka"
		suffix := randomSuffix()
		r.topic, r.group = demoTopic+"-"+suffix, demoGroup+"-"+suffix
	} else {
		opts := []kfake.Opt{kfake.NumBrokers(1)}
		if o.port > 0 {
			opts = append(opts, kfake.Ports(o.port))
		}
		var err error
		if fake, err = kfake.NewCluster(opts...); err != nil {
			return fmt.Errorf("starting the in-process Kafka cluster: %w", err)
		}
		defer fake.Close()
		r.brokers = fake.ListenAddrs()
	}
	r.dlq = deadletter.Template(deadletter.DefaultTemplate).Name(r.topic, r.group)
	if o.retryTopics {
		r.retry = newRetryWatch(r.plan, r.topic, r.group)
	}
	if o.format == formatAvro {
		var err error
		if r.avro, err = newDemoAvro(ctx, r.topic, g.Timeout, r.logger(stderr)); err != nil {
			return err
		}
		defer r.avro.close()
		r.dep = &r.avro.dep
	}

	// The live display goes to stdout with the table; with -o json it goes
	// to stderr, and only when that is a terminal, so stdout stays pure JSON.
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
		r.printSummary(sum)
	}
	if o.keep && fake != nil {
		r.admin.keepHint(stdout, stderr, g.JSON())
		// With --admin, a consumer of the group stays up too, so that
		// ctl pause, resume and skip have one to act on.
		wait, err := r.admin.keepConsumer(ctx, r.brokers, r.topic, r.group, r.logger(stderr))
		if err != nil {
			return err
		}
		w := stdout
		if g.JSON() {
			w = stderr
		}
		r.admin.keepHintStuck(w, cli.SelfCommand(), strings.Join(r.brokers, ","), r.topic)
		r.keepUp(ctx, stdout, stderr)
		wait()
	}
	if sum.Lost != 0 {
		return fmt.Errorf("%d record(s) lost: produced %d, processed %d, dead-lettered %d, skipped %d; this is a bug, please report it",
			sum.Lost, sum.Produced, sum.Processed, sum.DeadLettered, sum.Skipped)
	}
	return nil
}

func randomSuffix() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

func (r *demoRun) run(ctx context.Context, stderr io.Writer) (*demoSummary, error) {
	o := r.opts
	if r.retry != nil {
		r.retry.intro(r)
	} else {
		r.live.Event(fmt.Sprintf("Antidote demo: %d orders, about %.0f%% of them poison, on %s",
			o.records, 100*r.plan.poisonShare(), r.clusterDesc()))
		r.live.Event(fmt.Sprintf("  topic %s (%d partitions), consumer group %s, dead letters to %s",
			r.topic, demoPartitions, r.group, r.dlq))
		if r.avro != nil {
			r.live.Event(fmt.Sprintf("  Avro orders, schemas in an in-process schema registry at %s", r.avro.sreg.URL()))
		}
		if o.outage > 0 {
			r.live.Event("  midway, " + fmt.Sprintf(r.dep.intro, o.outage))
		}
		r.live.Event("")
	}

	// Admin and producer client; it also proves the cluster is reachable.
	pcl, err := cli.DialCluster(ctx, r.brokers, r.g.Timeout, kgo.ProducerLinger(5*time.Millisecond), kgo.ClientID("antidote-demo-producer"))
	if err != nil {
		return nil, err
	}
	defer pcl.Close()
	adm := kadm.NewClient(pcl)
	if err := r.createTopic(ctx, adm); err != nil {
		return nil, err
	}

	var (
		value serde.Deserializer[Order] = serde.JSON[Order]()
		skip  func(deadletter.Stage, error) bool
		deps  map[string]func() string
	)
	if r.avro != nil {
		if value, err = r.avro.deserializer(); err != nil {
			return nil, err
		}
		// Refunds share the topic; this service does not handle them.
		skip = func(_ deadletter.Stage, err error) bool { return avro.IsUnknownType(err) }
		deps = map[string]func() string{registryDependency: r.avro.breakerState}
	}
	var c demoConsumer
	if r.retry != nil {
		c, err = r.newRetryConsumer(r.logger(stderr))
	} else {
		c, err = consumer.New(consumer.Config[string, Order]{
			Brokers: r.brokers,
			Topics:  []string{r.topic},
			Group:   r.group,
			Key:     serde.String(),
			Value:   value,
			Handler: r.handle,
			Policy: consumer.Policy{
				// Schema lookups: retried until the registry is back. The
				// circuit breaker paces them (its Retry-After is the time to
				// its next probe); a short backoff of our own keeps the
				// partitions in step with the probes.
				Deserialize: consumer.StagePolicy{
					Transient: consumer.Rule{Retry: backoff.Exponential{Initial: 20 * time.Millisecond, Max: 100 * time.Millisecond}},
				},
				Process: consumer.StagePolicy{
					// Long enough to ride out the outage: nothing it touches is
					// dead-lettered.
					Transient: consumer.Rule{Retry: backoff.MaxElapsed(backoff.Exponential{Initial: 50 * time.Millisecond, Max: time.Second}, 30*time.Second)},
				},
			},
			SkipIf:         skip,
			Dependencies:   deps,
			Hooks:          r.admin.hooks(),
			CommitInterval: time.Second,
			ClientOpts: []kgo.Opt{
				kgo.ClientID("antidote-demo"),
				kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
				kgo.FetchMaxWait(500 * time.Millisecond),
				// A dead-letter write is synchronous and holds its partition:
				// franz-go's default 10ms linger would add 10ms to each.
				kgo.ProducerLinger(0),
				kgo.DialTimeout(min(r.g.Timeout, 10*time.Second)),
				r.admin.clientOpt(),
			},
			Logger: r.logger(stderr),
		})
	}
	if err != nil {
		return nil, fmt.Errorf("consumer: %w", err)
	}
	if r.avro != nil {
		r.avro.reg.Breaker().OnStateChange(func(from, to avro.State) {
			switch {
			case to == avro.Closed:
				// Partitions sleeping in a retry resume at once.
				c.WakeRetries()
				r.live.Event(fmt.Sprintf("  %5.1fs  circuit breaker closed: the registry answers; waiting partitions wake up", time.Since(r.start).Seconds()))
			case from == avro.Closed:
				r.live.Event(fmt.Sprintf("  %5.1fs  circuit breaker open: lookups fail at once, one probe every %v", time.Since(r.start).Seconds(), registryProbe))
			}
		})
	}

	if err := r.admin.start(c, r.brokers, r.logger(stderr), r.live, stderr); err != nil {
		c.Close()
		return nil, err
	}
	r.start = time.Now()
	runCtx, stopConsumer := context.WithCancel(ctx)
	defer stopConsumer()
	r.runCtx = runCtx
	defer r.bg.Wait()
	runErr := make(chan error, 1)
	go func() { runErr <- c.Run(runCtx) }()

	produceDone := make(chan struct{})
	go func() {
		defer close(produceDone)
		r.produce(runCtx, pcl)
	}()

	// Watch until every produced record is settled.
	var (
		tick        = time.NewTicker(200 * time.Millisecond)
		deadline    <-chan time.Time
		producing   = true
		rate        = newRateMeter()
		consumerErr error
		timedOut    bool
	)
	defer tick.Stop()
watch:
	for {
		select {
		case <-ctx.Done():
			break watch
		case err := <-runErr:
			consumerErr = err
			if consumerErr == nil {
				consumerErr = errors.New("consumer stopped early")
			}
			runErr = nil
			break watch
		case <-produceDone:
			producing, produceDone = false, nil
			deadline = time.After(o.drain)
		case <-deadline:
			r.live.Event(fmt.Sprintf("  the consumer did not settle every record within %v; stopping", o.drain))
			timedOut = true
			break watch
		case <-tick.C:
			if r.retry != nil {
				r.retry.poll(ctx, adm, r.group, time.Second, false)
			}
			st := c.Stats()
			settled := st.Processed + st.DeadLettered + st.Skipped
			r.live.Status(r.statusLine(st, rate.add(settled), producing), false)
			if !producing && settled >= uint64(r.producedCount()) {
				break watch
			}
		}
	}
	st := c.Stats()
	r.live.Event(r.statusLine(st, rate.current(), false))
	stopConsumer()
	r.bg.Wait()
	if runErr != nil {
		if err := <-runErr; err != nil && consumerErr == nil {
			consumerErr = err
		}
	}
	if produceDone != nil {
		<-produceDone
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if consumerErr != nil {
		return nil, fmt.Errorf("consumer: %w", consumerErr)
	}
	elapsed := time.Since(r.start)
	r.live.Event(fmt.Sprintf("  done in %.1fs; reading the dead-letter topic back to account for every record", elapsed.Seconds()))

	dead, err := readDeadLetters(ctx, r.brokers, r.g.Timeout, r.dlq)
	if err != nil {
		return nil, err
	}
	sum := r.summarize(st, dead, elapsed)
	if r.retry != nil {
		// The consumer has committed on its way out: what the tiers hold now
		// is what they were left with.
		r.retry.summary(sum, st, r.retry.poll(ctx, adm, r.group, r.g.Timeout, true))
	}
	sum.SettleTimedOut = timedOut
	return sum, nil
}

func (r *demoRun) clusterDesc() string {
	if r.cluster == "kfake" {
		return "an in-process Kafka cluster (kfake) at " + strings.Join(r.brokers, ",")
	}
	return "Kafka at " + strings.Join(r.brokers, ",")
}

func (r *demoRun) createTopic(ctx context.Context, adm *kadm.Client) error {
	cctx, cancel := context.WithTimeout(ctx, r.g.Timeout)
	defer cancel()
	resp, err := adm.CreateTopic(cctx, demoPartitions, -1, nil, r.topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return fmt.Errorf("creating topic %s: %w", r.topic, err)
	}
	// Wait until every partition has a leader (a real cluster takes a moment).
	for {
		md, err := adm.Metadata(cctx, r.topic)
		if err == nil {
			if td, ok := md.Topics[r.topic]; ok && td.Err == nil && len(td.Partitions) == demoPartitions {
				ready := true
				for _, p := range td.Partitions {
					ready = ready && p.Err == nil && p.Leader >= 0
				}
				if ready {
					return nil
				}
			}
		}
		select {
		case <-cctx.Done():
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("topic %s: no leader for every partition within %v", r.topic, r.g.Timeout)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// demoConsumer is what the demo needs of its consumer, whatever its value
// type.
type demoConsumer interface {
	admin.Consumer
	Run(ctx context.Context) error
	Close()
	WakeRetries()
}

// handle is the demo's business logic: validate the order, reserve stock in
// the inventory database, charge the payment service.
func (r *demoRun) handle(ctx context.Context, rec *consumer.Record[string, Order]) error {
	o := rec.Value
	if o.AmountCents <= 0 {
		return failure.Permanent(&failure.ValidationError{Field: "order.amount_cents", Reason: fmt.Sprintf("%d: must be positive", o.AmountCents)})
	}
	if err := r.db.call(ctx); err != nil {
		return err
	}
	if n := r.plan.flakyFailures(o.ID); rec.Attempt <= n {
		return failure.Transient(&failure.HTTPError{StatusCode: 503, Err: errors.New("payment service: temporarily unavailable")})
	}
	start, end, _ := r.dep.times()
	delayed := !start.IsZero() && !end.IsZero() && rec.Raw.Timestamp.Before(end)
	n := r.ledger.done(recKey{rec.Raw.Partition, rec.Raw.Offset}, rec.Attempt, delayed)
	// Midway (by what the consumer has done, so that it always hits a
	// consumer in full flow), take the dependency down.
	if n >= len(r.plan.kinds)*2/5 && r.opts.outage > 0 && r.outageOnce.CompareAndSwap(false, true) {
		r.bg.Add(1)
		go func() {
			defer r.bg.Done()
			r.outage(r.runCtx)
		}()
	}
	return nil
}

// produce writes the plan at a steady pace over produceFor.
func (r *demoRun) produce(ctx context.Context, cl *kgo.Client) {
	o := r.opts
	n := len(r.plan.kinds)
	start := time.Now()
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for i := 0; i < n; {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		target := min(n, int(float64(n)*time.Since(start).Seconds()/o.produceFor.Seconds())+1)
		for ; i < target; i++ {
			kind := r.plan.kinds[i]
			value, err := r.value(ctx, i)
			if err != nil {
				r.ledger.sentErr(err)
				continue
			}
			rec := &kgo.Record{Topic: r.topic, Key: r.plan.key(i), Value: value}
			cl.Produce(ctx, rec, func(rec *kgo.Record, err error) {
				if err != nil {
					r.ledger.sentErr(err)
					return
				}
				r.ledger.sentOK(recKey{rec.Partition, rec.Offset}, kind)
			})
		}
	}
	if err := cl.Flush(ctx); err != nil && ctx.Err() == nil {
		r.ledger.sentErr(err)
	}
}

// value is record i of the plan, encoded.
func (r *demoRun) value(ctx context.Context, i int) ([]byte, error) {
	if r.avro != nil {
		return r.avro.value(ctx, r.plan, i)
	}
	return r.plan.value(i), nil
}

func (r *demoRun) logger(stderr io.Writer) *slog.Logger {
	if r.opts.verbose {
		return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	return slog.New(slog.DiscardHandler)
}

// outage takes the dependency down for opts.outage.
func (r *demoRun) outage(ctx context.Context) {
	d := r.dep
	d.mu.Lock()
	d.start = time.Now()
	d.mu.Unlock()
	if d.takeDown != nil {
		d.takeDown()
	}
	d.down.Store(true)
	r.live.Event(fmt.Sprintf("  %5.1fs  %s DOWN: %s", time.Since(r.start).Seconds(), d.name, d.downEvent))
	// The outage lasts opts.outage from the moment a record first meets
	// it (at most outageWait later), so that the story is told even when
	// the consumer lags behind the producer on a busy machine.
	met := time.NewTicker(10 * time.Millisecond)
	defer met.Stop()
	give := time.NewTimer(outageWait)
	defer give.Stop()
	for before := d.failures.Load(); d.failures.Load() == before; {
		select {
		case <-ctx.Done():
		case <-give.C:
		case <-met.C:
			continue
		}
		break
	}
	t := time.NewTimer(r.opts.outage)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	d.mu.Lock()
	d.end = time.Now()
	d.mu.Unlock()
	if d.bringUp != nil {
		if err := d.bringUp(); err != nil {
			r.live.Event(fmt.Sprintf("  %5.1fs  %s: could not restart it: %v", time.Since(r.start).Seconds(), d.name, err))
		}
	}
	d.down.Store(false)
	r.live.Event(fmt.Sprintf("  %5.1fs  %s UP again after %.1fs: %s",
		time.Since(r.start).Seconds(), d.name, d.end.Sub(d.start).Seconds(), d.upEvent))
}

// outageWait bounds how long an outage waits for a record to meet it.
const outageWait = 30 * time.Second

func (r *demoRun) producedCount() int {
	r.ledger.mu.Lock()
	defer r.ledger.mu.Unlock()
	return len(r.ledger.produced)
}

func (r *demoRun) statusLine(st consumer.Stats, perSec float64, producing bool) string {
	if r.retry != nil {
		return r.retry.statusLine(r, st, perSec, producing)
	}
	state := "up"
	if r.dep.down.Load() {
		state = "DOWN"
	}
	r.ledger.mu.Lock()
	produced := len(r.ledger.produced)
	r.ledger.mu.Unlock()
	prod := fmt.Sprintf("produced %d", produced)
	if producing {
		prod = fmt.Sprintf("produced %d/%d", produced, len(r.plan.kinds))
	}
	dep := "inventory db " + state
	if r.avro != nil {
		dep = fmt.Sprintf("skipped %d  registry %s (breaker %s)", st.Skipped, state, st.Dependencies[registryDependency])
	}
	return fmt.Sprintf("  %5.1fs  %6.0f rec/s  %s  processed %d  retrying %d  dead-lettered %d  %s",
		time.Since(r.start).Seconds(), perSec, prod, st.Processed, len(st.Stuck), st.DeadLettered, dep)
}

func (r *demoRun) keepUp(ctx context.Context, stdout, stderr io.Writer) {
	w := stdout
	if r.g.JSON() {
		w = stderr
	}
	b := strings.Join(r.brokers, ",")
	self := cli.SelfCommand()
	fmt.Fprintf(w, "\nThe in-process cluster stays up at %s. Press Ctrl-C to stop it. In another shell, try:\n", b)
	fmt.Fprintf(w, "  %s dlq ls --brokers %s --topic %s\n", self, b, r.dlq)
	fmt.Fprintf(w, "  %s dlq stats --brokers %s --topic %s\n", self, b, r.dlq)
	if at := firstLetter(ctx, r.brokers, r.g.Timeout, r.dlq); at != "" {
		fmt.Fprintf(w, "  %s dlq show --brokers %s --topic %s %s\n", self, b, r.dlq, at)
	}
	fmt.Fprintf(w, "  %s dlq redrive --brokers %s --topic %s --dry-run\n", self, b, r.dlq)
	fmt.Fprintf(w, "  %s poison --brokers %s --topic %s --kind garbage --count 5\n", self, b, r.topic)
	if r.avro != nil {
		fmt.Fprintf(w, "The schema registry stays up too, at %s.\n", r.avro.sreg.URL())
	}
	<-ctx.Done()
	fmt.Fprintln(w, "\nstopped.")
}

// rateMeter measures settled records per second over the last second.
type rateMeter struct {
	samples []rateSample
}

type rateSample struct {
	at time.Time
	n  uint64
}

func newRateMeter() *rateMeter { return &rateMeter{} }

func (m *rateMeter) add(n uint64) float64 {
	now := time.Now()
	m.samples = append(m.samples, rateSample{now, n})
	for len(m.samples) > 2 && now.Sub(m.samples[1].at) >= time.Second {
		m.samples = m.samples[1:]
	}
	return m.current()
}

func (m *rateMeter) current() float64 {
	if len(m.samples) < 2 {
		return 0
	}
	a, b := m.samples[0], m.samples[len(m.samples)-1]
	d := b.at.Sub(a.at).Seconds()
	if d <= 0 || b.n < a.n {
		return 0
	}
	return float64(b.n-a.n) / d
}
