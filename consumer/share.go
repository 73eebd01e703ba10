package consumer

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/sharegroup"
	"github.com/antidote-kafka/antidote/serde"
)

// The share source: a member of a share group (KIP-932, Kafka 4.2+). Its
// records are acquired, not assigned, and settled by acknowledgement:
//
//	processed                               ACCEPT
//	retrying in place                       RENEW, before the lock and the connection expire
//	local retries spent, deliveries left    RELEASE (another member may try it)
//	permanent, or the last delivery         dead letter, acknowledged by Kafka, then ACCEPT
//	skipped                                 ACCEPT
//	halted, or the member stops             nothing: franz-go RELEASEs it when the client closes
//
// REJECT is never sent: the broker would write a dead letter of its own
// beside ours.
//
// franz-go's next poll ACCEPTs every record of the previous poll that has no
// terminal acknowledgement, renewed ones included, so the source never polls
// while a record of the last poll is unsettled; and it fetches only while it
// polls (kgo.MaxConcurrentFetches(0)), so no record is held unseen while its
// lock runs out.

// Share configures a share-group member ([Config.ShareGroup]). Each zero field
// takes its default.
type Share struct {
	// DeliveryLimit is the group's delivery count limit: a record whose
	// failure may pass (transient, unclassified) is released for another
	// delivery while its delivery count is below it, and dead-lettered on
	// the delivery that reaches it. Optional: read from the cluster when
	// Run starts and every 30s after (the group's share.delivery.count.limit
	// on Kafka 4.3+, else the brokers' group.share.delivery.count.limit, 5
	// by default). Set it when the consumer may not describe configs; a
	// value above the group's real limit loses records: the broker archives
	// a record released on its last delivery.
	DeliveryLimit int
	// FromEarliest sets the group's share.auto.offset.reset to earliest in
	// [New], before the member joins, so that a new group reads its topics
	// from the start (by default a share group reads only records produced
	// after it started). It changes the group's config for every member.
	// Optional: off.
	FromEarliest bool
	// MaxRecords bounds the records one poll acquires
	// (kgo.ShareMaxRecords, in the strict mode of KIP-1206: the broker
	// splits a record batch rather than return more). Optional: 500.
	MaxRecords int
}

// OutcomeReleased counts, in [Stats.Outcomes], a failed record released to
// the share group for another delivery (see [Config.ShareGroup]).
const OutcomeReleased Outcome = "released"

// Defaults of the share source.
const (
	defaultShareMaxRecords = 500
	// minDeliveryLimit is the lowest limit Kafka accepts: the limit used
	// when the cluster's cannot be read, so that a record is dead-lettered
	// early rather than released on its last delivery and lost.
	minDeliveryLimit = 2
	// limitRefresh is how often the delivery limit is read again: an
	// operator may change the group's config at any time.
	limitRefresh = 30 * time.Second
)

// shareSource runs the share group of a [Consumer] made with
// Config.ShareGroup.
type shareSource[K, V any] struct {
	c     *Consumer[K, V]
	group string

	// What the member did, for Stats.ShareGroup (see ShareGroupState).
	acquired, redelivered, accepted, released, renewed atomic.Uint64

	mu       sync.Mutex // guards the fields below
	limit    int
	limitAt  time.Time
	logs     map[tp]*recordLog
	problems []string // what is wrong with the group's setup (checkGroup)
	// deliveries counts the acquired records by delivery count.
	deliveries map[int32]uint64
	// open is the records of the poll being settled that have no
	// terminal acknowledgement yet: the ones renew extends.
	open map[*kgo.Record]struct{}
	// retrying is the records of the poll waiting for a retry in place,
	// by partition and offset: Stats.Stuck, and what an operator may skip
	// or dead-letter.
	retrying map[tpo]*stuck
}

// tpo names a record.
type tpo struct {
	tp
	offset int64
}

// ShareGroupState is what a share-group member knows of its group
// ([Stats.ShareGroup]).
type ShareGroupState struct {
	Group string
	// DeliveryLimit is the delivery limit in use (see Share.DeliveryLimit),
	// 0 until Run has read it.
	DeliveryLimit int
	// Problems says what is wrong with the group's setup, checked when Run
	// starts, each with what to change: a broker dead-letter topic that
	// loses records, acknowledgement renewal turned off.
	Problems []string `json:",omitempty"`
	// Acquired counts the records this member acquired, and Redelivered
	// those of them delivered before (to this member or another):
	// released, or held by a member that stopped or lost their lock.
	// They count the records the client handed over: a fetch the client
	// drops (its share session reset while the fetch was in flight) is
	// counted by the broker only, in those records' next delivery count.
	Acquired    uint64
	Redelivered uint64
	// Accepted, Released and Renewed count the acknowledgements sent:
	// ACCEPT of a record processed, dead-lettered or skipped; RELEASE of
	// a record for another delivery; RENEW of a record's lock while it is
	// retried in place (one per record each time the locks are renewed).
	Accepted uint64
	Released uint64
	Renewed  uint64
	// Deliveries counts the acquired records by their delivery count
	// ("1" for first deliveries).
	Deliveries map[int32]uint64 `json:",omitempty"`
	// Held is the records of the poll being settled that have no ACCEPT or
	// RELEASE yet.
	Held int
}

