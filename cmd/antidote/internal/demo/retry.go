package demo

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde"
)

// The retry-topics demo (--retry-topics): the events of orders, keyed by
// order id, and a payment provider that is flaky for some orders. A failed
// payment gets a couple of quick tries in place, then goes through the delay
// tiers while its partition moves on; the later events of its order wait
// behind it, and the handler checks that no event of an order is processed
// before an earlier one.

// The consumer's retry configuration, which the handler's figures assume:
// retryInPlace tries in place (attempts 1 and 2), then one try in each tier
// (attempts 3, 4, 5), then the dead-letter topic.
const retryInPlace = 2

var retryTiers = []time.Duration{200 * time.Millisecond, time.Second, 3 * time.Second}

// retryMaxTries is the tries a record gets before its dead letter.
var retryMaxTries = retryInPlace + len(retryTiers)

// orderEvents are the events of an order, in order: seq 1 is created.
var orderEvents = []string{"created", "paid", "packed", "shipped", "delivered"}

const (
	paidSeq = 2
	// flakyOrderShare is the share of orders whose payment provider is
	// flaky.
	flakyOrderShare = 0.04
)

// flakyFailureWeights are how often a flaky payment fails before it goes
// through, in percent: once (the second quick try succeeds), twice (the
// first tier), ... retryMaxTries times (never: dead-lettered after the last
// tier).
var flakyFailureWeights = []int{20, 35, 25, 15, 5}

// OrderEvent is the value of a record of the retry-topics demo.
type OrderEvent struct {
	OrderID     int    `json:"order_id"`
	Seq         int    `json:"seq"`
	Event       string `json:"event"`
	Customer    string `json:"customer"`
	AmountCents int64  `json:"amount_cents"`
}

// planEvent is the order event a record carries; seq 0 for a record that
// is not one (console garbage, empty values).
type planEvent struct {
	order, seq int
}

func orderKey(id int) []byte { return fmt.Appendf(nil, "order-%06d", id) }

// newRetryPlan interleaves the events of orders: about window orders are
// open at once, each record is the next event of one of them (picked at
// random), and an order closes after its last event. Poison pills replace
// some events (rejected, truncated, wrong shape) or come on their own,
// without a key (garbage, empty). The "paid" event of a flaky order is never
// poison.
func newRetryPlan(n int, seed uint64) *demoPlan {
	r := rand.New(rand.NewPCG(seed, 0x3c6ef372fe94f82b))
	p := &demoPlan{seed: seed, format: formatJSON, kinds: make([]demoKind, n), flaky: map[int]int{}, events: make([]planEvent, n)}
	share := func(k demoKind) float64 { return demoKindInfo[k].share[formatJSON] }
	window := max(10, min(200, n/20))
	var (
		open []int // order ids
		next []int // order id -> its next seq
	)
	for i := range n {
		x := r.Float64()
		if x < share(kindGarbage) {
			p.kinds[i] = kindGarbage
			continue
		}
		if x -= share(kindGarbage); x < share(kindEmpty) {
			p.kinds[i] = kindEmpty
			continue
		}
		for len(open) < window {
			id := len(next)
			next = append(next, 1)
			open = append(open, id)
			if r.Float64() < flakyOrderShare {
				p.flaky[id] = flakyFailures(r)
			}
		}
		j := r.IntN(len(open))
		id := open[j]
		seq := next[id]
		next[id]++
		if seq == len(orderEvents) {
			open[j] = open[len(open)-1]
			open = open[:len(open)-1]
		}
		p.events[i] = planEvent{id, seq}
		kind := kindGood
		if p.flaky[id] > 0 {
			switch {
			case seq == paidSeq:
				kind = kindFlaky
			case seq > paidSeq:
				kind = kindAfterFlaky
			}
		}
		if kind != kindFlaky {
			y := r.Float64()
			for _, k := range []demoKind{kindRejected, kindTruncated, kindWrongShape} {
				if y < share(k) {
					kind = k
					break
				}
				y -= share(k)
			}
		}
		p.kinds[i] = kind
	}
	return p
}

