package consumer

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// Consumer is a consumer-group member that runs fetch → decode → process →
// settle → commit and never blocks on a poison pill. Create it with [New] and
// start it with [Run]. Its methods are safe for concurrent use.
type Consumer[K, V any] struct {
	cfg        Config[K, V]
	policy     resolved
	classifier failure.Classifier
	held       heldIDs // the topic ids the client fetched (fetcherr.go)
	floors     *floors // the records the workers were handed (floor.go)
	// topicParts is each source topic's partition count, as the metadata
	// said when watchTopicIDs last read it (every forgetEvery); nil before.
	topicParts atomic.Pointer[[]Topic]
	pattern    *topicWatch // TopicPattern's subscriptions; nil without one
	log        *slog.Logger
	cl         *kgo.Client
	dlq        *dlqWriter
	hooks      Hooks // nil when none
	stats      stats
	budget     budget // what the flowing partitions hold together
	view       fetchView
	// wantPause are the full partitions whose fetching the poll loop
	// pauses at its next chance, and round counts its polls (pollRound).
	// Only the poll goroutine uses them.
	wantPause map[tp]*partition[K, V]
	round     uint64
	rot       *rotation[K, V] // the rotation under way, if any (pollRound)
	rotTried  map[tp]bool     // full partitions that had a rotation since they filled
	flood     flood
	attempts  attempts
	tiers     *tiers // nil without retry topics
	txn       *txn   // nil unless ExactlyOnce
	brokers   brokerWatch
	built     chan struct{} // closed when New has finished: the group may assign partitions before

	// share is the source of a share-group member, nil unless
	// Config.ShareGroup (share.go).
	share *shareSource[K, V]

	retryOff atomic.Bool
	// wakeCh is closed and replaced to wake every sleeping retry: when the
	// kill switch flips, or on WakeRetries.
	wakeMu sync.Mutex
	wakeCh chan struct{}

	mu    sync.Mutex
	parts map[tp]*partition[K, V]
	// mine is what the group assigned this member (guarded by mu): a
	// partition may be assigned before it has a worker in parts.
	mine map[tp]bool
	// opPaused are the partitions an operator paused (Pause), so that a
	// worker started again (after an aborted transaction) stays paused;
	// opSkips the records an operator skipped (Skip), so that they stay
	// skipped. Pauses are forgotten when the partition leaves this member;
	// skips too, except in the exactly-once mode, where the revoke aborts
	// the transaction that held the skip and the partition may come back
	// (an eager rebalance gives it back at once). A topic created again
	// forgets its skips: its offsets start again.
	opPaused map[tp]bool
	opSkips  map[tp]map[int64]bool

	assigned atomic.Int64 // partitions this member owns
	runOnce  atomic.Bool
	runDone  chan struct{}   // closed when Run returns
	runCtx   context.Context // ended by Run's ctx, a halt or Close
	stop     context.CancelCauseFunc
	running  sync.WaitGroup // partition workers
	haltOnce sync.Once
	haltErr  error
}

type tp struct {
	topic     string
	partition int32
}