// state is the member's ShareGroupState.
func (s *shareSource[K, V]) state() *ShareGroupState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := &ShareGroupState{Group: s.group, DeliveryLimit: s.limit, Problems: append([]string(nil), s.problems...),
		Acquired: s.acquired.Load(), Redelivered: s.redelivered.Load(),
		Accepted: s.accepted.Load(), Released: s.released.Load(), Renewed: s.renewed.Load(),
		Held: len(s.open)}
	if len(s.deliveries) > 0 {
		st.Deliveries = make(map[int32]uint64, len(s.deliveries))
		for n, v := range s.deliveries {
			st.Deliveries[n] = v
		}
	}
	if n := s.c.cfg.Share.DeliveryLimit; n > 0 {
		st.DeliveryLimit = n
	}
	return st
}

// newShare is New for a share group: the same serde, handler, failure
// classes and policy as a consumer group, another source.
func newShare[K, V any](cfg Config[K, V]) (*Consumer[K, V], error) {
	if err := cfg.validateShare(); err != nil {
		return nil, err
	}
	off, err := retryDisabledFromEnv()
	if err != nil {
		return nil, err
	}
	cfg.Concurrency = cfg.Concurrency.withDefaults()
	if cfg.Share.MaxRecords == 0 {
		cfg.Share.MaxRecords = defaultShareMaxRecords
	}
	cfg.commonDefaults()
	cfg.DurableAttempts.Disable = true // the broker counts deliveries
	cfg.FloodGuard.Disable = true
	c := newConsumer(cfg, off, cfg.Logger.With("share_group", cfg.ShareGroup))
	c.dlq.group = cfg.ShareGroup
	c.share = &shareSource[K, V]{c: c, group: cfg.ShareGroup, limit: cfg.Share.DeliveryLimit, logs: make(map[tp]*recordLog),
		deliveries: make(map[int32]uint64), open: make(map[*kgo.Record]struct{}), retrying: make(map[tpo]*stuck)}

	base := make([]kgo.Opt, 0, len(cfg.ClientOpts)+16)
	if len(cfg.Brokers) > 0 {
		base = append(base, kgo.SeedBrokers(cfg.Brokers...))
	}
	base = append(base,
		// A worker waits for its letter's acknowledgement before it takes
		// the next record, so a linger would hold every letter for its
		// whole length: with one record at a time, 5ms apiece. Letters go
		// out at once; those of other workers that come while a request
		// is in flight go out together in the next.
		kgo.ProducerLinger(0),
		kgo.RecordDeliveryTimeout(cfg.DeadLetter.WriteTimeout),
		kgo.WithLogger(clientLogger{kslog.New(c.log.With("client", "franz-go")), kgo.LogLevelWarn}),
	)
	base = append(base, cfg.ClientOpts...)
	if cfg.Share.FromEarliest {
		// Before the member joins: the group starts a partition where
		// share.auto.offset.reset says when it first assigns it.
		if err := setShareEarliest(base, cfg.ShareGroup, cfg.DeadLetter.WriteTimeout); err != nil {
			return nil, fmt.Errorf("%w: Share.FromEarliest: setting the group's share.auto.offset.reset: %v", ErrConfig, err)
		}
	}
	opts := append(base,
		kgo.ShareGroup(cfg.ShareGroup),
		kgo.ConsumeTopics(cfg.Topics...),
		kgo.ShareMaxRecords(int32(cfg.Share.MaxRecords)),
		// At most MaxRecords, splitting a record batch if need be
		// (KIP-1206): otherwise one member acquires a whole produced
		// batch, however large, and the others wait.
		kgo.ShareMaxRecordsStrict(),
		// Fetch only while polling: a record fetched ahead would wait
		// unseen, its lock running out, while the last poll is handled.
		kgo.MaxConcurrentFetches(0),
		kgo.ShareAckCallback(c.share.acked),
		kgo.RecordPartitioner(newDLQPartitioner(c.dlq)),
		kgo.ProducerBatchMaxBytesFn(c.dlq.batchMax),
		kgo.WithHooks(&c.brokers),
	)
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return nil, configErr("ClientOpts", err.Error())
	}
	c.cl = cl
	c.dlq.attach(cl)
	close(c.built)
	if off {
		c.log.Warn("retrying is turned off by the kill switch", "env", EnvRetryDisabled)
	}
	return c, nil
}

