package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
)

// shortRetryDemo is a retry-topics demo small enough for the test suite:
// 2000 records over 1s; the last tier alone takes 3s. Its seed has
// payments that fail in every tier.
var shortRetryDemo = []string{"demo", "--retry-topics", "--records", "2000", "--produce-for", "1s", "--drain-timeout", "40s", "--seed", "8", "-o", "json"}

// shortRetryPlan is the plan of shortRetryDemo.
func shortRetryPlan() *demoPlan { return newRetryPlan(2000, 8) }

// checkRetrySummary checks the JSON summary of a retry-topics demo: nothing
// lost, the accounting adds up, no event out of order, the tiers used and
// drained. exact adds the checks that hold only without redeliveries (a
// single member that never restarts, as on kfake).
func checkRetrySummary(t *testing.T, code int, stdout, stderr string, exact bool) demoSummary {
	t.Helper()
	if code != cli.ExitOK {
		t.Fatalf("exit %d\nstderr: %s\nstdout: %s", code, stderr, stdout)
	}
	var s demoSummary
	if err := json.Unmarshal([]byte(stdout), &s); err != nil {
		t.Fatalf("stdout is not one JSON object: %v\n%s", err, stdout)
	}
	t.Logf("demo: %d ms, consumer counters %+v", s.DurationMS, s.Consumer)
	if s.SettleTimedOut {
		t.Errorf("the consumer's counters never reached produced: %+v", s.Consumer)
	}
	if s.Produced != 2000 || s.ProduceErrors != 0 {
		t.Errorf("produced %d (%d errors), want 2000", s.Produced, s.ProduceErrors)
	}
	if s.Lost != 0 || s.Duplicates != 0 {
		t.Errorf("lost %d, duplicates %d; want 0 and 0", s.Lost, s.Duplicates)
	}
	if s.Produced != s.Processed+s.DeadLettered+s.Skipped {
		t.Errorf("produced %d != processed %d + dead-lettered %d + skipped %d", s.Produced, s.Processed, s.DeadLettered, s.Skipped)
	}
	if s.OrderViolations == nil {
		t.Fatalf("no order_violations in the summary:\n%s", stdout)
	}
	if *s.OrderViolations != 0 {
		t.Errorf("order_violations %d, want 0", *s.OrderViolations)
	}
	rs := s.RetryTopics
	if rs == nil {
		t.Fatalf("no retry_topics in the summary:\n%s", stdout)
	}
	t.Logf("retry topics: %+v", *rs)
	if rs.Forwarded == 0 || rs.Parked == 0 {
		t.Errorf("forwarded %d, parked %d: want both > 0", rs.Forwarded, rs.Parked)
	}
	if rs.Forwarded != s.Consumer.Forwarded || rs.Parked != s.Consumer.Parked {
		t.Errorf("retry_topics forwarded %d parked %d, consumer %d %d", rs.Forwarded, rs.Parked, s.Consumer.Forwarded, s.Consumer.Parked)
	}
	// Every processed record is an event of an order, each counted once
	// by the handler's order check.
	if rs.Events != s.Processed || rs.Orders == 0 {
		t.Errorf("the order check saw %d events of %d orders; %d records processed", rs.Events, rs.Orders, s.Processed)
	}
	// Every flaky payment settled once: in place, from a tier, or dead-lettered
	// after the last one.
	paid := rs.PaidInPlace + rs.DeadLetteredAfterTiers
	forwarded := 0
	if len(rs.Tiers) != len(retryTiers) {
		t.Fatalf("%d tiers in the summary, want %d", len(rs.Tiers), len(retryTiers))
	}
	for i, tier := range rs.Tiers {
		paid += tier.Paid
		forwarded += tier.Forwarded
		if tier.DelayMS != retryTiers[i].Milliseconds() || !strings.HasPrefix(tier.Topic, s.Topic+".retry.") {
			t.Errorf("tier %d: %+v", i, tier)
		}
		if tier.Written < int64(tier.Forwarded) || tier.PeakHeld > tier.Written {
			t.Errorf("tier %s: written %d, forwarded %d, peak %d", tier.Topic, tier.Written, tier.Forwarded, tier.PeakHeld)
		}
	}
	// Where each payment went through follows from how often it fails:
	// the attempt count travels with the record.
	want := make([]int, retryMaxTries+1) // by failures
	plan := shortRetryPlan()
	for i, k := range plan.kinds {
		if k == kindFlaky {
			want[plan.flaky[plan.events[i].order]]++
		}
	}
	if rs.PaidInPlace != want[1] || rs.DeadLetteredAfterTiers != want[retryMaxTries] || want[retryMaxTries] == 0 {
		t.Errorf("paid in place %d, dead-lettered after the tiers %d; want %d and %d (failures by count %v)",
			rs.PaidInPlace, rs.DeadLetteredAfterTiers, want[1], want[retryMaxTries], want)
	}
	for i, tier := range rs.Tiers {
		if tier.Paid != want[retryInPlace+i] {
			t.Errorf("tier %s: %d paid, want %d", tier.Topic, tier.Paid, want[retryInPlace+i])
		}
	}
	if paid != rs.FlakyOrders || rs.FlakyOrders == 0 {
		t.Errorf("%d flaky payments, %d settled (in place %d, exhausted %d, tiers %+v)", rs.FlakyOrders, paid, rs.PaidInPlace, rs.DeadLetteredAfterTiers, rs.Tiers)
	}
	if rs.Tiers[0].Written == 0 {
		t.Error("nothing written to the first tier")
	}
	if rs.Others.Events == 0 {
		t.Error("no event of another order processed while payments waited in the tiers")
	}
	if exact {
		if uint64(forwarded) != rs.Forwarded {
			t.Errorf("the handler counts %d forwards, the consumer %d", forwarded, rs.Forwarded)
		}
	}
	// The dead letters: the demo's poison pills, and the payments that
	// failed in the last tier too.
	sum := 0
	for k, n := range s.DeadLetteredBy {
		sum += n
		if strings.Contains(k, "retries-exhausted") && (k != "process/retries-exhausted" || n != rs.DeadLetteredAfterTiers) {
			t.Errorf("dead-lettered by %s: %d; want only the %d payments that failed in the last tier", k, n, rs.DeadLetteredAfterTiers)
		}
	}
	if sum != s.DeadLettered || s.DeadLetteredBy["deserialize-value/permanent"] == 0 || s.DeadLetteredBy["process/permanent"] == 0 {
		t.Errorf("dead_lettered %d, by %v: want decode and handler failures, adding up", s.DeadLettered, s.DeadLetteredBy)
	}
	seen := map[string]bool{}
	for _, k := range s.ByKind {
		seen[k.Kind] = true
		for o, n := range k.Outcomes {
			ok := false
			switch k.Kind {
			case "good", "after-flaky":
				ok = o == "processed"
			case "flaky":
				ok = o == "processed-in-place" || strings.HasPrefix(o, "processed-from-tier/") ||
					o == "dead-lettered/process/retries-exhausted/*failure.HTTPError"
			case "rejected":
				ok = o == "dead-lettered/process/permanent/*failure.ValidationError"
			case "garbage", "truncated-json", "wrong-shape-json", "empty":
				ok = strings.HasPrefix(o, "dead-lettered/deserialize-value/permanent/")
			}
			if !ok {
				t.Errorf("kind %s: %d record(s) %s", k.Kind, n, o)
			}
		}
	}
	for _, k := range []string{"good", "flaky", "after-flaky", "rejected", "garbage", "truncated-json", "wrong-shape-json", "empty"} {
		if !seen[k] {
			t.Errorf("no %s records in the summary", k)
		}
	}
	return s
}