// New validates cfg and creates a consumer. Invalid configuration fails here
// with an error that wraps [ErrConfig] and names the key. The kill switch
// [EnvRetryDisabled] is read here.
func New[K, V any](cfg Config[K, V]) (*Consumer[K, V], error) {
	if cfg.ShareGroup != "" {
		return newShare(cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	off, err := retryDisabledFromEnv()
	if err != nil {
		return nil, err
	}
	if cfg.CommitInterval == 0 {
		cfg.CommitInterval = defaultCommitInterval
	}
	cfg.Buffer = cfg.Buffer.withDefaults()
	if cfg.BatchHandler != nil {
		cfg.Handler = oneOf(cfg.BatchHandler)
		cfg.Batching = cfg.Batching.withDefaults()
		if cfg.Concurrency.Max > 1 && cfg.Concurrency.Ahead == 0 {
			// Room for a full batch in each shard, and the next.
			cfg.Concurrency.Ahead = 2 * cfg.Concurrency.Max * cfg.Batching.Size
		}
	}
	cfg.Concurrency = cfg.Concurrency.withDefaults()
	cfg.FloodGuard = cfg.FloodGuard.withDefaults()
	if cfg.ExactlyOnce.on() {
		cfg.ExactlyOnce = cfg.ExactlyOnce.withDefaults()
		// One entry per partition, written outside any transaction: not
		// kept in this mode (documented).
		cfg.DurableAttempts.Disable = true
	}
	cfg.commonDefaults()
	c := newConsumer(cfg, off, cfg.Logger.With("group", cfg.Group))
	c.budget = budget{maxRecords: cfg.Buffer.TotalRecords, maxBytes: cfg.Buffer.TotalBytes}
	c.dlq.txnal = cfg.ExactlyOnce.on()
	if cfg.ExactlyOnce.on() {
		c.txn = newTxn(cfg.ExactlyOnce, c.log)
		c.txn.onCommit = func(marks map[tp]kgo.EpochOffset) {
			c.floors.committed(marks)
			c.pruneSkips(marks)
		}
		c.txn.group = cfg.Group
		c.txn.hooks = c.hooks
	}
	topics := cfg.Topics
	if cfg.RetryTopics.on() {
		c.tiers = newTiers(cfg.RetryTopics, cfg.Topics, cfg.Group)
		if err := c.tiers.checkNames(cfg.Topics); err != nil {
			return nil, err
		}
		c.dlq.isTier = func(t string) bool { _, ok := c.tiers.byTopic[t]; return ok }
		c.dlq.tierGone = func(t string) {
			c.tiers.gone(t)
			c.consumeAfresh(t)
		}
		topics = append(slices.Clip(cfg.Topics), c.tiers.topics()...)
	}

	opts := make([]kgo.Opt, 0, len(cfg.ClientOpts)+16)
	if len(cfg.Brokers) > 0 {
		opts = append(opts, kgo.SeedBrokers(cfg.Brokers...))
	}
	opts = append(opts,
		// Dead letters wait up to letterLinger to go out together, unless
		// the user sets a linger of their own.
		kgo.ProducerLinger(letterLinger),
		// A resumed partition is fetched again within half a second, as
		// with the Java client's fetch.max.wait.ms, not franz-go's 5s.
		kgo.FetchMaxWait(defaultFetchMaxWait),
		kgo.WithLogger(clientLogger{kslog.New(c.log.With("client", "franz-go")), kgo.LogLevelWarn}),
	)
	if c.txn == nil {
		// Bounds one dead-letter write (the client writes nothing else
		// but the durable attempts, which have deadlines of their own).
		// franz-go counts it from a record's timestamp, so in the
		// exactly-once mode, whose outputs keep the timestamps handlers
		// give them (an hour-old record forwarded as it is), each write
		// has a deadline of its own instead (dlqWriter.send, txn.write).
		opts = append(opts, kgo.RecordDeliveryTimeout(cfg.DeadLetter.WriteTimeout))
	}
	if c.txn != nil {
		// What the consumer reads was committed; ClientOpts may say
		// otherwise.
		opts = append(opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()))
	}
	opts = append(opts, cfg.ClientOpts...)
	if c.txn != nil {
		// Offsets are committed in the transactions.
		opts = append(opts, kgo.TransactionalID(cfg.ExactlyOnce.TransactionalID), kgo.DisableAutoCommit())
	} else {
		opts = append(opts, kgo.AutoCommitMarks(), kgo.AutoCommitInterval(cfg.CommitInterval))
	}
	opts = append(opts,
		kgo.ConsumerGroup(cfg.Group),
		kgo.ConsumeTopics(topics...),
		kgo.BlockRebalanceOnPoll(),
		kgo.OnPartitionsAssigned(c.onAssigned),
		kgo.OnPartitionsRevoked(c.onRevoked),
		kgo.OnPartitionsLost(c.onLost),
		kgo.RecordPartitioner(newDLQPartitioner(c.dlq)),
		kgo.ProducerBatchMaxBytesFn(c.dlq.batchMax),
		kgo.WithHooks(&c.brokers, &c.view),
	)
	// Retry topics need a source partition and its tier partitions on one
	// member: the range assignor gives partition N of every topic with the
	// same partition count to the same member.
	balancer := kgo.StickyBalancer()
	if c.tiers != nil {
		balancer = kgo.RangeBalancer()
	}
	switch {
	case cfg.GroupProtocol == GroupConsumer:
		opts = append(opts, kgo.ServerSideBalancer(), kgo.Balancers(balancer))
	case c.tiers != nil:
		opts = append(opts, kgo.Balancers(balancer))
	}
	var cl *kgo.Client
	if c.txn != nil {
		sess, err := kgo.NewGroupTransactSession(opts...)
		if err != nil {
			return nil, configErr("ClientOpts", err.Error())
		}
		c.txn.sess, cl = sess, sess.Client()
	} else if cl, err = kgo.NewClient(opts...); err != nil {
		return nil, configErr("ClientOpts", err.Error())
	}
	c.cl = cl
	c.dlq.attach(cl)
	if c.txn != nil {
		c.txn.writerTopic = c.dlq.writes
	}
	if !cfg.DurableAttempts.Disable {
		tmpl := cfg.DurableAttempts.Topic
		if tmpl == "" {
			tmpl = defaultAttemptsTopic
		}
		// The state topic is read with a client of its own: the
		// connection of the consumer's client, no group.
		c.attempts = attempts{topic: tmpl.Name("", cfg.Group), cl: cl, adm: c.dlq.adm, opts: readerOpts(cl), log: c.log}
	}
	if cfg.TopicPattern != "" {
		re, _ := compileTopicPattern(cfg.TopicPattern) // checked by validate
		w := &topicWatch{re: re, every: cmp.Or(cfg.TopicRefresh, defaultTopicRefresh), adm: c.dlq.adm,
			own: ownTopics(cfg.DeadLetter.Topic, cfg.Group, c.attempts.topic)}
		w.add = func(ts []string) {
			c.flood.mu.Lock()
			if c.flood.tripped != nil {
				// Paused before it is read: a new topic waits with the
				// others (franz-go keeps the pause of a topic it does
				// not consume yet).
				cl.PauseFetchTopics(ts...)
			}
			c.flood.mu.Unlock()
			cl.AddConsumeTopics(ts...)
		}
		c.pattern = w
	}
	if c.tiers != nil {
		c.tiers.opts = readerOpts(cl)
		if c.txn != nil {
			// Forwards of aborted transactions are not in the tiers;
			// the markers show where a partition ends.
			c.tiers.opts = append(c.tiers.opts, kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.KeepControlRecords())
		}
		c.tiers.adm = c.dlq.adm
	}
	close(c.built)
	if off {
		c.log.Warn("retrying is turned off by the kill switch", "env", EnvRetryDisabled)
	}
	return c, nil
}

// Client returns the underlying franz-go client, for metrics hooks and
// admin calls. Do not poll from it, commit with it or move its positions
// (SetOffsets): the consumer drops fetched records below those it was handed
// already (and, in the exactly-once mode, below the group's committed
// offset), until the partition is assigned again.
func (c *Consumer[K, V]) Client() *kgo.Client { return c.cl }

// Run consumes until ctx is done or a failure's policy halts the consumer,
// then shuts down: in-flight work is abandoned without being committed (dead
// letters in flight get DeadLetterConfig.WriteTimeout to be acknowledged),
// settled offsets are committed, and the member leaves the group. It returns
// nil after ctx ends or Close, and a *HaltError after a halt. Group and fetch
// errors (an unauthorized topic, say) are logged and retried by the client,
// not returned. Run may be called once; the consumer cannot be reused after
// it returns.
func (c *Consumer[K, V]) Run(ctx context.Context) error {
	if !c.runOnce.CompareAndSwap(false, true) {
		return ErrClosed
	}
	defer close(c.runDone)
	runCtx := c.runCtx
	defer context.AfterFunc(ctx, func() { c.stop(nil) })()

	c.log.Info("consumer starting", "topics", c.cfg.Topics, "topic_pattern", c.cfg.TopicPattern, "retry_enabled", !c.retryOff.Load(), "group_protocol", c.cfg.GroupProtocol.String())
	go c.brokers.watch(runCtx, c.log, c.cl.OptValue(kgo.SeedBrokers))
	if c.pattern != nil {
		go c.pattern.run(runCtx, c.log)
	}
	if c.share != nil {
		return c.share.run(runCtx)
	}
	if c.txn != nil {
		c.beginTxns(runCtx)
	}
	fetchErrs := newFetchErrs(c.log, c.cl)
	fetchErrs.afresh = c.consumeAfresh
	if c.tiers != nil {
		fetchErrs.writer = func(t string) bool {
			to, ok := c.tiers.byTopic[t]
			if !ok {
				return false
			}
			go c.dlq.staleFetches(runCtx, to.source, t)
			return true
		}
	}
	go c.watchTopicIDs(runCtx)
	for {
		// Wait while the flowing partitions hold the total: the client
		// keeps what it fetched meanwhile, nothing is dropped.
		wait, cancel := c.pollContext(runCtx)
		wait, rotated := c.rotationWait(wait)
		if !c.budget.room(wait) {
			rotated()
			cancel()
			if runCtx.Err() != nil {
				c.cl.AllowRebalance()
				break
			}
			c.commitDue(runCtx)
			continue
		}
		// Everything fetched: each partition gets its part of the fetch,
		// none waits behind another's records in the client (pollRound).
		fs := c.pollRound(wait, func(fs kgo.Fetches) {
			if runCtx.Err() != nil || fs.IsClientClosed() {
				return
			}
			fs.EachError(func(t string, p int32, err error) {
				if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
					return
				}
				if _, ok := errors.AsType[*kgo.ErrDataLoss](err); ok {
					c.floors.dataLoss(t, p)
				}
				fetchErrs.seen(t, p, err)
			})
			c.held.saw(fs)
			for i := range fs {
				for _, ft := range fs[i].Topics {
					for _, fp := range ft.Partitions {
						recs := c.floors.take(ft.Topic, ft.TopicID, fp.Partition, fp.HighWatermark, fp.Records)
						if len(recs) == 0 {
							continue
						}
						p := c.partition(ft.Topic, fp.Partition)
						p.push(recs, fp.HighWatermark, c.round)
						if want, _ := p.wantsStop(); want {
							c.wantPause[tp{ft.Topic, fp.Partition}] = p
						}
					}
				}
			}
		})
		rotated()
		cancel()
		if runCtx.Err() != nil || fs.IsClientClosed() {
			c.cl.AllowRebalance()
			break
		}
		c.cl.AllowRebalance()
		fetchErrs.forget()
		c.commitDue(runCtx)
	}
	return c.shutdown()
}

