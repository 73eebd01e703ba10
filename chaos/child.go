package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/plugin/kslog"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
)

// Event is one line of a child's log: a handler call, an operator action,
// or the child starting and stopping. The oracle reads nothing else of the
// children.
type Event struct {
	Ev     string `json:"ev"` // start | assign | revoke | call | ack | commit | abort | stuck | skip | pause | resume | retry | forget | stop
	Member int    `json:"m"`
	PID    int    `json:"pid,omitempty"`
	Topic  string `json:"topic,omitempty"` // the source topic (Record.Raw shows a tier copy as its original)
	To     string `json:"to,omitempty"`    // ack: the dead-letter or tier topic the letter went to
	ToPart *int32 `json:"to_p,omitempty"`  // ack: the letter's partition and offset there
	At     *int64 `json:"at,omitempty"`
	Part   int32  `json:"p"`
	Offset int64  `json:"o"`
	Key    string `json:"key,omitempty"`
	NoKey  bool   `json:"nokey,omitempty"`
	Att    int    `json:"att,omitempty"`
	Tier   int    `json:"tier,omitempty"`
	Res    string `json:"res,omitempty"` // ok | transient | permanent | canceled
	T0     int64  `json:"t0,omitempty"`  // unix nanoseconds: the call began (ack: Kafka acknowledged the letter before it)
	T1     int64  `json:"t1,omitempty"`  // and ended
	Err    string `json:"err,omitempty"`
	On     *bool  `json:"on,omitempty"`      // retry: the kill switch's new state
	RSSKiB int64  `json:"rss_kib,omitempty"` // stop: the process's peak resident set
}

// eventLog appends JSON lines to a file; every line is one write, so a
// SIGKILL loses at most the line being written.
type eventLog struct {
	mu sync.Mutex
	f  *os.File
}

func (l *eventLog) write(e Event) {
	b, _ := json.Marshal(e)
	b = append(b, '\n')
	l.mu.Lock()
	defer l.mu.Unlock()
	l.f.Write(b)
}

// config builds the consumer's configuration for the scenario's mode. w is
// nil when the configuration is only checked (see accepted).
func (sc *Scenario) config(brokers []string, member int, w *worker, log *slog.Logger) consumer.Config[string, Value] {
	m := sc.Mode
	cfg := consumer.Config[string, Value]{
		Brokers:        brokers,
		Topics:         []string{sc.Source()},
		Group:          sc.Group(),
		Value:          valueDeserializer{},
		Logger:         log,
		CommitInterval: ms(m.CommitMs),
		GroupProtocol:  consumer.GroupClassic,
		FloodGuard:     consumer.FloodGuard{Disable: true},
		ClientOpts: []kgo.Opt{
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			// New source partitions are seen within seconds.
			kgo.MetadataMaxAge(2 * time.Second),
			kgo.MetadataMinAge(250 * time.Millisecond),
			kgo.SessionTimeout(6 * time.Second),
			kgo.HeartbeatInterval(500 * time.Millisecond),
			kgo.RebalanceTimeout(10 * time.Second),
			// The process in the client id: a member of the group
			// whose process is gone can be told apart (see
			// describeGroup).
			kgo.ClientID(fmt.Sprintf("chaos-m%d-p%d", member, os.Getpid())),
		},
	}
	if m.Protocol == "consumer" {
		cfg.GroupProtocol = consumer.GroupConsumer
	}
	if w != nil && w.log != nil {
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithHooks(ackHook{w.log, member}))
		cfg.Hooks = groupHook{log: w.log, member: member}
	}
	if w != nil && len(w.routes) > 0 {
		cfg.ClientOpts = append(cfg.ClientOpts, routeDialer(w.routes))
	}
	retry := backoff.MaxAttempts(backoff.Fixed(ms(m.BackoffMs)), m.Tries)
	then := consumer.ActionDeadLetter
	if len(m.TiersMs) > 0 {
		then = consumer.ActionRetryTopic
		for _, d := range m.TiersMs {
			cfg.RetryTopics.Tiers = append(cfg.RetryTopics.Tiers, ms(d))
		}
		cfg.RetryTopics.Unordered = m.TiersUnordered
	}
	cfg.Policy.Process.Transient = consumer.Rule{Retry: retry, Then: then}
	cfg.Policy.Process.Unclassified = consumer.Rule{Retry: retry, Then: then}
	switch m.Dispatch {
	case "lanes":
		cfg.Concurrency = consumer.Concurrency{Max: m.LanesMax, Unordered: m.LanesUnordered}
	case "batch":
		cfg.Batching = consumer.Batching{Size: m.BatchSize, Linger: ms(m.BatchLingerMs)}
	}
	if w == nil {
		w = &worker{}
	}
	if m.Dispatch == "batch" {
		cfg.BatchHandler = w.batch
	} else {
		cfg.Handler = w.handle
	}
	if m.ExactlyOnce {
		cfg.ExactlyOnce = consumer.ExactlyOnce{TransactionalID: fmt.Sprintf("%sm%d", sc.prefix(), member), Interval: 100 * time.Millisecond}
	}
	cfg.DurableAttempts.Disable = !m.DurableAttempts
	if m.BufferRecords > 0 {
		cfg.Buffer = consumer.BufferLimits{PartitionRecords: m.BufferRecords, TotalRecords: 2 * m.BufferRecords}
	}
	return cfg
}