// validateShare checks a share-group config: what the consumer group checks,
// and the settings that cannot apply to a share group.
func (c *Config[K, V]) validateShare() error {
	if c.Group != "" {
		return configErr("Group", "set with ShareGroup: a member is in a consumer group or in a share group, choose one")
	}
	switch {
	case c.RetryTopics.on():
		return configErr("RetryTopics", "not with ShareGroup: a share group redelivers a released record itself, to any member (Share.DeliveryLimit)")
	case c.Policy.usesRetryTopic():
		return configErr("Policy", "an outcome has Then: ActionRetryTopic, which a share group does not use: a released record is delivered again by the group")
	case c.ExactlyOnce.on():
		return configErr("ExactlyOnce", "not with ShareGroup: acknowledgements of a share group are not part of Kafka transactions")
	case c.BatchHandler != nil:
		return configErr("BatchHandler", "not with ShareGroup: use Handler (with Concurrency.Max for records at once)")
	case c.DurableAttempts.Topic != "":
		return configErr("DurableAttempts.Topic", "not with ShareGroup: the broker keeps each record's delivery count")
	case c.GroupProtocol != GroupClassic:
		return configErr("GroupProtocol", "not with ShareGroup: a share group has its own protocol")
	case c.Share.DeliveryLimit != 0 && c.Share.DeliveryLimit < minDeliveryLimit:
		return configErr("Share.DeliveryLimit", fmt.Sprintf("%d: Kafka's lowest is %d", c.Share.DeliveryLimit, minDeliveryLimit))
	case c.Share.MaxRecords < 0:
		return configErr("Share.MaxRecords", "negative")
	}
	// Everything else as for a consumer group, with the share group as
	// the group.
	v := *c
	v.Group = c.ShareGroup
	return v.validate()
}

// setShareEarliest sets a share group's share.auto.offset.reset to earliest
// with a client of its own (kadm has no helper for group configs).
func setShareEarliest(opts []kgo.Opt, group string, timeout time.Duration) error {
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*timeout)
	defer cancel()
	req := kmsg.NewPtrIncrementalAlterConfigsRequest()
	res := kmsg.NewIncrementalAlterConfigsRequestResource()
	res.ResourceType = kmsg.ConfigResourceTypeGroupConfig
	res.ResourceName = group
	cfg := kmsg.NewIncrementalAlterConfigsRequestResourceConfig()
	cfg.Name = "share.auto.offset.reset"
	cfg.Op = kmsg.IncrementalAlterConfigOpSet
	cfg.Value = kmsg.StringPtr("earliest")
	res.Configs = append(res.Configs, cfg)
	req.Resources = append(req.Resources, res)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil {
		return err
	}
	for _, r := range resp.Resources {
		if err := kerr.ErrorForCode(r.ErrorCode); err != nil {
			if r.ErrorMessage != nil {
				return fmt.Errorf("%w: %s", err, *r.ErrorMessage)
			}
			return err
		}
	}
	return nil
}

// deliveryLimit is the delivery limit in use, read again from the cluster
// when it is older than limitRefresh (unless Share.DeliveryLimit fixes it).
func (s *shareSource[K, V]) deliveryLimit(ctx context.Context) int {
	if n := s.c.cfg.Share.DeliveryLimit; n > 0 {
		return n
	}
	s.mu.Lock()
	limit, at := s.limit, s.limitAt
	s.mu.Unlock()
	if limit > 0 && time.Since(at) < limitRefresh {
		return limit
	}
	n, err := s.readLimit(ctx)
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limitAt = time.Now()
	switch {
	case err == nil:
		if s.limit != n {
			s.c.log.Info("share group delivery limit", "delivery_limit", n)
		}
		s.limit = n
	case s.limit == 0:
		s.limit = minDeliveryLimit
		s.c.log.Error("cannot read the share group's delivery limit: records are dead-lettered from their second delivery on; grant DESCRIBE_CONFIGS or set Share.DeliveryLimit",
			"delivery_limit", s.limit, "err", err)
	default:
		s.c.log.Warn("cannot read the share group's delivery limit again; keeping the last one", "delivery_limit", s.limit, "err", err)
	}
	return s.limit
}

// readLimit reads the delivery limit (sharegroup.ReadLimit).
func (s *shareSource[K, V]) readLimit(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.DeadLetter.WriteTimeout)
	defer cancel()
	l, err := sharegroup.ReadLimit(ctx, s.c.cl, s.group)
	return l.Limit, err
}