func (c *Consumer[K, V]) shutdown() error {
	// Stop every worker: in-flight records are abandoned, not settled.
	c.mu.Lock()
	parts := c.parts
	c.parts = make(map[tp]*partition[K, V])
	c.mu.Unlock()
	for _, p := range parts {
		p.cancel()
	}
	c.waitWorkers()
	for _, p := range parts {
		p.saveUnwritten()
	}

	if c.txn != nil {
		c.commitTxn(context.Background())
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		if err := c.cl.CommitMarkedOffsets(ctx); err != nil {
			c.log.Error("final commit failed; settled records after the last commit will be redelivered", "err", err)
		}
	}
	// The durable attempts are written asynchronously: the last one
	// must reach the broker before the client closes, or the next owner
	// repeats an attempt.
	c.attempts.flush(c.cfg.DeadLetter.WriteTimeout)
	c.dlq.close()
	c.cl.Close()
	c.log.Info("consumer stopped")
	if c.haltErr != nil {
		return c.haltErr
	}
	return nil
}

// newConsumer is what every source of records shares: the config with its
// defaults filled, the kill switch as the environment sets it (off), the
// run context and the dead-letter writer.
func newConsumer[K, V any](cfg Config[K, V], off bool, log *slog.Logger) *Consumer[K, V] {
	c := &Consumer[K, V]{
		cfg:        cfg,
		policy:     cfg.Policy.resolve(),
		classifier: cfg.Classifier,
		log:        log,
		parts:      make(map[tp]*partition[K, V]),
		opPaused:   make(map[tp]bool),
		opSkips:    make(map[tp]map[int64]bool),
		wantPause:  make(map[tp]*partition[K, V]),
		rotTried:   make(map[tp]bool),
		wakeCh:     make(chan struct{}),
		runDone:    make(chan struct{}),
		built:      make(chan struct{}),
		hooks:      cfg.Hooks,
		floors:     newFloors(log),
	}
	c.retryOff.Store(off)
	c.runCtx, c.stop = context.WithCancelCause(context.Background())
	c.dlq = newDLQWriter(&c.cfg, c.log, &c.stats)
	c.dlq.hooks = c.hooks
	return c
}