// flakyFailures draws how often a flaky payment fails.
func flakyFailures(r *rand.Rand) int {
	x := r.IntN(100)
	for i, w := range flakyFailureWeights {
		if x < w {
			return i + 1
		}
		x -= w
	}
	return len(flakyFailureWeights)
}

// eventValue is record i of a retry plan, encoded.
func (p *demoPlan) eventValue(i int) []byte {
	switch p.kinds[i] {
	case kindGarbage:
		return p.garbage(i)
	case kindEmpty:
		return []byte{}
	}
	pe := p.events[i]
	o := p.order(pe.order)
	e := OrderEvent{OrderID: pe.order, Seq: pe.seq, Event: orderEvents[pe.seq-1], Customer: o.Customer, AmountCents: o.AmountCents}
	switch p.kinds[i] {
	case kindRejected:
		e.AmountCents = -e.AmountCents
	case kindTruncated:
		b, _ := json.Marshal(e)
		return b[:len(b)*2/3]
	case kindWrongShape:
		switch i % 3 {
		case 0:
			return fmt.Appendf(nil, `{"order_id":"%d-abc","seq":%d,"event":%q,"amount_cents":%d}`, e.OrderID, e.Seq, e.Event, e.AmountCents)
		case 1:
			return fmt.Appendf(nil, `[{"order_id":%d,"seq":%d},{"order_id":%d}]`, e.OrderID, e.Seq, e.OrderID)
		default:
			return fmt.Appendf(nil, `{"order_id":%d,"seq":%d,"event":%q,"amount_cents":"%d.%02d"}`, e.OrderID, e.Seq, e.Event, e.AmountCents/100, e.AmountCents%100)
		}
	}
	b, _ := json.Marshal(e)
	return b
}

// retryKindLabels are the summary table's labels of the retry-topics demo,
// where they differ from the default demo's.
var retryKindLabels = map[demoKind]string{
	kindGood:       "order events",
	kindFlaky:      `"paid" of an order whose payment provider is flaky (503)`,
	kindAfterFlaky: "later events of those orders (packed, shipped, ...)",
}

// retryWatch is what the handler of the retry-topics demo sees: per-key
// order, the flaky payments by tier, and the other orders flowing while
// payments wait in the tiers. The tiers' fill comes from the cluster.
type retryWatch struct {
	plan   *demoPlan
	topics []string // the tier topics, in order

	mu         sync.Mutex
	maxSeq     map[int]int        // order id -> highest seq processed
	seen       map[planEvent]bool // events processed (the first time)
	violations int
	tierOf     map[recKey]int // Record.Tier of each record processed from a tier
	// The flaky payments: quick tries that succeeded, forwards to each tier
	// and successes from it (by the handler's count), dead letters after
	// the last tier.
	paidInPlace int
	forwardedTo []int
	paidFrom    []int
	exhausted   int
	// The orders whose payment is in the tiers, since when some order
	// has been, and for how long in all.
	waiting     map[int]bool
	waitSince   time.Time
	waited      time.Duration
	otherEvents int          // events of other orders processed meanwhile
	otherOrders map[int]bool // and their orders
	// From produced to processed: the events of orders without a flaky
	// payment, and the longest of a flaky payment.
	latencies  []time.Duration
	paidLatest time.Duration
	// What the tiers hold (written and not committed), at the last poll
	// and at most.
	held, peak []int64
	pollErr    error
}

func newRetryWatch(plan *demoPlan, topic, group string) *retryWatch {
	w := &retryWatch{
		plan: plan, maxSeq: map[int]int{}, seen: map[planEvent]bool{}, tierOf: map[recKey]int{},
		forwardedTo: make([]int, len(retryTiers)), paidFrom: make([]int, len(retryTiers)),
		waiting: map[int]bool{}, otherOrders: map[int]bool{},
		held: make([]int64, len(retryTiers)), peak: make([]int64, len(retryTiers)),
	}
	rt := consumer.RetryTopics{}
	for _, d := range retryTiers {
		w.topics = append(w.topics, rt.TierTopic(topic, group, d))
	}
	return w
}