// checkGroup checks the share group's setup (sharegroup.Check) and reports
// what is wrong, loudly: an error in the log, and
// Stats.ShareGroup.Problems. What cannot be read (an earlier Kafka, no
// DESCRIBE_CONFIGS) is not a problem: it is logged at debug level.
func (s *shareSource[K, V]) checkGroup(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, s.c.cfg.DeadLetter.WriteTimeout)
	defer cancel()
	setup, err := sharegroup.Check(ctx, s.c.cl, s.group)
	if err != nil {
		s.c.log.Debug("cannot read the share group's configs", "err", err)
		return
	}
	for _, p := range setup.Problems {
		s.c.log.Error("share group setup: " + p)
	}
	s.mu.Lock()
	s.problems = setup.Problems
	s.mu.Unlock()
}

// acked logs acknowledgements the broker did not take: their records are
// delivered again (after their lock runs out), to this member or another.
func (s *shareSource[K, V]) acked(_ *kgo.Client, rs kgo.ShareAckResults) {
	for _, r := range rs {
		if r.Err != nil && !errors.Is(r.Err, context.Canceled) {
			s.c.log.Warn("share acknowledgement not taken: the partition's records in it will be delivered again",
				"topic", r.Topic, "partition", r.Partition, "err", r.Err)
		}
	}
}

// recordLog is the rate-limited record log of a partition.
func (s *shareSource[K, V]) recordLog(rec *kgo.Record) *recordLog {
	k := tp{rec.Topic, rec.Partition}
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.logs[k]
	if l == nil {
		l = newRecordLog(s.c.log, rec.Topic, rec.Partition)
		s.logs[k] = l
	}
	return l
}

// run is Run for a share group: poll, settle every record of the poll, poll
// again.
func (s *shareSource[K, V]) run(ctx context.Context) error {
	c := s.c
	checkCtx, cancel := context.WithTimeout(ctx, 2*c.cfg.DeadLetter.WriteTimeout)
	c.dlq.check(checkCtx, c.cfg.Topics)
	cancel()
	s.deliveryLimit(ctx)
	s.checkGroup(ctx)
	c.assigned.Store(1) // Stats.Ready: records come from the group, not from assigned partitions
	fetchErrs := newFetchErrs(c.log, c.cl)
	for ctx.Err() == nil {
		// Everything the fetch brought: a record left in the client
		// would wait unseen, its lock running out.
		fs := c.cl.PollFetches(ctx)
		if ctx.Err() != nil || fs.IsClientClosed() {
			// A poll that ends with the stop may still bring records:
			// they were acquired, and are counted so (Stats, hooks),
			// though the client's close releases them untouched.
			if recs := fs.Records(); len(recs) > 0 {
				s.acquire(recs)
			}
			break
		}
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
				return
			}
			fetchErrs.seen(t, p, err)
		})
		if recs := fs.Records(); len(recs) > 0 {
			s.settlePoll(ctx, recs)
		}
		fetchErrs.forget()
	}
	return s.shutdown()
}

// shutdown closes the client, which RELEASEs every record of the last poll
// that was not settled and sends the acknowledgements not sent yet.
func (s *shareSource[K, V]) shutdown() error {
	c := s.c
	c.assigned.Store(0)
	c.dlq.close()
	c.cl.Close()
	s.mu.Lock()
	for _, l := range s.logs {
		l.summary()
	}
	s.mu.Unlock()
	c.log.Info("consumer stopped")
	if c.haltErr != nil {
		return c.haltErr
	}
	return nil
}

// settlePoll settles every record of one poll, Concurrency.Max at once:
// the records of one key one at a time, in offset order. While it runs, the
// records not settled yet are renewed (RENEW) before their acquisition lock
// or the connection's idle timeout runs out. It returns when every record
// is settled, or when ctx ends (the records left are released when the
// client closes).
func (s *shareSource[K, V]) settlePoll(ctx context.Context, recs []*kgo.Record) {
	limit := s.deliveryLimit(ctx)
	s.acquire(recs)
	defer s.release()
	runs := keyRuns(recs)
	stopRenew := s.renew(ctx, recs)
	defer stopRenew()
	workers := min(max(s.c.cfg.Concurrency.Max, 1), len(runs))
	next := make(chan []*kgo.Record)
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for run := range next {
				for _, rec := range run {
					if ctx.Err() != nil {
						break
					}
					s.settle(ctx, rec, limit)
				}
			}
		})
	}