// Stop asks the consumer to stop, as if Run's ctx had ended, and returns at
// once: Run returns after the handlers in flight return, and the records
// they were handling stay unsettled (redelivered to the next owner). Stop is
// the way to stop from code that Run waits for: a handler, a deserializer,
// Config.SkipIf or a hook. It may be called more than once, and before Run
// (which then returns at once).
func (c *Consumer[K, V]) Stop() { c.stop(nil) }

// Close stops the consumer and waits for Run to return; if Run was never
// called, Close closes the client (New has already joined the group). Close
// may be called more than once.
//
// Close must not be called from code that Run waits for (a handler, a
// deserializer, Config.SkipIf or a hook): Run would wait for that code and
// that code for Run. Call [Consumer.Stop] there.
func (c *Consumer[K, V]) Close() {
	c.stop(nil)
	if c.runOnce.CompareAndSwap(false, true) {
		close(c.runDone)
		c.cl.Close()
		return
	}
	<-c.runDone
}

// waitWorkers waits for the partition workers to return, and warns when
// that takes long: a handler that does not return when its ctx ends, or one
// that called Close, holds Run.
func (c *Consumer[K, V]) waitWorkers() {
	done := make(chan struct{})
	go func() { c.running.Wait(); close(done) }()
	select {
	case <-done:
		return
	case <-time.After(slowStopWarning):
	}
	c.log.Warn("stopping: still waiting for handlers to return after their ctx ended; "+
		"a handler that calls Close waits for itself (call Stop from handlers)", "after", slowStopWarning)
	<-done
}