// handleEvent is the business logic of the retry-topics demo: validate the
// event, charge the payment provider on "paid", then check the event's place
// in its order.
func (r *demoRun) handleEvent(ctx context.Context, rec *consumer.Record[string, OrderEvent]) error {
	e := rec.Value
	if e.AmountCents <= 0 {
		return failure.Permanent(&failure.ValidationError{Field: "event.amount_cents", Reason: fmt.Sprintf("%d: must be positive", e.AmountCents)})
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	w := r.retry
	if e.Event == orderEvents[paidSeq-1] && rec.Attempt <= w.plan.flakyFailures(e.OrderID) {
		w.paymentFailed(e.OrderID, rec.Attempt)
		return failure.Transient(fmt.Errorf("payment provider: %w", &failure.HTTPError{StatusCode: 503}))
	}
	k := recKey{rec.Raw.Partition, rec.Raw.Offset}
	w.processed(e, k, rec.Attempt, rec.Tier, time.Since(rec.Raw.Timestamp))
	r.ledger.done(k, rec.Attempt, false)
	return nil
}

// paymentFailed notes a failed payment. With the demo's policy, the
// retryInPlace-th failure forwards it to the first tier, each later one to
// the next tier, and the last one dead-letters it.
func (w *retryWatch) paymentFailed(order, attempt int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	switch {
	case attempt < retryInPlace:
	case attempt < retryMaxTries:
		w.forwardedTo[attempt-retryInPlace]++
		if attempt == retryInPlace {
			w.startWaiting(order)
		}
	default:
		w.exhausted++
		w.stopWaiting(order)
	}
}

func (w *retryWatch) startWaiting(order int) {
	if len(w.waiting) == 0 {
		w.waitSince = time.Now()
	}
	w.waiting[order] = true
}

func (w *retryWatch) stopWaiting(order int) {
	if !w.waiting[order] {
		return
	}
	delete(w.waiting, order)
	if len(w.waiting) == 0 {
		w.waited += time.Since(w.waitSince)
	}
}

// processed notes an event the handler completed, and checks its order: an
// event processed (for the first time) after a later event of its order is
// a violation.
func (w *retryWatch) processed(e OrderEvent, k recKey, attempt, tier int, latency time.Duration) {
	w.mu.Lock()
	defer w.mu.Unlock()
	ev := planEvent{e.OrderID, e.Seq}
	if w.seen[ev] {
		return // processed again after a redelivery
	}
	w.seen[ev] = true
	if e.Seq < w.maxSeq[e.OrderID] {
		w.violations++
	} else {
		w.maxSeq[e.OrderID] = e.Seq
	}
	if tier > 0 {
		w.tierOf[k] = tier
	}
	if w.plan.flakyFailures(e.OrderID) == 0 {
		w.latencies = append(w.latencies, latency)
	} else if e.Event == orderEvents[paidSeq-1] {
		w.paidLatest = max(w.paidLatest, latency)
	}
	if e.Event == orderEvents[paidSeq-1] && attempt > 1 {
		if tier > 0 && tier <= len(w.paidFrom) {
			w.paidFrom[tier-1]++
		} else {
			w.paidInPlace++
		}
		w.stopWaiting(e.OrderID)
	}
	if len(w.waiting) > 0 && !w.waiting[e.OrderID] {
		w.otherEvents++
		w.otherOrders[e.OrderID] = true
	}
}

// poll reads what each tier holds: its end offsets less the group's
// committed offsets (or its start offsets, before any commit). It returns
// the records written to each tier (end less start) when starts is set.
func (w *retryWatch) poll(ctx context.Context, adm *kadm.Client, group string, timeout time.Duration, starts bool) []int64 {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	held, written, err := w.read(ctx, adm, group, starts)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pollErr = err
	if err != nil {
		return nil
	}
	copy(w.held, held)
	for i, n := range held {
		w.peak[i] = max(w.peak[i], n)
	}
	return written
}

func (w *retryWatch) read(ctx context.Context, adm *kadm.Client, group string, withStarts bool) (held, written []int64, err error) {
	ends, err := adm.ListEndOffsets(ctx, w.topics...)
	if err != nil {
		return nil, nil, err
	}
	committed, err := adm.FetchOffsets(ctx, group)
	if err != nil {
		return nil, nil, err
	}
	var starts kadm.ListedOffsets
	if withStarts {
		if starts, err = adm.ListStartOffsets(ctx, w.topics...); err != nil {
			return nil, nil, err
		}
	}
	held, written = make([]int64, len(w.topics)), make([]int64, len(w.topics))
	index := make(map[string]int, len(w.topics))
	for i, t := range w.topics {
		index[t] = i
	}
	ends.Each(func(o kadm.ListedOffset) {
		i, ok := index[o.Topic]
		if !ok || o.Err != nil {
			return // not created yet: empty
		}
		from := int64(0)
		if s, ok := starts.Lookup(o.Topic, o.Partition); ok && s.Err == nil {
			from = s.Offset
		}
		at := from
		if c, ok := committed.Lookup(o.Topic, o.Partition); ok && c.Err == nil && c.At > at {
			at = c.At
		}
		held[i] += max(0, o.Offset-at)
		written[i] += max(0, o.Offset-from)
	})
	return held, written, nil
}

// statusLine is the live line of the retry-topics demo.
func (w *retryWatch) statusLine(r *demoRun, st consumer.Stats, perSec float64, producing bool) string {
	r.ledger.mu.Lock()
	produced := len(r.ledger.produced)
	r.ledger.mu.Unlock()
	prod := fmt.Sprintf("produced %d", produced)
	if producing {
		prod = fmt.Sprintf("produced %d/%d", produced, len(r.plan.kinds))
	}
	w.mu.Lock()
	tiers := make([]string, len(retryTiers))
	for i, d := range retryTiers {
		tiers[i] = fmt.Sprintf("%s:%d", consumer.DelayName(d), w.held[i])
	}
	waiting := len(w.waiting)
	w.mu.Unlock()
	return fmt.Sprintf("  %5.1fs  %6.0f rec/s  %s  processed %d  dead-lettered %d  in tiers %s  forwarded %d  parked %d  payments waiting %d",
		time.Since(r.start).Seconds(), perSec, prod, st.Processed, st.DeadLettered, strings.Join(tiers, " "), st.Forwarded, st.Parked, waiting)
}

// intro prints what the retry-topics demo is about to do.
func (w *retryWatch) intro(r *demoRun) {
	orders := map[int]bool{}
	events, flaky := 0, 0
	for i, e := range w.plan.events {
		if e.seq > 0 {
			orders[e.order] = true
			events++
		}
		if w.plan.kinds[i] == kindFlaky {
			flaky++
		}
	}
	l := r.live
	l.Event(fmt.Sprintf("Antidote demo --retry-topics: %d records, %d events of %d orders (%s), keyed by order id, on %s",
		len(w.plan.kinds), events, len(orders), strings.Join(orderEvents, ", "), r.clusterDesc()))
	l.Event(fmt.Sprintf("  topic %s (%d partitions), consumer group %s; the usual poison pills (about %.0f%%) go to %s",
		r.topic, demoPartitions, r.group, 100*w.plan.poisonRecordShare(), r.dlq))
	l.Event(fmt.Sprintf("  the payment provider is flaky for %d orders: their %q fails 1 to %d times (HTTP 503)", flaky, orderEvents[paidSeq-1], retryMaxTries))
	l.Event(fmt.Sprintf("  a failed payment: %d quick tries in place, then the tiers %s, then %s;", retryInPlace, strings.Join(w.topics, ", "), r.dlq))
	l.Event("  the later events of its order wait behind it (per-key order), the other orders flow on")
	l.Event("")
}

// poisonRecordShare is the share of records of the plan that are poison.
func (p *demoPlan) poisonRecordShare() float64 {
	n := 0
	for _, k := range p.kinds {
		switch k {
		case kindGood, kindFlaky, kindAfterFlaky:
		default:
			n++
		}
	}
	return float64(n) / float64(max(1, len(p.kinds)))
}

// newRetryConsumer is the consumer of the retry-topics demo.
func (r *demoRun) newRetryConsumer(logger *slog.Logger) (demoConsumer, error) {
	return consumer.New(consumer.Config[string, OrderEvent]{
		Brokers: r.brokers,
		Topics:  []string{r.topic},
		Group:   r.group,
		Key:     serde.String(),
		Value:   serde.JSON[OrderEvent](),
		Handler: r.handleEvent,
		Policy: consumer.Policy{
			Process: consumer.StagePolicy{
				// A couple of quick tries here, then the tiers.
				Transient: consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(20*time.Millisecond), retryInPlace), Then: consumer.ActionRetryTopic},
			},
		},
		RetryTopics:    consumer.RetryTopics{Tiers: retryTiers}, // then the dead-letter topic
		Hooks:          r.admin.hooks(),
		CommitInterval: 250 * time.Millisecond, // so that the tiers are seen to drain
		ClientOpts: []kgo.Opt{
			kgo.ClientID("antidote-demo"),
			kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
			kgo.FetchMaxWait(500 * time.Millisecond),
			kgo.ProducerLinger(0),
			kgo.DialTimeout(min(r.g.Timeout, 10*time.Second)),
			r.admin.clientOpt(), // franz-go's own metrics, with --admin
		},
		Logger: logger,
	})
}