// ackHook logs every letter (a dead letter, or a copy forwarded to a retry
// tier) that Kafka acknowledged, as "ack" events: the oracle's evidence that
// a record was dead-lettered or forwarded when the letter itself is gone
// from Kafka because a fault deleted its topic. It sees what the consumer's
// client writes (letters and, in exactly-once mode, outputs: those carry no
// original coordinates and are left out); in exactly-once mode the
// acknowledgement is inside a transaction not committed yet.
type ackHook struct {
	log    *eventLog
	member int
}

var _ kgo.HookProduceRecordUnbuffered = ackHook{}

func (h ackHook) OnProduceRecordUnbuffered(r *kgo.Record, err error) {
	if err != nil {
		return
	}
	var topic, part, off string
	for _, x := range r.Headers {
		switch x.Key {
		case deadletter.HeaderOriginalTopic:
			topic = string(x.Value)
		case deadletter.HeaderOriginalPartition:
			part = string(x.Value)
		case deadletter.HeaderOriginalOffset:
			off = string(x.Value)
		}
	}
	p, err1 := strconv.Atoi(part)
	o, err2 := strconv.ParseInt(off, 10, 64)
	if topic == "" || err1 != nil || err2 != nil {
		return
	}
	h.log.write(Event{Ev: "ack", Member: h.member, Topic: topic, To: r.Topic, ToPart: &r.Partition, At: &r.Offset, Part: int32(p), Offset: o, T0: time.Now().UnixNano()})
}

// groupHook logs each partition the group gives the member or takes: a
// record it shows stuck counts only while the member holds its partition
// (stuckViolations); and, in exactly-once mode, each transaction's end, as
// "commit" or "abort": a letter acknowledged before a commit was committed
// in it (judgeAccounts).
type groupHook struct {
	consumer.NopHooks
	log    *eventLog
	member int
}

func (h groupHook) PartitionsAssigned(m map[string][]int32) { h.write("assign", m) }
func (h groupHook) PartitionsRevoked(m map[string][]int32)  { h.write("revoke", m) }

func (h groupHook) TransactionEnded(ev consumer.TransactionEvent) {
	e := Event{Ev: "commit", Member: h.member, T0: time.Now().UnixNano()}
	if !ev.Committed {
		e.Ev, e.Err = "abort", errString(ev.Err)
	}
	h.log.write(e)
}

func (h groupHook) write(ev string, m map[string][]int32) {
	now := time.Now().UnixNano()
	for topic, ps := range m {
		for _, p := range ps {
			h.log.write(Event{Ev: ev, Member: h.member, Topic: topic, Part: p, T0: now})
		}
	}
}

// worker is a child's handler: it does what each record's value says and
// logs every call.
type worker struct {
	sc     *Scenario
	member int
	log    *eventLog
	output string
	routes map[string]string // broker address -> its fault proxy
}

func (w *worker) call(ctx context.Context, r *consumer.Record[string, Value]) (Event, error) {
	e := Event{Ev: "call", Member: w.member, Topic: r.Raw.Topic, Part: r.Raw.Partition, Offset: r.Raw.Offset,
		Key: string(r.Raw.Key), NoKey: r.Raw.Key == nil, Att: r.Attempt, Tier: r.Tier, T0: time.Now().UnixNano()}
	v := r.Value
	var err error
	if v.LatMs > 0 {
		select {
		case <-time.After(ms(v.LatMs)):
		case <-ctx.Done():
		}
	}
	switch {
	case ctx.Err() != nil:
		e.Res, err = "canceled", ctx.Err()
	case v.Perm:
		e.Res, err = "permanent", failure.Permanent(fmt.Errorf("chaos: record %d is rejected", v.ID))
	case r.Attempt <= v.Fail:
		e.Res, err = "transient", failure.Transient(fmt.Errorf("chaos: record %d fails on attempt %d of %d", v.ID, r.Attempt, v.Fail))
	default:
		e.Res = "ok"
		if w.sc.Mode.ExactlyOnce {
			out := &kgo.Record{Topic: w.output, Key: r.Raw.Key, Value: fmt.Appendf(nil, "%d/%d", r.Raw.Partition, r.Raw.Offset)}
			if perr := r.Produce(out); perr != nil {
				e.Res, err = "permanent", perr
			}
		}
	}
	e.T1 = time.Now().UnixNano()
	if err != nil && e.Res != "canceled" {
		e.Err = err.Error()
	}
	return e, err
}