// slowStopWarning is how long Run waits for its handlers when stopping
// before it warns.
const slowStopWarning = 10 * time.Second

// halt stops Run with err.
func (c *Consumer[K, V]) halt(err *HaltError) {
	c.haltOnce.Do(func() {
		c.haltErr = err
		c.stop(err)
	})
}

// partition returns the worker of t/p, starting it on first use. It runs on
// the poll goroutine, serialised with the rebalance callbacks by
// BlockRebalanceOnPoll.
func (c *Consumer[K, V]) partition(topic string, part int32) *partition[K, V] {
	key := tp{topic, part}
	c.mu.Lock()
	defer c.mu.Unlock()
	p := c.parts[key]
	if p == nil {
		p = newPartition(c, topic, part)
		if c.opPaused[key] {
			p.pause()
		}
		if m := c.opSkips[key]; len(m) > 0 {
			m = maps.Clone(m)
			p.skips.Store(&m)
		}
		c.parts[key] = p
		c.running.Add(1)
		go func() {
			defer c.running.Done()
			p.run()
		}()
	}
	return p
}

// stopPartitions stops the workers of the given partitions and waits for
// them: their in-flight records stay unsettled.
func (c *Consumer[K, V]) stopPartitions(m map[string][]int32) {
	var stopped []*partition[K, V]
	c.mu.Lock()
	for t, ps := range m {
		for _, p := range ps {
			if w := c.parts[tp{t, p}]; w != nil {
				delete(c.parts, tp{t, p})
				w.cancel()
				stopped = append(stopped, w)
			}
		}
	}
	c.mu.Unlock()
	for _, w := range stopped {
		<-w.done
		w.saveUnwritten()
		if w.fam != nil {
			w.fam.stopped(w.tier, w.ctx.Done())
		}
	}
	// Paused partitions stay paused across rebalances unless resumed.
	c.cl.ResumeFetchPartitions(m)
}

// forgetPauses drops the operator pauses of partitions taken from this
// member: the next owner does not inherit them. Outside the exactly-once
// mode it drops their skips too (see opSkips).
func (c *Consumer[K, V]) forgetPauses(m map[string][]int32) {
	c.mu.Lock()
	for t, ps := range m {
		for _, p := range ps {
			delete(c.opPaused, tp{t, p})
			if c.txn == nil {
				delete(c.opSkips, tp{t, p})
			}
		}
	}
	c.mu.Unlock()
}

// consumeAfresh forgets what the consumer keeps of a topic by offset
// when the client is made to consume it afresh (it was deleted and created
// again): the operator skips, the floors of the records taken (floor.go),
// and the committed offsets read after an unconfirmed transaction end. The
// offsets they name are the old topic's.
func (c *Consumer[K, V]) consumeAfresh(topic string) {
	c.forgetSkips(topic)
	c.floors.forgetTopic(topic)
	if c.txn != nil {
		c.txn.forgetKnownTopic(topic)
	}
}

// forgetSkips drops the operator skips of a topic that was deleted and
// created again: the offsets they name are the old topic's.
func (c *Consumer[K, V]) forgetSkips(topic string) {
	c.mu.Lock()
	for k := range c.opSkips {
		if k.topic == topic {
			delete(c.opSkips, k)
		}
	}
	for k, p := range c.parts {
		if k.topic == topic {
			p.skips.Store(nil) // a worker that outlives the recreation too
		}
	}
	c.mu.Unlock()
}

// pruneSkips drops the operator skips that a committed transaction settled
// for good: those below the committed offset (marks) of their partition.
// The records are never met again, and the bound on the skips a partition
// remembers (maxOpSkips) is left for new ones.
func (c *Consumer[K, V]) pruneSkips(marks map[tp]kgo.EpochOffset) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.opSkips) == 0 {
		return // the common case: no skip to prune
	}
	for k, at := range marks {
		skips := c.opSkips[k]
		for off := range skips {
			if off < at.Offset {
				delete(skips, off)
			}
		}
		if len(skips) == 0 {
			delete(c.opSkips, k)
		}
	}
}