// TestDemoRetryTopics runs the retry-topics demo on its own in-process
// cluster, with the admin API (whose metrics once panicked when the
// consumer made its tier reader).
func TestDemoRetryTopics(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, append(slices.Clone(shortRetryDemo), "--admin", "127.0.0.1:0")...)
	s := checkRetrySummary(t, code, stdout, stderr, true)
	if s.Cluster != "kfake" || s.Topic != "orders" || s.Outage != nil {
		t.Errorf("cluster %s, topic %s, outage %+v", s.Cluster, s.Topic, s.Outage)
	}
	if got := s.RetryTopics.Tiers[0].Topic; got != "orders.retry.200ms" {
		t.Errorf("first tier %s, want orders.retry.200ms", got)
	}
}

// TestDemoRetryTopicsTable checks that the human output tells the story.
func TestDemoRetryTopicsTable(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	code, stdout, stderr := runCmd(t, "demo", "--retry-topics", "--records", "1000", "--produce-for", "500ms")
	if code != cli.ExitOK {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	for _, want := range []string{"2 quick tries in place, then the tiers orders.retry.200ms, orders.retry.1s, orders.retry.3s",
		"in tiers 200ms:", "parked", "WHAT WAS PRODUCED", "later events of those orders", "nothing lost",
		"RETRY TOPICS", "FAILED PAYMENTS IN", "other orders' events", " orders, 0 events out of order"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, stdout)
		}
	}
	if strings.Contains(stdout, "inventory database") || strings.Contains(stdout, "OUTAGE") {
		t.Errorf("the retry-topics demo has no database outage:\n%s", stdout)
	}
}