func (w *worker) handle(ctx context.Context, r *consumer.Record[string, Value]) error {
	e, err := w.call(ctx, r)
	if w.log != nil {
		w.log.write(e)
	}
	return err
}

func (w *worker) batch(ctx context.Context, batch []*consumer.Record[string, Value]) error {
	errs := map[int]error{}
	for i, r := range batch {
		e, err := w.call(ctx, r)
		if w.log != nil {
			w.log.write(e)
		}
		if err != nil {
			errs[i] = err
		}
	}
	if len(errs) > 0 {
		return &consumer.BatchError{Errs: errs}
	}
	return nil
}

// runChild is a consumer process: it reads the scenario from dir, runs one
// member, logs to dir/m<member>.jsonl, and takes operator commands on stdin,
// one a line: "pause MS", "skip", "retryoff MS". With routes, its clients
// reach those brokers through their fault proxies.
func runChild(dir string, member int, brokers []string, routes map[string]string) int {
	b, err := os.ReadFile(dir + "/scenario.json")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	var sc Scenario
	if err := json.Unmarshal(b, &sc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, err := os.OpenFile(fmt.Sprintf("%s/m%d.jsonl", dir, member), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	el := &eventLog{f: f}
	logf, _ := os.OpenFile(fmt.Sprintf("%s/m%d.log", dir, member), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	level := slog.LevelInfo
	if os.Getenv("CHAOS_DEBUG") != "" {
		level = slog.LevelDebug
	}
	log := slog.New(forgetTee{slog.NewTextHandler(logf, &slog.HandlerOptions{Level: level}), el, member})
	w := &worker{sc: &sc, member: member, log: el, output: sc.Output(), routes: routes}
	cfg := sc.config(brokers, member, w, log)
	if level == slog.LevelDebug {
		// The client's own debug log: what it fetched, purged and was assigned.
		cfg.ClientOpts = append(cfg.ClientOpts, kgo.WithLogger(kslog.New(log.With("client", "franz-go"))))
	}
	c, err := consumer.New(cfg)
	if err != nil {
		el.write(Event{Ev: "stop", Member: member, Err: "new: " + err.Error()})
		return 2
	}
	el.write(Event{Ev: "start", Member: member, PID: os.Getpid(), T0: time.Now().UnixNano()})

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	go commands(ctx, c, &sc, member, el, stop)
	// The watcher ends with Run, a halt included (ctx does not end then).
	wctx, endWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); watchStuck(wctx, c, member, el) }()
	err = c.Run(ctx)
	endWatch()
	<-watched
	e := Event{Ev: "stop", Member: member, T0: time.Now().UnixNano(), RSSKiB: peakRSSKiB()}
	if st, jerr := json.Marshal(c.Stats()); jerr == nil {
		log.Info("final stats", "stats", string(st))
	}
	if err != nil {
		e.Err = err.Error()
		el.write(e)
		var he *consumer.HaltError
		if errors.As(err, &he) {
			return 3
		}
		return 1
	}
	el.write(e)
	return 0
}

// commands runs the operator's commands that the parent writes to stdin.
//
// Standard input ends when the harness is gone (it holds the pipe open as
// long as it runs, and a crash closes it): the child then stops, so that no
// child outlives a harness that crashed.
func commands(ctx context.Context, c *consumer.Consumer[string, Value], sc *Scenario, member int, el *eventLog, stop func()) {
	defer stop()
	r := rand.New(rand.NewPCG(sc.Seed, uint64(member)))
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		fields := strings.Fields(in.Text())
		if len(fields) == 0 {
			continue
		}
		arg := 0
		if len(fields) > 1 {
			arg, _ = strconv.Atoi(fields[1])
		}
		now := time.Now().UnixNano()
		switch fields[0] {
		case "pause":
			var owned []consumer.Partition
			for _, p := range c.Stats().Partitions {
				if p.Topic == sc.Source() {
					owned = append(owned, p)
				}
			}
			if len(owned) == 0 {
				el.write(Event{Ev: "pause", Member: member, Part: -1, Err: "no partition owned", T0: now})
				continue
			}
			p := owned[r.IntN(len(owned))]
			err := c.Pause(p.Topic, p.Partition)
			el.write(Event{Ev: "pause", Member: member, Topic: p.Topic, Part: p.Partition, Err: errString(err), T0: now})
			go func() {
				select {
				case <-time.After(ms(arg)):
				case <-ctx.Done():
					return
				}
				err := c.Resume(p.Topic, p.Partition)
				el.write(Event{Ev: "resume", Member: member, Topic: p.Topic, Part: p.Partition, Err: errString(err), T0: time.Now().UnixNano()})
			}()
		case "skip":
			// Skip one record a source partition is stuck on, as an
			// operator would after reading Stats: wait up to MS for one.
			go func() {
				deadline := time.Now().Add(ms(arg))
				for {
					for _, s := range c.Stats().Stuck {
						if s.Topic != sc.Source() {
							continue
						}
						err := c.Skip(s.Topic, s.Partition, s.Offset)
						el.write(Event{Ev: "skip", Member: member, Topic: s.Topic, Part: s.Partition, Offset: s.Offset, Err: errString(err), T0: time.Now().UnixNano()})
						if err == nil {
							return
						}
					}
					if time.Now().After(deadline) || ctx.Err() != nil {
						el.write(Event{Ev: "skip", Member: member, Part: -1, Err: "nothing stuck", T0: time.Now().UnixNano()})
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
			}()
		case "retryoff":
			off, on := false, true
			c.SetRetryEnabled(false)
			el.write(Event{Ev: "retry", Member: member, On: &off, T0: now})
			go func() {
				select {
				case <-time.After(ms(arg)):
				case <-ctx.Done():
				}
				c.SetRetryEnabled(true)
				el.write(Event{Ev: "retry", Member: member, On: &on, T0: time.Now().UnixNano()})
			}()
		}
	}
}

// watchStuck reads Stats().Stuck every 250ms, as an operator's dashboard
// would, and logs each stuck record once it is no longer stuck (or when ctx
// ends): a "stuck" event with the consumer's Since (T0), the last time it
// was seen stuck (T1) and the reason (Err).
func watchStuck(ctx context.Context, c *consumer.Consumer[string, Value], member int, el *eventLog) {
	type key struct {
		topic string
		p     int32
		o     int64
	}
	seen := map[key]Event{}
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			for _, e := range seen {
				el.write(e)
			}
			return
		case <-t.C:
		}
		now := time.Now().UnixNano()
		cur := map[key]bool{}
		for _, s := range c.Stats().Stuck {
			k := key{s.Topic, s.Partition, s.Offset}
			cur[k] = true
			e, ok := seen[k]
			if !ok {
				e = Event{Ev: "stuck", Member: member, Topic: s.Topic, Part: s.Partition, Offset: s.Offset, T0: s.Since.UnixNano(), Err: string(s.Reason)}
			}
			e.T1 = now
			seen[k] = e
		}
		for k, e := range seen {
			if !cur[k] {
				el.write(e)
				delete(seen, k)
			}
		}
	}
}