// demoRetrySummary is the retry part of the summary (-o json:
// "retry_topics").
type demoRetrySummary struct {
	InPlaceTries int `json:"in_place_tries"`
	// Orders and Events count the orders and events the handler processed.
	Orders int `json:"orders"`
	Events int `json:"events"`
	// FlakyOrders counts the orders whose payment provider is flaky;
	// PaidInPlace their payments that went through on a quick try in place;
	// DeadLetteredAfterTiers those that failed in the last tier too.
	FlakyOrders            int `json:"flaky_orders"`
	PaidInPlace            int `json:"paid_in_place"`
	DeadLetteredAfterTiers int `json:"dead_lettered_after_tiers"`
	// Forwarded and Parked are the consumer's counters (Stats): forwards
	// of failed records, and of records parked behind an earlier record of
	// their key (once per tier).
	Forwarded uint64              `json:"forwarded"`
	Parked    uint64              `json:"parked"`
	Tiers     []demoTierSummary   `json:"tiers"`
	Others    demoOthersWhileWait `json:"other_orders"`
	// PollError is set when the tiers' offsets could not be read.
	PollError string `json:"poll_error,omitempty"`
}

type demoTierSummary struct {
	Topic   string `json:"topic"`
	DelayMS int64  `json:"delay_ms"`
	// Forwarded counts failed payments forwarded to it and Paid those
	// that went through from it (by the handler's count).
	Forwarded int `json:"forwarded"`
	Paid      int `json:"paid"`
	// Written counts the records written to it (forwarded and parked),
	// PeakHeld the most it held at once (written, not yet committed, as
	// polled while the demo ran), HeldAtEnd what it held at the end.
	Written   int64 `json:"written"`
	PeakHeld  int64 `json:"peak_held"`
	HeldAtEnd int64 `json:"held_at_end"`
}