feed:
	for _, run := range runs {
		select {
		case next <- run:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
}

// acquire counts the records of a poll and holds them open: renew extends
// their locks until they have a terminal acknowledgement.
func (s *shareSource[K, V]) acquire(recs []*kgo.Record) {
	h := s.c.hooks
	s.mu.Lock()
	for _, r := range recs {
		n := r.DeliveryCount()
		s.acquired.Add(1)
		if n > 1 {
			s.redelivered.Add(1)
		}
		s.deliveries[n]++
		s.open[r] = struct{}{}
	}
	s.mu.Unlock()
	if h != nil {
		for _, r := range recs {
			h.RecordAcquired(AcquiredEvent{PartitionEvent: PartitionEvent{r.Topic, r.Partition}, Offset: r.Offset, DeliveryCount: r.DeliveryCount()})
		}
	}
}

// release forgets the records of the poll left open (stopping): the client
// releases them when it closes.
func (s *shareSource[K, V]) release() {
	s.mu.Lock()
	clear(s.open)
	s.mu.Unlock()
}

// ack acknowledges rec with ACCEPT or RELEASE, counts it and tells the
// hooks.
// The record leaves s.open under s.mu with its acknowledgement, so that
// renew never counts a renew of a settled record.
func (s *shareSource[K, V]) ack(rec *kgo.Record, a Ack) {
	s.mu.Lock()
	delete(s.open, rec)
	if a == AckAccept {
		rec.Ack(kgo.AckAccept)
		s.accepted.Add(1)
	} else {
		rec.Ack(kgo.AckRelease)
		s.released.Add(1)
	}
	s.mu.Unlock()
	s.ackHook(rec, a)
}

// ackHook tells the hooks of an acknowledgement.
func (s *shareSource[K, V]) ackHook(rec *kgo.Record, a Ack) {
	if h := s.c.hooks; h != nil {
		h.RecordAcknowledged(AckEvent{PartitionEvent: PartitionEvent{rec.Topic, rec.Partition}, Offset: rec.Offset, Ack: a, DeliveryCount: rec.DeliveryCount()})
	}
}

// keyRuns splits a poll into runs that may be handled at once: the records
// of one topic, partition and key in offset order, and each record without
// a key alone.
func keyRuns(recs []*kgo.Record) [][]*kgo.Record {
	type runKey struct {
		tp
		key string
	}
	idx := make(map[runKey]int)
	runs := make([][]*kgo.Record, 0, len(recs))
	for _, r := range recs {
		if r.Key == nil {
			runs = append(runs, []*kgo.Record{r})
			continue
		}
		k := runKey{tp{r.Topic, r.Partition}, string(r.Key)}
		if i, ok := idx[k]; ok {
			runs[i] = append(runs[i], r)
			continue
		}
		idx[k] = len(runs)
		runs = append(runs, []*kgo.Record{r})
	}
	return runs
}

// renew RENEWs the records of a poll that are not settled yet every third
// of the shorter of their acquisition lock and the connection's idle
// timeout, until the returned function is called. A record whose last renew
// is still in flight ignores another (Record.Ack).
func (s *shareSource[K, V]) renew(ctx context.Context, recs []*kgo.Record) (stop func()) {
	every := 10 * time.Second
	if d := time.Until(recs[0].AcquisitionDeadline()); d > 0 {
		every = d
	}
	if idle, ok := s.c.cl.OptValue(kgo.ConnIdleTimeout).(time.Duration); ok && idle > 0 {
		every = min(every, idle)
	}
	every = max(every/3, 100*time.Millisecond)
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				s.mu.Lock()
				open := make([]*kgo.Record, 0, len(s.open))
				for r := range s.open {
					r.Ack(kgo.AckRenew)
					open = append(open, r)
				}
				s.mu.Unlock()
				s.renewed.Add(uint64(len(open)))
				for _, r := range open {
					s.ackHook(r, AckRenew)
				}
			}
		}
	}()
	return func() { cancel(); <-done }
}

// settle handles one record until it is settled: processed (ACCEPT),
// released for another delivery (RELEASE), dead-lettered (then ACCEPT),
// skipped (ACCEPT) or halted. When ctx ends first it is left unsettled.
func (s *shareSource[K, V]) settle(ctx context.Context, rec *kgo.Record, limit int) {
	t := s.c.cfg.Tracer
	if t == nil {
		s.settleTraced(ctx, rec, limit, nil)
		return
	}
	tr := &traced{span: t.Start(ctx, TraceRecord{Record: rec, Fetched: rec, Group: s.group, Share: true})}
	s.settleTraced(ctx, rec, limit, tr)
	tr.endSpan()
}