// onAssigned checks the dead-letter topics of newly assigned topics (and
// creates missing ones), so that a topic that cannot be written is reported
// before any record depends on it.
func (c *Consumer[K, V]) onAssigned(ctx context.Context, _ *kgo.Client, assigned map[string][]int32) {
	topics := make([]string, 0, len(assigned))
	for t := range assigned {
		topics = append(topics, t)
	}
	sort.Strings(topics)
	<-c.built
	c.assign(assigned, true)
	c.floors.forget(assigned)
	if c.txn != nil {
		c.txn.forgetKnown(assigned, false)
		c.floorsAtCommitted(ctx, assigned)
	}
	if c.tiers != nil {
		c.assignTiers(assigned)
	}
	loadCtx, loadCancel := context.WithTimeout(ctx, 10*time.Second)
	c.attempts.load(loadCtx, assigned)
	loadCancel()
	ctx, cancel := context.WithTimeout(ctx, 2*c.cfg.DeadLetter.WriteTimeout)
	defer cancel()
	if c.tiers != nil {
		var sources []string
		for _, t := range topics {
			if _, tier := c.tiers.byTopic[t]; !tier {
				sources = append(sources, t)
			}
		}
		topics = sources
		c.checkTiers(ctx, sources)
	}
	c.dlq.check(ctx, topics)
}

// floorsAtCommitted sets the floors of partitions just assigned at the
// group's committed offsets (floors.at), in the exactly-once mode. Read
// without waiting for a pending transaction, an offset may be older than
// the one franz-go starts from, never newer: nothing to handle lies below
// it. A partition whose offset or topic id cannot be read has no floor
// until its first record.
func (c *Consumer[K, V]) floorsAtCommitted(ctx context.Context, assigned map[string][]int32) {
	if len(assigned) == 0 {
		return
	}
	// It holds up the rebalance: bounded well below the rebalance timeout.
	ctx, cancel := context.WithTimeout(ctx, min(c.cfg.DeadLetter.WriteTimeout, 5*time.Second))
	defer cancel()
	topics := slices.Sorted(maps.Keys(assigned))
	details, err := c.dlq.adm.ListTopics(ctx, topics...)
	if err != nil {
		return
	}
	offsets, err := c.dlq.adm.FetchOffsets(ctx, c.cfg.Group)
	if err != nil {
		return
	}
	for t, ps := range assigned {
		td, ok := details[t]
		if !ok || td.Err != nil {
			continue
		}
		for _, p := range ps {
			if o, ok := offsets.Lookup(t, p); ok && o.Err == nil {
				c.floors.at(t, td.ID, p, o.At)
			}
		}
	}
}

// revokeCommitTimeout bounds the commit made when partitions are revoked:
// the group waits for it.
const revokeCommitTimeout = 10 * time.Second

// assign records partitions given (on) or taken from this member.
func (c *Consumer[K, V]) assign(m map[string][]int32, on bool) {
	c.mu.Lock()
	if c.mine == nil {
		c.mine = map[tp]bool{}
	}
	for t, ps := range m {
		for _, p := range ps {
			if on {
				c.mine[tp{t, p}] = true
			} else {
				delete(c.mine, tp{t, p})
			}
		}
	}
	n := len(c.mine)
	c.mu.Unlock()
	c.assigned.Store(int64(n)) // a partition assigned twice counts once
	c.budget.setAssigned(n)
	if c.hooks == nil || len(m) == 0 {
		return
	}
	if on {
		c.hooks.PartitionsAssigned(m)
	} else {
		c.hooks.PartitionsRevoked(m)
	}
}

func (c *Consumer[K, V]) onRevoked(ctx context.Context, cl *kgo.Client, revoked map[string][]int32) {
	c.assign(revoked, false)
	c.floors.forget(revoked)
	if c.txn != nil {
		c.txn.forgetKnown(revoked, true)
	}
	c.stopPartitions(revoked)
	c.forgetPauses(revoked)
	if c.tiers != nil {
		c.tiers.drop(revoked, c.owns)
	}
	// The attempt counts the stopped workers saved reach Kafka before the
	// next owner reads them.
	c.attempts.flush(revokeCommitTimeout)
	// In the exactly-once mode, offsets are committed only in the
	// transactions: the open one is aborted (franz-go's
	// GroupTransactSession), and its records are handled again.
	if c.txn == nil {
		ctx, cancel := context.WithTimeout(ctx, revokeCommitTimeout)
		defer cancel()
		if err := cl.CommitMarkedOffsets(ctx); err != nil {
			c.log.Warn("commit on revoke failed; unsettled and uncommitted records will be redelivered", "err", err)
		}
	}
	if len(revoked) > 0 {
		c.log.Info("partitions revoked", "partitions", revoked)
	}
}

func (c *Consumer[K, V]) onLost(_ context.Context, _ *kgo.Client, lost map[string][]int32) {
	c.assign(lost, false)
	c.floors.forget(lost)
	if c.txn != nil {
		c.txn.forgetKnown(lost, true)
	}
	c.stopPartitions(lost)
	c.forgetPauses(lost)
	if c.tiers != nil {
		c.tiers.drop(lost, c.owns)
	}
	c.attempts.flush(revokeCommitTimeout) // what the stopped workers saved
	if len(lost) > 0 {
		c.log.Warn("partitions lost", "partitions", lost)
	}
}