// demoOthersWhileWait: the events of other orders the handler processed
// while at least one payment waited in the tiers, and for how long some did.
type demoOthersWhileWait struct {
	Events    int   `json:"events"`
	Orders    int   `json:"orders"`
	WaitingMS int64 `json:"waiting_ms"`
	// From produced to processed, for the events of the orders without a
	// flaky payment: the median and the 99th percentile. PaidMaxMS is the
	// longest for a flaky payment.
	LatencyP50MS int64 `json:"latency_p50_ms"`
	LatencyP99MS int64 `json:"latency_p99_ms"`
	PaidMaxMS    int64 `json:"paid_max_ms"`
}

// summary fills the retry part of s. written are the records written to
// each tier (nil if unknown).
func (w *retryWatch) summary(s *demoSummary, st consumer.Stats, written []int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	waited := w.waited
	if len(w.waiting) > 0 {
		waited += time.Since(w.waitSince)
	}
	rs := &demoRetrySummary{
		InPlaceTries: retryInPlace, Orders: len(w.maxSeq), Events: len(w.seen),
		PaidInPlace: w.paidInPlace, DeadLetteredAfterTiers: w.exhausted,
		Forwarded: st.Forwarded, Parked: st.Parked,
		Others: demoOthersWhileWait{Events: w.otherEvents, Orders: len(w.otherOrders), WaitingMS: waited.Milliseconds(),
			LatencyP50MS: quantile(w.latencies, 0.5).Milliseconds(), LatencyP99MS: quantile(w.latencies, 0.99).Milliseconds(),
			PaidMaxMS: w.paidLatest.Milliseconds()},
	}
	for _, k := range w.plan.kinds {
		if k == kindFlaky {
			rs.FlakyOrders++
		}
	}
	if w.pollErr != nil {
		rs.PollError = w.pollErr.Error()
	}
	for i, d := range retryTiers {
		t := demoTierSummary{Topic: w.topics[i], DelayMS: d.Milliseconds(), Forwarded: w.forwardedTo[i], Paid: w.paidFrom[i],
			PeakHeld: w.peak[i], HeldAtEnd: w.held[i]}
		if written != nil {
			t.Written = written[i]
		}
		rs.Tiers = append(rs.Tiers, t)
	}
	v := w.violations
	s.OrderViolations = &v
	s.RetryTopics = rs
}