// settleTraced is settle, with the span of rec (nil: not traced).
func (s *shareSource[K, V]) settleTraced(ctx context.Context, rec *kgo.Record, limit int, tr *traced) {
	c := s.c
	c.stats.consumed.Add(1)
	log := s.recordLog(rec)
	attempt, first := 1, time.Time{}
	stage, err := s.try(ctx, tr, rec, attempt, first)
	// The record's own context, which an operator's Skip or DeadLetter
	// cancels, is made only when the record waits for a retry.
	rctx, rcancel := ctx, context.CancelCauseFunc(nil)
	defer func() {
		if rcancel != nil {
			s.unstick(rec)
			rcancel(nil)
		}
	}()
	for {
		if err == nil { // before the stop check: a success is accepted even while stopping
			s.ack(rec, AckAccept)
			c.stats.processed.Add(1)
			tr.settledAs(OutcomeProcessed, "", 0, nil, attempt)
			s.settled(rec, OutcomeProcessed, stage, 0)
			if attempt > 1 {
				log.info("record recovered after retry", rec, "attempts", attempt, "delivery", rec.DeliveryCount())
			}
			return
		}
		if ctx.Err() != nil {
			return // stopping: the failure may be our own cancellation
		}
		if first.IsZero() {
			first = time.Now()
		}
		if rcancel != nil {
			if errors.Is(context.Cause(rctx), errSkipped) {
				s.unstick(rec)
				s.skip(tr, log, rec, stage, err, attempt, "operator")
				return
			}
			if who, ok := byOperator(rctx); ok {
				s.unstick(rec)
				s.letterByOperator(ctx, tr, log, rec, stage, c.classify(stage, err), err, attempt, first, who)
				return
			}
		}
		if c.cfg.SkipIf != nil && s.skipFunc(log, rec, stage, err) {
			s.skip(tr, log, rec, stage, err, attempt, "Config.SkipIf")
			return
		}
		wake := c.wakeSignal() // before the kill switch is read, as in settleFailure
		class := c.classify(stage, err)
		out := c.policy.outcome(stage, class)
		reason := deadletter.ReasonExhausted
		if class == failure.ClassPermanent {
			reason = deadletter.ReasonPermanent
		}
		retryOff := c.retryOff.Load()
		if retryOff {
			// The kill switch: no waiting and no other delivery,
			// straight to the exhausted outcome.
			if _, canRetry := out.Retry.Next(attempt, time.Since(first)); canRetry {
				reason = deadletter.ReasonRetryDisabled
			}
		} else if wait, ok := retryWait(out.Retry, attempt, time.Since(first), err); ok {
			if rcancel == nil {
				rctx, rcancel = context.WithCancelCause(ctx)
			}
			s.stick(rec, attempt, first, err, rcancel)
			c.stats.failure(stage, class, OutcomeRetried)
			if h := c.hooks; h != nil {
				h.RecordRetried(RetryEvent{PartitionEvent: PartitionEvent{rec.Topic, rec.Partition}, Offset: rec.Offset, Stage: stage, Class: class, Attempt: attempt, Wait: wait})
			}
			if attempt == 1 || attempt%10 == 0 {
				log.warn("record failed, retrying", rec, "stage", stage, "class", class, "attempt", attempt, "delivery", rec.DeliveryCount(), "wait", dur(wait), "err", err)
			}
			if sleep(rctx, wait, wake) != nil || c.retryOff.Load() {
				continue // stopping, an operator or the kill switch: re-decide at the top
			}
			attempt++
			stage, err = s.try(rctx, tr, rec, attempt, first)
			continue
		}
		if rcancel != nil {
			s.unstick(rec)
		}
		// Retrying here is over. A failure that may pass goes back to the
		// group while deliveries remain; the last delivery, or a
		// permanent failure, takes the policy's action.
		if class != failure.ClassPermanent && !retryOff && int(rec.DeliveryCount()) < limit {
			s.ack(rec, AckRelease)
			tr.settledAs(OutcomeReleased, stage, class, err, attempt)
			c.stats.failure(stage, class, OutcomeReleased)
			s.settled(rec, OutcomeReleased, stage, class)
			log.info("record released for another delivery", rec, "stage", stage, "class", class, "attempts", attempt,
				"delivery", rec.DeliveryCount(), "delivery_limit", limit, "err", err)
			return
		}
		s.act(ctx, tr, log, rec, stage, class, err, attempt, first, reason, out.Then)
		return
	}
}

// settled tells the hooks that rec is settled.
func (s *shareSource[K, V]) settled(rec *kgo.Record, outcome Outcome, stage deadletter.Stage, class failure.Class) {
	if h := s.c.hooks; h != nil {
		h.RecordSettled(SettledEvent{PartitionEvent: PartitionEvent{rec.Topic, rec.Partition}, Offset: rec.Offset, Outcome: outcome, Stage: stage, Class: class})
	}
}

// try decodes and processes rec once, as partition.try does, as a part of
// its span tr (nil: not traced).
func (s *shareSource[K, V]) try(ctx context.Context, tr *traced, rec *kgo.Record, attempt int, first time.Time) (deadletter.Stage, error) {
	if tr == nil {
		return s.tryOnce(ctx, rec, attempt, first)
	}
	tctx := tr.try(ctx, attempt)
	stage, err := s.tryOnce(tctx, rec, attempt, first)
	tr.endTry(tctx, stage, err)
	return stage, err
}