// TestDemoRetryTopicsUsage checks the flags that do not go with it.
func TestDemoRetryTopicsUsage(t *testing.T) {
	t.Setenv(cli.EnvBrokers, "")
	for _, args := range [][]string{
		{"demo", "--retry-topics", "--format", "avro"},
		{"demo", "--retry-topics", "--outage", "1s"},
	} {
		code, _, stderr := runCmd(t, args...)
		if code != cli.ExitUsage || !strings.Contains(stderr, "--") {
			t.Errorf("%v: exit %d, stderr %q; want a usage error", args, code, stderr)
		}
	}
}

// TestRetryPlan checks the stream of the retry-topics demo: each order's
// events in sequence, keyed by order id, the flaky payments where they
// should be, and the same stream for the same seed.
func TestRetryPlan(t *testing.T) {
	p := newRetryPlan(20000, 42)
	if q := newRetryPlan(20000, 42); !slices.Equal(p.kinds, q.kinds) || !slices.Equal(p.events, q.events) {
		t.Fatal("two plans of the same seed differ")
	}
	next := map[int]int{}
	counts := map[demoKind]int{}
	for i, kind := range p.kinds {
		counts[kind]++
		e := p.events[i]
		key, value := p.key(i), p.value(i)
		if kind == kindGarbage || kind == kindEmpty {
			if e.seq != 0 || key != nil {
				t.Fatalf("record %d (%s): event %+v, key %q; want none", i, kind, e, key)
			}
			continue
		}
		if want := next[e.order] + 1; e.seq != want || e.seq > len(orderEvents) {
			t.Fatalf("record %d: order %d event %d, want %d", i, e.order, e.seq, want)
		}
		next[e.order] = e.seq
		if !bytes.Equal(key, orderKey(e.order)) {
			t.Fatalf("record %d: key %q, want %q", i, key, orderKey(e.order))
		}
		flaky := p.flakyFailures(e.order)
		switch {
		case kind == kindFlaky && (flaky == 0 || e.seq != paidSeq):
			t.Fatalf("record %d: flaky kind for order %d event %d (failures %d)", i, e.order, e.seq, flaky)
		case kind != kindFlaky && flaky > 0 && e.seq == paidSeq:
			t.Fatalf("record %d: the payment of flaky order %d is %s", i, e.order, kind)
		case kind == kindAfterFlaky && (flaky == 0 || e.seq <= paidSeq):
			t.Fatalf("record %d: after-flaky kind for order %d event %d", i, e.order, e.seq)
		}
		var got OrderEvent
		err := json.Unmarshal(value, &got)
		switch kind {
		case kindGood, kindFlaky, kindAfterFlaky, kindRejected:
			if err != nil || got.OrderID != e.order || got.Seq != e.seq || got.Event != orderEvents[e.seq-1] || (got.AmountCents > 0) != (kind != kindRejected) {
				t.Fatalf("record %d (%s): %s decodes to %+v, %v", i, kind, value, got, err)
			}
		default:
			if err == nil {
				t.Fatalf("record %d (%s): %s decodes", i, kind, value)
			}
		}
	}
	for _, k := range []demoKind{kindGood, kindFlaky, kindAfterFlaky, kindRejected, kindGarbage, kindTruncated, kindWrongShape, kindEmpty} {
		if counts[k] == 0 {
			t.Errorf("no %s record in 20000", k)
		}
	}
	failures := map[int]bool{}
	for _, f := range p.flaky {
		if f < 1 || f > retryMaxTries {
			t.Errorf("a flaky payment fails %d times, want 1 to %d", f, retryMaxTries)
		}
		failures[f] = true
	}
	if len(failures) != retryMaxTries {
		t.Errorf("failure counts %v: want each of 1 to %d", failures, retryMaxTries)
	}
}