// printRetry prints the retry part of the summary.
func printRetry(r *demoRun, s *demoSummary) {
	rs := s.RetryTopics
	if rs == nil {
		return
	}
	w := r.out
	delays := make([]string, len(retryTiers))
	for i, d := range retryTiers {
		delays[i] = consumer.DelayName(d)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "RETRY TOPICS (%d flaky payments: %d quick tries in place, then %s, then the dead-letter topic)\n",
		rs.FlakyOrders, rs.InPlaceTries, strings.Join(delays, ", "))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "  \tFAILED PAYMENTS IN\tPAID FROM IT\tRECORDS WRITTEN\tPEAK HELD\tLEFT\t")
	fmt.Fprintf(tw, "  in place\t-\t%d\t-\t-\t-\t\n", rs.PaidInPlace)
	for _, t := range rs.Tiers {
		fmt.Fprintf(tw, "  %s\t%d\t%d\t%d\t%d\t%d\t\n", t.Topic, t.Forwarded, t.Paid, t.Written, t.PeakHeld, t.HeldAtEnd)
	}
	_ = tw.Flush()
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, n uint64, note string) { fmt.Fprintf(tw, "  %s\t%d\t  %s\n", name, n, note) }
	row("dead-lettered after the last tier", uint64(rs.DeadLetteredAfterTiers), "still failing after "+fmt.Sprint(retryMaxTries)+" tries")
	row("forwarded", rs.Forwarded, "failed records forwarded to a tier (Stats.Forwarded, once per tier)")
	row("parked", rs.Parked, "later events of their orders, forwarded behind them to keep their order (Stats.Parked)")
	row("other orders' events", uint64(rs.Others.Events), fmt.Sprintf("of %d orders, processed while payments waited in the tiers (%.1fs)",
		rs.Others.Orders, float64(rs.Others.WaitingMS)/1000))
	_ = tw.Flush()
	fmt.Fprintf(w, "  from produced to processed: %dms (median), %dms (p99) for the orders without a flaky payment; up to %.1fs for a flaky payment\n",
		rs.Others.LatencyP50MS, rs.Others.LatencyP99MS, float64(rs.Others.PaidMaxMS)/1000)
	_ = tw.Flush()
	if rs.PollError != "" {
		fmt.Fprintf(w, "  (the tiers' offsets could not be read: %s)\n", rs.PollError)
	}
	if s.OrderViolations != nil {
		fmt.Fprintf(w, "\nper-key order: %d orders, %d events out of order\n", rs.Orders, *s.OrderViolations)
	}
}

// quantile returns the q-quantile of ds (sorting it), 0 if empty.
func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(q*float64(len(ds))))]
}