// tryOnce is try, untraced. A panic anywhere is a permanent failure of its
// stage.
func (s *shareSource[K, V]) tryOnce(ctx context.Context, rec *kgo.Record, attempt int, first time.Time) (stage deadletter.Stage, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = failure.Permanent(&serde.PanicError{Stage: string(stage), Value: v})
		}
	}()
	c := s.c
	r := &Record[K, V]{Raw: rec, Attempt: attempt, FirstFailure: first}
	m := serde.Meta{Topic: rec.Topic, Headers: headers(rec.Headers)}
	if c.cfg.Key != nil {
		stage = deadletter.StageDeserializeKey
		m.Part = serde.Key
		if r.Key, err = c.cfg.Key.Deserialize(ctx, m, rec.Key); err != nil {
			return stage, err
		}
	}
	stage = deadletter.StageDeserializeValue
	m.Part = serde.Value
	if r.Value, err = c.cfg.Value.Deserialize(ctx, m, rec.Value); err != nil {
		return stage, err
	}
	stage = deadletter.StageProcess
	if h := c.hooks; h != nil {
		start := time.Now()
		err = c.cfg.Handler(ctx, r)
		h.HandlerDone(HandlerEvent{PartitionEvent: PartitionEvent{rec.Topic, rec.Partition}, Duration: time.Since(start), Err: err})
		return stage, err
	}
	return stage, c.cfg.Handler(ctx, r)
}

// skipFunc asks Config.SkipIf; a panic in it counts as "no" and is logged.
func (s *shareSource[K, V]) skipFunc(log *recordLog, rec *kgo.Record, stage deadletter.Stage, err error) (skip bool) {
	defer func() {
		if v := recover(); v != nil {
			log.error("Config.SkipIf panicked; the failure is settled by the policy", rec, "panic", v)
			skip = false
		}
	}()
	return s.c.cfg.SkipIf(stage, err)
}

// skip settles rec as skipped: ACCEPT, logged and counted.
func (s *shareSource[K, V]) skip(tr *traced, log *recordLog, rec *kgo.Record, stage deadletter.Stage, err error, attempts int, why string) {
	class := s.c.classify(stage, err)
	tr.settledAs(OutcomeSkipped, stage, class, err, attempts)
	s.ack(rec, AckAccept)
	s.c.stats.failure(stage, class, OutcomeSkipped)
	s.settled(rec, OutcomeSkipped, stage, class)
	log.warn("record skipped", rec, "stage", stage, "why", why, "attempts", attempts, "delivery", rec.DeliveryCount(), "err", err)
}

// act settles rec by the policy's action: a dead letter, a skip or a halt.
func (s *shareSource[K, V]) act(ctx context.Context, tr *traced, log *recordLog, rec *kgo.Record, stage deadletter.Stage, class failure.Class, err error, attempts int, first time.Time, reason deadletter.Reason, then Action) {
	switch then {
	case ActionSkip:
		s.skip(tr, log, rec, stage, err, attempts, string(reason))
		return
	case ActionHalt:
		s.halt(tr, log, rec, stage, class, err)
		return
	}
	s.deadLetter(ctx, tr, log, rec, stage, class, err, attempts, newFailure(s.group, rec, stage, class, reason, err, attempts, first))
}

// letterByOperator dead-letters rec, retrying in place, because an operator
// asked (who): reason ReasonOperator, the message naming who.
func (s *shareSource[K, V]) letterByOperator(ctx context.Context, tr *traced, log *recordLog, rec *kgo.Record, stage deadletter.Stage, class failure.Class, err error, attempts int, first time.Time, who string) {
	f := newFailure(s.group, rec, stage, class, deadletter.ReasonOperator, err, attempts, first)
	f.Message = deadletter.Truncate("dead-lettered by an operator ("+who+"): "+f.Message, deadletter.MaxMessageBytes)
	log.warn("record sent to the dead-letter topic by an operator", rec, "stage", stage, "who", who, "attempts", attempts, "delivery", rec.DeliveryCount(), "err", err)
	s.deadLetter(ctx, tr, log, rec, stage, class, err, attempts, f)
}