// SetRetryEnabled flips the kill switch at runtime. With retrying off,
// transient failures go straight to their exhausted outcome (usually the
// dead-letter topic); records already sleeping in a retry wake up and are
// settled that way.
func (c *Consumer[K, V]) SetRetryEnabled(on bool) {
	if c.retryOff.Swap(!on) == !on {
		return
	}
	c.WakeRetries()
	c.log.Warn("kill switch flipped", "retry_enabled", on)
}

// RetryEnabled reports the kill switch.
func (c *Consumer[K, V]) RetryEnabled() bool { return !c.retryOff.Load() }

// WakeRetries ends the backoff of every record sleeping in a retry: each is
// tried again at once. Call it when a dependency recovers, so that paused
// partitions resume without waiting out their backoff; for example, from a
// schema-registry circuit breaker:
//
//	reg.Breaker().OnStateChange(func(_, to avro.State) {
//		if to == avro.Closed {
//			c.WakeRetries()
//		}
//	})
func (c *Consumer[K, V]) WakeRetries() {
	c.wakeMu.Lock()
	close(c.wakeCh)
	c.wakeCh = make(chan struct{})
	c.wakeMu.Unlock()
}

func (c *Consumer[K, V]) wakeSignal() <-chan struct{} {
	c.wakeMu.Lock()
	defer c.wakeMu.Unlock()
	return c.wakeCh
}

// DeadLetter sends the record at offset that partition topic/part is stuck
// on, retrying it (see [Stats.Stuck]), to its dead-letter topic instead of
// retrying it more: the letter has reason operator, the failure that held
// the record, and who in its message (an operator's name, for the record;
// at most 200 bytes are kept). The partition moves past the record once the
// letter is acknowledged, like any dead letter. It returns an error wrapping
// [ErrNotStuck] when the partition is not stuck on that offset,
// [ErrNotRetrying] when it is stuck but not retrying (waiting for a dead
// letter already, or held by the flood guard), and [ErrNotAssigned] when this
// member does not own the partition. A try of the record already under way
// that succeeds settles it as processed instead. On a share-group member it
// acts on a record the member retries in place (see [Config.ShareGroup]).
func (c *Consumer[K, V]) DeadLetter(topic string, part int32, offset int64, who string) error {
	if who == "" {
		who = "unnamed"
	}
	who = deadletter.Truncate(who, 200)
	if c.share != nil {
		return c.share.operate(topic, part, offset, &operatorLetter{who: who})
	}
	p, err := c.owned(topic, part)
	if err != nil {
		return err
	}
	return p.letterStuck(offset, who)
}

// Skip settles the record at offset that partition topic/part is stuck on
// (retrying after a failure, or waiting for its dead-letter write; see
// [Stats.Stuck]) as skipped: it is logged and counted, the partition moves
// past it and its offset is committed as settled. It returns an error
// wrapping [ErrNotStuck] when the partition is not stuck on that offset (it
// recovered, or is stuck on another record: an operator never skips a record
// they did not see), and [ErrNotAssigned] when this member does not own it.
// A try of the record already under way that succeeds settles it as
// processed instead. A record skipped while its copy was being written to a
// retry tier keeps its place in its key's order: should the copy land, the
// later records of its key wait for it there, and it is settled as skipped
// without being handled (by this member; another that reads the copy after
// a rebalance handles it). While a later record of its key waits for that
// write, the partition shows as stuck on the skipped record again; skipped
// again, it no longer holds its key (its copy, should it land, is handled).
// On a share-group member it acts on a record the member retries in place
// (ACCEPT: the group never delivers it again).
//
// The skip outlives the work it ends: should the partition meet the record
// again on this member in the exactly-once mode (after an aborted
// transaction, or a rebalance that gave the partition back to this member),
// it is skipped again without being handled. Like any settled record, it is
// durable once its offset is committed: should the process crash, or the
// partition move to another member (a rebalance), before that, the record
// is delivered again (at least once).
func (c *Consumer[K, V]) Skip(topic string, part int32, offset int64) error {
	if c.share != nil {
		return c.share.operate(topic, part, offset, errSkipped)
	}
	p, err := c.owned(topic, part)
	if err != nil {
		return err
	}
	// Remembered before the skip takes effect: a worker started again
	// meanwhile (after an abort) must see it.
	k := tp{topic, part}
	c.mu.Lock()
	if c.opSkips[k] == nil {
		c.opSkips[k] = map[int64]bool{}
	}
	fresh := !c.opSkips[k][offset] && len(c.opSkips[k]) < maxOpSkips
	if fresh {
		c.opSkips[k][offset] = true
	}
	c.mu.Unlock()
	if err := p.skipStuck(offset); err != nil {
		if fresh {
			c.mu.Lock()
			delete(c.opSkips[k], offset)
			c.mu.Unlock()
		}
		return err
	}
	return nil
}

