package otel_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"go.opentelemetry.io/otel/trace"

	"github.com/antidote-kafka/antidote/backoff"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/internal/kafkatest"
	"github.com/antidote-kafka/antidote/serde"
)

// The records of the scenario, by key, and what happens to each:
//
//   - ok: processed at its first try;
//   - flaky: fails once (transient), processed at its second try in place;
//   - tiered: fails its two tries in place, is forwarded to the retry tier,
//     and is processed there (try 3);
//   - poison: fails everywhere (transient): two tries in place, one in the
//     tier, then dead-lettered; redriven, it is processed;
//   - pill: fails permanently at its first try and is dead-lettered;
//     redriven, it is processed.
var scenarioKeys = []string{"ok", "flaky", "tiered", "poison", "pill"}

// scenario is what a run of the scenario produced.
type scenario struct {
	traces  map[string]trace.TraceID // the trace of each record, by key
	letters map[string]*kgo.Record   // the dead letter of each dead-lettered record, by key
	source  string                   // the source topic
	tier    string                   // the retry tier's topic
	dlq     string                   // the dead-letter topic
}

// runScenario produces the scenario's records (each with a traceparent of a
// trace of its own, as a traced producer writes it) to a new topic of c,
// runs a consumer traced by tr until they are settled, redrives its dead
// letters with deadletter.Redrive (what `antidote dlq redrive` runs), and
// waits until the redriven records are processed. The spans are tr's
// provider's to export. mode, if not nil, changes the consumer's config.
func runScenario(t *testing.T, c *kafkatest.Cluster, tr consumer.Tracer, mode func(*consumer.Config[string, string])) scenario {
	t.Helper()
	topic := c.Topic(t, "traced", 1)
	group := kafkatest.UniqueName("traced")
	sc := scenario{traces: map[string]trace.TraceID{}, letters: map[string]*kgo.Record{}, source: topic,
		tier: topic + ".retry.100ms", dlq: topic + ".dlq"}
	prod := c.Client(t)
	for _, k := range scenarioKeys {
		var tid trace.TraceID
		var sid trace.SpanID
		_, _ = rand.Read(tid[:])
		_, _ = rand.Read(sid[:])
		sc.traces[k] = tid
		kafkatest.Produce(t, prod, &kgo.Record{Topic: topic, Key: []byte(k), Value: []byte(k),
			Headers: []kgo.RecordHeader{{Key: "traceparent", Value: []byte("00-" + hex.EncodeToString(tid[:]) + "-" + hex.EncodeToString(sid[:]) + "-01")}}})
	}

	var fixed atomic.Bool
	var processed, redriven atomic.Int64
	cfg := consumer.Config[string, string]{
		Brokers: c.Brokers(), Topics: []string{topic}, Group: group,
		Key: serde.String(), Value: serde.String(),
		Handler: func(_ context.Context, r *consumer.Record[string, string]) error {
			switch {
			case fixed.Load():
			case r.Key == "flaky" && r.Attempt == 1,
				r.Key == "tiered" && r.Attempt < 3,
				r.Key == "poison":
				return failure.Transient(fmt.Errorf("%s: try %d: service unavailable", r.Key, r.Attempt))
			case r.Key == "pill":
				return failure.Permanent(errors.New("pill: malformed order"))
			}
			if slices.ContainsFunc(r.Raw.Headers, func(h kgo.RecordHeader) bool { return h.Key == deadletter.HeaderRedriveCount }) {
				redriven.Add(1)
			}
			processed.Add(1)
			return nil
		},
		Policy: consumer.Policy{Process: consumer.StagePolicy{
			Transient: consumer.Rule{Retry: backoff.MaxAttempts(backoff.Fixed(10*time.Millisecond), 2), Then: consumer.ActionRetryTopic},
		}},
		RetryTopics: consumer.RetryTopics{Tiers: []time.Duration{100 * time.Millisecond}},
		Tracer:      tr,
		Logger:      kafkatest.Logger(t),
		ClientOpts:  append(c.ClientOpts(), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())),
	}
	if mode != nil {
		mode(&cfg)
	}
	cons, err := consumer.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- cons.Run(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Run: %v", err)
				}
			case <-time.After(time.Minute):
				t.Errorf("Run did not return within a minute of its cancel")
			}
		})
	}
	defer stop()
	kafkatest.WaitFor(t, 2*time.Minute, "the records settled", func() bool {
		s := cons.Stats()
		// At least: in the exactly-once mode an aborted transaction
		// handles its records again.
		return processed.Load() >= 3 && s.DeadLettered >= 2
	})

	// The dead letters, as written.
	rd := c.Client(t, append(deadletter.ScanOpts(), kgo.ConsumeTopics(sc.dlq), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	pctx, pcancel := context.WithTimeout(context.Background(), time.Minute)
	defer pcancel()
	for len(sc.letters) < 2 && pctx.Err() == nil {
		rd.PollFetches(pctx).EachRecord(func(r *kgo.Record) {
			if !r.Attrs.IsControl() { // ScanOpts keeps the transaction markers
				sc.letters[string(r.Key)] = r
			}
		})
	}
	if len(sc.letters) != 2 {
		t.Fatalf("dead letters read: %d, want 2", len(sc.letters))
	}

	fixed.Store(true)
	rctx, rcancel := context.WithTimeout(context.Background(), time.Minute)
	defer rcancel()
	res, err := deadletter.Redrive(rctx, c.Client(t, deadletter.ScanOpts()...), deadletter.RedriveConfig{Topic: sc.dlq})
	if err != nil || res.Redriven != 2 {
		t.Fatalf("Redrive = %+v, %v; want 2 redriven", res, err)
	}
	kafkatest.WaitFor(t, 2*time.Minute, "the redriven records processed", func() bool { return redriven.Load() >= 2 })
	stop()
	return sc
}

// gotSpan is a span as exported, from the in-memory exporter or read back
// from the collector.
type gotSpan struct {
	Name     string
	Trace    string // hex
	ID       string // hex
	Parent   string // hex, "" for a root
	Attrs    map[string]string
	Links    []string // the span ids linked to
	LinkedTo []string // the trace ids linked to
	Error    bool     // status Error
}

func (s gotSpan) String() string {
	return fmt.Sprintf("%s %s/%s<-%s %v", s.Name, s.Trace[:8], s.ID, s.Parent, s.Attrs)
}

// checkScenario checks the spans of a run of the scenario: one trace per
// record across its retries in place, its tier hop, its dead letter and its
// redrive, with the messaging attributes, the failure's class and stage, and
// the trace context in the dead letters. With repeats (the exactly-once
// mode, where an aborted transaction's records are handled again, each time
// in a span of its own), the counts of handlings, tries and letters are
// minimums.
func checkScenario(t *testing.T, sc scenario, spans []gotSpan, repeats bool) {
	t.Helper()
	byID := map[string]gotSpan{}
	byTrace := map[string][]gotSpan{}
	for _, s := range spans {
		byID[s.ID] = s
		byTrace[s.Trace] = append(byTrace[s.Trace], s)
	}
	count := func(ss []gotSpan, name string, attr ...string) (n int) {
		for _, s := range ss {
			if s.Name != name {
				continue
			}
			ok := true
			for i := 0; i+1 < len(attr); i += 2 {
				ok = ok && s.Attrs[attr[i]] == attr[i+1]
			}
			if ok {
				n++
			}
		}
		return n
	}
	process, try := "process "+sc.source, "try "+sc.source
	for _, k := range scenarioKeys {
		tid := sc.traces[k].String()
		ss := byTrace[tid]
		if len(ss) == 0 {
			t.Errorf("%s: no span in its trace %s", k, tid)
			continue
		}
		for _, s := range ss {
			// Every span of the trace hangs from another one of it, or
			// from the producer's span (not exported).
			if _, ok := byID[s.Parent]; !ok && s.Parent == "" {
				t.Errorf("%s: span %v is a root: the trace is broken", k, s)
			}
			if s.Name == process {
				for key, want := range map[string]string{"messaging.system": "kafka", "messaging.operation.type": "process",
					"messaging.destination.name": sc.source, "messaging.kafka.message.key": k, "messaging.destination.partition.id": "0"} {
					if s.Attrs[key] != want {
						t.Errorf("%s: process span %s=%q, want %q", k, key, s.Attrs[key], want)
					}
				}
				if s.Attrs["messaging.kafka.offset"] == "" || s.Attrs["messaging.consumer.group.name"] == "" {
					t.Errorf("%s: process span without offset or group: %v", k, s)
				}
			}
		}
		// What each record went through: handlings (process spans) by
		// outcome, tries, forwards and dead letters.
		type want struct{ processed, forwarded, dead, tries, tierHandlings, forwards, letters int }
		w := map[string]want{
			"ok":     {processed: 1, tries: 1},
			"flaky":  {processed: 1, tries: 2},
			"tiered": {processed: 1, forwarded: 1, tries: 3, tierHandlings: 1, forwards: 1},
			"poison": {processed: 1, forwarded: 1, dead: 1, tries: 4, tierHandlings: 1, forwards: 1, letters: 1},
			"pill":   {processed: 1, dead: 1, tries: 2, letters: 1},
		}[k]
		got := want{
			processed:     count(ss, process, "antidote.outcome", "processed"),
			forwarded:     count(ss, process, "antidote.outcome", "forwarded"),
			dead:          count(ss, process, "antidote.outcome", "dead-lettered"),
			tries:         count(ss, try),
			tierHandlings: count(ss, process, "antidote.retry.topic", sc.tier),
			forwards:      count(ss, "send "+sc.tier, "antidote.letter", "retry-tier"),
			letters:       count(ss, "send "+sc.dlq, "antidote.letter", "dead-letter"),
		}
		atLeast := got.processed >= w.processed && got.forwarded >= w.forwarded && got.dead >= w.dead && got.tries >= w.tries &&
			got.tierHandlings >= w.tierHandlings && got.forwards >= w.forwards && got.letters >= w.letters
		if (!repeats && got != w) || (repeats && !atLeast) {
			t.Errorf("%s: its trace holds %+v, want %+v (repeats: %v); spans:\n%v", k, got, w, repeats, ss)
		}
		for _, s := range ss {
			switch {
			case s.Name == process && s.Attrs["antidote.retry.topic"] == sc.tier:
				// A tier's handling hangs from the forward's send span,
				// which hangs from the source's handling.
				fw := byID[s.Parent]
				if fw.Name != "send "+sc.tier || byID[fw.Parent].Name != process {
					t.Errorf("%s: the tier's handling %v hangs from %v, not from a forward of a handling", k, s, fw)
				}
			case s.Name == process && s.Attrs["antidote.outcome"] == "dead-lettered":
				if !s.Error || s.Attrs["antidote.failure.class"] == "" || s.Attrs["antidote.stage"] != "process" {
					t.Errorf("%s: a dead-lettered handling without status Error, class or stage: %v", k, s)
				}
			case s.Name == process && s.Attrs["antidote.outcome"] == "forwarded":
				if s.Attrs["antidote.failure.class"] != "transient" {
					t.Errorf("%s: a forwarded handling without its failure class: %v", k, s)
				}
			case s.Name == try && s.Error:
				if s.Attrs["antidote.stage"] != "process" || s.Attrs["error.type"] == "" {
					t.Errorf("%s: a failed try without stage or error.type: %v", k, s)
				}
			}
		}
		if w.letters == 0 {
			continue
		}
		// The dead letter keeps the record's traceparent and names the
		// span that wrote it; the redriven record's handling links to it.
		l := sc.letters[k]
		if l == nil {
			t.Errorf("%s: no dead letter read", k)
			continue
		}
		var tp, letter string
		for _, h := range l.Headers {
			switch h.Key {
			case "traceparent":
				tp = string(h.Value)
			case deadletter.HeaderTraceLetter:
				letter = string(h.Value)
			}
		}
		if !strings.Contains(tp, tid) {
			t.Errorf("%s: the dead letter's traceparent %q is not the record's (trace %s)", k, tp, tid)
		}
		parts := strings.Split(letter, "-")
		if len(parts) != 4 || parts[1] != tid {
			t.Errorf("%s: the dead letter's %s is %q, want a span of trace %s", k, deadletter.HeaderTraceLetter, letter, tid)
			continue
		}
		send := byID[parts[2]]
		if send.Name != "send "+sc.dlq || byID[send.Parent].Attrs["antidote.outcome"] != "dead-lettered" {
			t.Errorf("%s: the dead letter names span %v, not the send of a dead-lettered handling", k, send)
		}
		linked := 0
		for _, s := range ss {
			if s.Name == process && slices.Contains(s.Links, parts[2]) {
				linked++
				if s.Attrs["antidote.outcome"] != "processed" || s.Attrs["antidote.redrive.from"] == "" {
					t.Errorf("%s: the span linked to the dead letter is not the redriven record's handling: %v", k, s)
				}
			}
		}
		if linked != 1 && !(repeats && linked > 1) {
			t.Errorf("%s: %d handlings link to the dead letter's span, want 1 (the redriven record's)", k, linked)
		}
	}
}