// deadLetter writes the dead letter of rec with the failure headers of f
// and settles rec by how the write ended.
func (s *shareSource[K, V]) deadLetter(ctx context.Context, tr *traced, log *recordLog, rec *kgo.Record, stage deadletter.Stage, class failure.Class, err error, attempts int, f *deadletter.Failure) {
	c := s.c
	reason := f.Reason
	l := s.letter(rec, f, err, tr)
	l.class, l.attempts = class, attempts
	switch s.write(ctx, log, l) {
	case letterWritten:
		s.ack(rec, AckAccept)
		tr.settledAs(OutcomeDeadLettered, stage, class, err, attempts)
		c.stats.failure(stage, class, OutcomeDeadLettered)
		s.settled(rec, OutcomeDeadLettered, stage, class)
		log.warn("record dead-lettered", rec, "stage", stage, "class", class, "reason", reason, "attempts", attempts,
			"delivery", rec.DeliveryCount(), "err", err)
	case letterSkipped:
		s.skip(tr, log, rec, stage, err, attempts, "unwritable dead letter")
	case letterHalted:
		s.halt(tr, log, rec, stage, class, fmt.Errorf("dead-letter write to %s: %w", l.tmpl.Topic, l.cur.err))
	}
}

// halt stops the consumer on rec, which stays unsettled: the group delivers
// it again, to another member.
func (s *shareSource[K, V]) halt(tr *traced, log *recordLog, rec *kgo.Record, stage deadletter.Stage, class failure.Class, err error) {
	tr.settledAs(OutcomeHalted, stage, class, err, 0)
	s.c.stats.failure(stage, class, OutcomeHalted)
	s.settled(rec, OutcomeHalted, stage, class)
	log.error("halting on record", rec, "stage", stage, "class", class, "err", err)
	s.c.halt(&HaltError{Topic: rec.Topic, Partition: rec.Partition, Offset: rec.Offset, Timestamp: rec.Timestamp, Stage: string(stage), Err: err})
}

// HeaderDeliveryCount is the header a share group's dead letter adds after
// the failure headers: the record's delivery count, in decimal.
const HeaderDeliveryCount = "antidote.delivery.count"

// letter is the dead letter of rec: its key, value and headers byte for
// byte, the failure headers of f, then its delivery count.
func (s *shareSource[K, V]) letter(rec *kgo.Record, f *deadletter.Failure, cause error, tr *traced) *letter {
	w := s.c.dlq
	f.ClientID = w.clientID
	l := &letter{w: w, src: rec, f: f, stage: f.Stage, reason: f.Reason, cause: cause,
		extra: []kgo.RecordHeader{{Key: HeaderDeliveryCount, Value: strconv.AppendInt(nil, int64(rec.DeliveryCount()), 10)}},
		// The partitioner reads the source partition from Partition.
		tmpl: kgo.Record{Topic: w.topicFor(rec.Topic), Partition: rec.Partition, Key: rec.Key, Value: rec.Value}}
	if tr != nil {
		l.extra = traceLetter(tr, l, OutcomeDeadLettered, l.extra)
	}
	l.tmpl.Headers = l.headers(l.hdrs[:0])
	if limit := w.limit(l.tmpl.Topic); limit > 0 && letterSize(&l.tmpl) > limit {
		l.shrink()
	}
	return l
}

// letterEnd is how the write of a share group's dead letter ended.
type letterEnd uint8

const (
	letterAbandoned letterEnd = iota // ctx ended: the record stays unsettled
	letterWritten                    // acknowledged by Kafka
	letterSkipped                    // unwritable, and DeadLetterConfig.Unwritable skips
	letterHalted                     // unwritable, and DeadLetterConfig.Unwritable halts
)

// write writes l and waits for Kafka's acknowledgement, retrying failed
// writes with DeadLetterConfig.Retry; a write that can never succeed is
// settled by DeadLetterConfig.Unwritable. A write in flight when ctx ends
// gets DeadLetterConfig.WriteTimeout to be acknowledged, so that its record
// is not dead-lettered twice.
func (s *shareSource[K, V]) write(ctx context.Context, log *recordLog, l *letter) letterEnd {
	c, w := s.c, s.c.dlq
	w.send(ctx, l)
	for {
		select {
		case <-l.cur.done:
		case <-ctx.Done():
			t := time.NewTimer(w.timeout)
			select {
			case <-l.cur.done:
				t.Stop()
			case <-t.C:
				return letterAbandoned
			}
		}
		if l.ok() {
			return letterWritten
		}
		if ctx.Err() != nil {
			return letterAbandoned
		}
		c.stats.dlqWriteErrors.Add(1)
		never, now, err := w.failed(ctx, l)
		if never {
			switch c.cfg.DeadLetter.Unwritable {
			case UnwritableSkip:
				return letterSkipped
			case UnwritableHalt:
				return letterHalted
			}
		}
		wait := w.nextWait(l)
		if now {
			wait = 0
		}
		log.error("dead-letter write failed; the record waits and the write is retried (its lock is renewed)", l.src,
			"dlq_topic", l.tmpl.Topic, "attempt", l.tries, "wait", dur(wait), "never_succeeds", never, "err", err)
		if err := backoff.Sleep(ctx, wait); err != nil {
			return letterAbandoned
		}
		w.send(ctx, l)
	}
}