// maxOpSkips bounds the operator skips a partition remembers (Skip).
const maxOpSkips = 1000

func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// Pause pauses a partition this member owns: its fetching stops, and its
// worker stops before the next record (a record being handled finishes)
// until [Consumer.Resume]. The pause is this member's: after a rebalance
// the partition's next owner does not inherit it. It returns an error
// wrapping ErrNotAssigned for a partition this member does not own.
func (c *Consumer[K, V]) Pause(topic string, part int32) error {
	if c.share != nil {
		return c.share.ownsNone(topic, part)
	}
	p, err := c.owned(topic, part)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.opPaused[tp{topic, part}] = true
	c.mu.Unlock()
	if p.pause() {
		c.log.Warn("partition paused by an operator", "topic", topic, "partition", part)
	}
	return nil
}

// Resume ends an operator pause of a partition ([Consumer.Pause]).
func (c *Consumer[K, V]) Resume(topic string, part int32) error {
	if c.share != nil {
		return c.share.ownsNone(topic, part)
	}
	p, err := c.owned(topic, part)
	if err != nil {
		return err
	}
	c.mu.Lock()
	delete(c.opPaused, tp{topic, part})
	c.mu.Unlock()
	if p.resume() {
		c.log.Warn("partition resumed by an operator", "topic", topic, "partition", part)
	}
	return nil
}

// isMine reports whether the group assigned topic/part to this member.
func (c *Consumer[K, V]) isMine(topic string, part int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.mine[tp{topic, part}]
}

// owns reports whether this member has a worker for topic/part.
func (c *Consumer[K, V]) owns(topic string, part int32) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.parts[tp{topic, part}] != nil
}

func (c *Consumer[K, V]) owned(topic string, part int32) (*partition[K, V], error) {
	c.mu.Lock()
	p := c.parts[tp{topic, part}]
	c.mu.Unlock()
	if p == nil {
		return nil, fmt.Errorf("%w: %s/%d", ErrNotAssigned, topic, part)
	}
	return p, nil
}

// Stats returns a snapshot of the counters and of the partitions.
func (c *Consumer[K, V]) Stats() Stats {
	s := c.stats.snapshot()
	s.RetryEnabled = !c.retryOff.Load()
	committed := c.cl.CommittedOffsets()
	c.mu.Lock()
	for _, p := range c.parts {
		s.Stuck = append(s.Stuck, p.stuckOn()...)
		off := int64(-1)
		if eo, ok := committed[p.topic][p.part]; ok {
			off = eo.Offset
		}
		ps := p.state(off)
		s.Partitions = append(s.Partitions, ps)
		s.BufferedRecords += ps.BufferedRecords
		s.BufferedBytes += ps.BufferedBytes
	}
	c.mu.Unlock()
	if c.share != nil {
		s.Stuck = append(s.Stuck, c.share.stuckOn()...)
	}
	sort.Slice(s.Stuck, func(i, j int) bool {
		a, b := s.Stuck[i], s.Stuck[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && (a.Partition < b.Partition || a.Partition == b.Partition && a.Offset < b.Offset))
	})
	sort.Slice(s.Partitions, func(i, j int) bool {
		a, b := s.Partitions[i], s.Partitions[j]
		return a.Topic < b.Topic || (a.Topic == b.Topic && a.Partition < b.Partition)
	})
	s.Running = c.runOnce.Load() && !isClosed(c.runDone) && c.runCtx.Err() == nil
	s.Flood = c.flood.state()
	s.Ready = s.Running && c.assigned.Load() > 0 && s.Halted == 0 && s.Flood == nil
	s.DeadLetterTopics = c.dlq.states(false)
	if t := c.topicParts.Load(); t != nil {
		s.Topics = slices.Clone(*t)
	}
	if c.tiers != nil {
		s.RetryTopics = c.dlq.states(true)
	}
	if t := c.txn; t != nil {
		t.mu.Lock()
		s.TransactionsCommitted, s.TransactionsAborted = t.committed, t.aborted
		t.mu.Unlock()
	}
	s.Brokers = c.brokers.state()
	if c.share != nil {
		s.ShareGroup = c.share.state()
	}
	if len(c.cfg.Dependencies) > 0 {
		s.Dependencies = make(map[string]string, len(c.cfg.Dependencies))
		for name, state := range c.cfg.Dependencies {
			s.Dependencies[name] = state()
		}
	}
	return s
}