// peakRSSKiB is the process's peak resident set in KiB: VmHWM of
// /proc/self/status, or getrusage's ru_maxrss where there is no /proc.
func peakRSSKiB() int64 {
	if b, err := os.ReadFile("/proc/self/status"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
				if n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64); err == nil {
					return n
				}
			}
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
		return ru.Maxrss // KiB on Linux
	}
	return 0
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// forgetTee passes the consumer's log on, and logs a "forget" event (To:
// the topic) when the consumer says that a retry tier was deleted and
// created again: it then forgets every copy it knows in that tier (its
// family entries), those written to the new topic before it noticed
// included, and the later records of their keys no longer wait for them
// (docs/modes.md). The oracle exempts those keys from per-key order up to
// this event.
type forgetTee struct {
	slog.Handler
	log    *eventLog
	member int
}

func (h forgetTee) Handle(ctx context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, "retry topic") && strings.Contains(r.Message, "was deleted and created again") {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "topic" {
				h.log.write(Event{Ev: "forget", Member: h.member, To: a.Value.String(), T0: time.Now().UnixNano()})
				return false
			}
			return true
		})
	}
	return h.Handler.Handle(ctx, r)
}

func (h forgetTee) WithAttrs(as []slog.Attr) slog.Handler {
	return forgetTee{h.Handler.WithAttrs(as), h.log, h.member}
}

func (h forgetTee) WithGroup(name string) slog.Handler {
	return forgetTee{h.Handler.WithGroup(name), h.log, h.member}
}