// TestRetryWatch checks the handler's bookkeeping: an event processed
// after a later one of its order is a violation (a redelivery is not), and
// the other orders' events are counted while a payment waits.
func TestRetryWatch(t *testing.T) {
	w := newRetryWatch(&demoPlan{}, "orders", "g")
	ev := func(order, seq int) OrderEvent {
		return OrderEvent{OrderID: order, Seq: seq, Event: orderEvents[seq-1], AmountCents: 100}
	}
	w.processed(ev(1, 1), recKey{0, 0}, 1, 0, 0)
	w.paymentFailed(1, 1) // a quick try in place
	w.paymentFailed(1, 2) // to the first tier
	w.processed(ev(2, 1), recKey{1, 0}, 1, 0, time.Millisecond)
	w.processed(ev(2, 2), recKey{1, 1}, 1, 0, time.Millisecond)
	if w.violations != 0 || w.otherEvents != 2 || len(w.otherOrders) != 1 || w.forwardedTo[0] != 1 {
		t.Fatalf("violations %d, other events %d of %d orders, forwarded %v", w.violations, w.otherEvents, len(w.otherOrders), w.forwardedTo)
	}
	w.processed(ev(1, 3), recKey{0, 2}, 1, 0, time.Millisecond) // packed before paid
	w.processed(ev(1, 2), recKey{0, 1}, 3, 1, time.Millisecond) // paid, from the first tier
	w.processed(ev(1, 2), recKey{0, 1}, 3, 1, time.Millisecond) // redelivered
	if w.violations != 1 {
		t.Errorf("violations %d, want 1: paid was processed after packed", w.violations)
	}
	if w.paidFrom[0] != 1 || len(w.waiting) != 0 || w.tierOf[recKey{0, 1}] != 1 {
		t.Errorf("paid from %v, waiting %v, tier of paid %d", w.paidFrom, w.waiting, w.tierOf[recKey{0, 1}])
	}
	w.processed(ev(2, 3), recKey{1, 2}, 1, 0, time.Millisecond)
	if w.otherEvents != 2 {
		t.Errorf("other events %d after the wait, want 2", w.otherEvents)
	}
	w.paymentFailed(3, 2)
	w.paymentFailed(3, retryMaxTries)
	if w.exhausted != 1 || len(w.waiting) != 0 || w.forwardedTo[0] != 2 {
		t.Errorf("exhausted %d, waiting %v, forwarded %v", w.exhausted, w.waiting, w.forwardedTo)
	}
}

// TestIntegrationDemoRetryTopics runs the retry-topics demo on the test
// cluster through --brokers.
func TestIntegrationDemoRetryTopics(t *testing.T) {
	c := kafkatest.New(t)
	args := append([]string{"--brokers", strings.Join(c.Brokers(), ",")}, shortRetryDemo...)
	code, stdout, stderr := runCmd(t, args...)
	s := checkRetrySummary(t, code, stdout, stderr, false)
	if s.Cluster != "kafka" || !strings.HasPrefix(s.Topic, "orders-") || s.DLQTopic != s.Topic+".dlq" {
		t.Errorf("cluster %s, topic %s, dlq %s", s.Cluster, s.Topic, s.DLQTopic)
	}
	topics := []string{s.Topic, s.DLQTopic}
	for _, tier := range s.RetryTopics.Tiers {
		topics = append(topics, tier.Topic)
	}
	adm := kadm.NewClient(c.Client(t))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := adm.DeleteTopics(ctx, topics...); err != nil {
		t.Logf("deleting the demo's topics: %v", err)
	}
}
