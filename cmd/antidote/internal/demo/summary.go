package demo

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
)

// demoSummary is the demo's result; -o json prints it as is.
type demoSummary struct {
	Produced       int            `json:"produced"`
	Processed      int            `json:"processed"`
	DeadLettered   int            `json:"dead_lettered"`
	DeadLetteredBy map[string]int `json:"dead_lettered_by"` // "stage/reason" -> n
	Skipped        int            `json:"skipped"`
	Lost           int            `json:"lost"`
	// Duplicates counts dead letters of the same record written twice, and
	// records both processed and dead-lettered. Always 0.
	Duplicates int `json:"duplicates"`
	// ProduceErrors counts records the producer could not write; they are
	// not part of Produced.
	ProduceErrors int         `json:"produce_errors"`
	Outage        *demoOutage `json:"outage"`
	// Consumer is the consumer's own counters, for comparison: the
	// accounting above does not rely on them (except for skips).
	Consumer consumerCounts `json:"consumer"`
	// SettleTimedOut is set when the consumer did not settle every record
	// within --drain-timeout.
	SettleTimedOut bool         `json:"settle_timed_out,omitempty"`
	ByKind         []kindResult `json:"by_kind"`
	Format         string       `json:"format"`             // json or avro
	Cluster        string       `json:"cluster"`            // kfake or kafka
	Registry       string       `json:"registry,omitempty"` // the schema registry's URL, with avro
	Brokers        []string     `json:"brokers"`
	Topic          string       `json:"topic"`
	DLQTopic       string       `json:"dlq_topic"`
	Group          string       `json:"group"`
	DurationMS     int64        `json:"duration_ms"`
	Inspect        string       `json:"inspect"`
	// OrderViolations, with --retry-topics, counts events of an order
	// processed after a later event of the same order. Always 0.
	OrderViolations *int `json:"order_violations,omitempty"`
	// RetryTopics is what the retry tiers did, with --retry-topics.
	RetryTopics *demoRetrySummary `json:"retry_topics,omitempty"`
}

type demoOutage struct {
	Dependency string `json:"dependency"`
	DurationMS int64  `json:"duration_ms"`
	// FailedCalls counts handler calls (the database), or decodes (the
	// registry), that failed because it was down.
	FailedCalls int64 `json:"failed_calls"`
	// RegistryRequests counts the requests the consumer sent the registry
	// while it was down. Only for the registry.
	RegistryRequests *int64 `json:"registry_requests,omitempty"`
	// RecordsWaited counts records produced before it came back that were
	// processed only after it went down: they waited in their paused
	// partitions.
	RecordsWaited int `json:"records_waited"`
	// DeadLettered counts dead letters caused by it. Always 0.
	DeadLettered int `json:"dead_lettered"`
	// RecoveredMS is the time from its return to the first successful call.
	RecoveredMS int64 `json:"recovered_ms"`
}

// kindResult says what happened to the records of one demo kind.
type kindResult struct {
	Kind     string         `json:"kind"`
	Label    string         `json:"-"`
	Records  int            `json:"records"`
	Outcomes map[string]int `json:"outcomes"`
}

type consumerCounts struct {
	Consumed     uint64 `json:"consumed"`
	Processed    uint64 `json:"processed"`
	DeadLettered uint64 `json:"dead_lettered"`
	Skipped      uint64 `json:"skipped"`
	Retried      uint64 `json:"retried"`
	Forwarded    uint64 `json:"forwarded,omitempty"`
	Parked       uint64 `json:"parked,omitempty"`
}

// deadLetter is what the summary needs of one dead letter.
type deadLetter struct {
	key     recKey
	failure *deadletter.Failure
}

// readDeadLetters reads topic from start to its current end. A missing
// topic has no dead letters.
func readDeadLetters(ctx context.Context, brokers []string, timeout time.Duration, topic string) ([]deadLetter, error) {
	cl, err := cli.DialCluster(ctx, brokers, timeout)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var out []deadLetter
	err = deadletter.Scan(mctx, cl, deadletter.ScanConfig{Topic: topic}, func(r *kgo.Record) error {
		f, err := deadletter.ParseHeaders(deadletter.RecordOf(r).Headers)
		if err != nil {
			f = &deadletter.Failure{Stage: "unreadable", Reason: deadletter.Reason(err.Error()), Partition: -1, Offset: r.Offset}
		}
		out = append(out, deadLetter{key: recKey{f.Partition, f.Offset}, failure: f})
		return nil
	})
	switch {
	case errors.Is(err, deadletter.ErrUnknownTopic):
		return nil, nil
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		return nil, fmt.Errorf("dead-letter topic %s: %w", topic, err)
	}
	return out, nil
}

// firstLetter returns "PARTITION:OFFSET" of the first dead letter of
// topic, for dlq show, or "" when there is none or it cannot be read.
func firstLetter(ctx context.Context, brokers []string, timeout time.Duration, topic string) string {
	cl, err := cli.DialCluster(ctx, brokers, timeout)
	if err != nil {
		return ""
	}
	defer cl.Close()
	mctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	starts, ends, err := deadletter.Bounds(mctx, cl, topic)
	if err != nil {
		return ""
	}
	for p := int32(0); p < int32(len(ends)); p++ {
		if ends[p] > starts[p] {
			return fmt.Sprintf("%d:%d", p, starts[p])
		}
	}
	return ""
}

// summarize accounts for every produced record, from what the handler
// completed and what the dead-letter topic holds. The consumer's own
// counters only supply the skipped count (a skip leaves no other trace).
func (r *demoRun) summarize(st consumer.Stats, dead []deadLetter, elapsed time.Duration) *demoSummary {
	l := r.ledger
	l.mu.Lock()
	defer l.mu.Unlock()
	s := &demoSummary{
		Produced:       len(l.produced),
		DeadLetteredBy: map[string]int{},
		Skipped:        int(st.Skipped),
		Consumer: consumerCounts{
			Consumed: st.Consumed, Processed: st.Processed, DeadLettered: st.DeadLettered,
			Skipped: st.Skipped, Retried: st.Retried, Forwarded: st.Forwarded, Parked: st.Parked,
		},
		ProduceErrors: l.produceErrs,
		Format:        r.opts.format.String(),
		Cluster:       r.cluster,
		Brokers:       r.brokers,
		Topic:         r.topic,
		DLQTopic:      r.dlq,
		Group:         r.group,
		DurationMS:    elapsed.Milliseconds(),
		Inspect:       r.inspectCommand(),
	}
	dlq := make(map[recKey]*deadletter.Failure, len(dead))
	outageDead := 0
	for _, d := range dead {
		if d.failure.Topic != r.topic {
			continue
		}
		if _, dup := dlq[d.key]; dup {
			s.Duplicates++
			continue
		}
		dlq[d.key] = d.failure
		if strings.Contains(d.failure.Message, r.dep.name) {
			outageDead++
		}
	}

	byKind := make([]map[string]int, numDemoKinds)
	count := make([]int, numDemoKinds)
	unsettled := 0
	for k, kind := range l.produced {
		if byKind[kind] == nil {
			byKind[kind] = map[string]int{}
		}
		count[kind]++
		attempts, ok := l.processed[k]
		f := dlq[k]
		switch {
		case ok && f != nil:
			s.Duplicates++
			s.Processed++
			byKind[kind]["processed-and-dead-lettered"]++
		case ok:
			s.Processed++
			if tier := r.retryTier(k); tier > 0 && tier <= len(retryTiers) {
				byKind[kind]["processed-from-tier/"+consumer.DelayName(retryTiers[tier-1])]++
			} else if attempts > 1 && r.retry != nil {
				byKind[kind]["processed-in-place"]++
			} else if attempts > 1 {
				byKind[kind]["processed-after-retry"]++
			} else {
				byKind[kind]["processed"]++
			}
		case f != nil:
			s.DeadLettered++
			s.DeadLetteredBy[string(f.Stage)+"/"+string(f.Reason)]++
			byKind[kind]["dead-lettered/"+string(f.Stage)+"/"+string(f.Reason)+"/"+f.ErrorType]++
		case skippedKind(kind):
			// A skip leaves no trace but the consumer's Skipped counter:
			// the lost count checks the two agree.
			unsettled++
			byKind[kind]["skipped"]++
		default:
			unsettled++
			byKind[kind]["unsettled"]++
		}
	}
	s.Lost = unsettled - s.Skipped
	for k := range numDemoKinds {
		if count[k] == 0 {
			continue
		}
		label := demoKindInfo[k].label
		if l, ok := retryKindLabels[k]; ok && r.retry != nil {
			label = l
		}
		s.ByKind = append(s.ByKind, kindResult{Kind: k.String(), Label: label, Records: count[k], Outcomes: byKind[k]})
	}

	if r.avro != nil {
		s.Registry = r.avro.sreg.URL()
	}
	if start, end, recovered := r.dep.times(); !start.IsZero() {
		o := &demoOutage{
			Dependency:    r.dep.name,
			FailedCalls:   r.dep.failures.Load(),
			RecordsWaited: l.delayed,
			DeadLettered:  outageDead,
		}
		if !end.IsZero() {
			o.DurationMS = end.Sub(start).Milliseconds()
		}
		if !recovered.IsZero() {
			o.RecoveredMS = recovered.Sub(end).Milliseconds()
		}
		if r.avro != nil {
			n := r.avro.outageRequests()
			o.RegistryRequests = &n
		}
		s.Outage = o
	}
	return s
}

func (r *demoRun) printSummary(s *demoSummary) {
	w := r.out
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "WHAT WAS PRODUCED\tRECORDS\tWHAT HAPPENED TO THEM")
	for _, k := range s.ByKind {
		outs := make([]string, 0, len(k.Outcomes))
		for o := range k.Outcomes {
			outs = append(outs, o)
		}
		slices.SortFunc(outs, func(a, b string) int { return k.Outcomes[b] - k.Outcomes[a] })
		for i, o := range outs {
			if i == 0 {
				fmt.Fprintf(tw, "%s\t%d\t%d %s\n", k.Label, k.Records, k.Outcomes[o], outcomeText(o))
			} else {
				fmt.Fprintf(tw, "\t\t%d %s\n", k.Outcomes[o], outcomeText(o))
			}
		}
	}
	_ = tw.Flush()

	fmt.Fprintln(w)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	row := func(name string, n int, note string) { fmt.Fprintf(tw, "  %s\t%d\t  %s\n", name, n, note) }
	fmt.Fprintln(w, "ACCOUNTING (from what the handler completed and what the dead-letter topic holds)")
	row("produced", s.Produced, "")
	row("processed", s.Processed, "")
	by := make([]string, 0, len(s.DeadLetteredBy))
	for k, n := range s.DeadLetteredBy {
		by = append(by, fmt.Sprintf("%s %d", k, n))
	}
	slices.Sort(by)
	row("dead-lettered", s.DeadLettered, strings.Join(by, ", "))
	skipNote := ""
	if s.Skipped > 0 {
		skipNote = "by consumer.Config.SkipIf (avro.IsUnknownType): the consumer's Skipped counter, checked against the refunds produced"
	}
	row("skipped", s.Skipped, skipNote)
	lostNote := "produced - processed - dead-lettered - skipped"
	if s.Lost == 0 {
		lostNote = "nothing lost: " + lostNote
	}
	row("lost", s.Lost, lostNote)
	if s.Duplicates > 0 {
		row("duplicates", s.Duplicates, "records settled twice")
	}
	if s.ProduceErrors > 0 {
		row("produce errors", s.ProduceErrors, "records the producer could not write (not counted)")
	}
	_ = tw.Flush()

	printRetry(r, s)

	if o := s.Outage; o != nil {
		fmt.Fprintln(w)
		fmt.Fprintf(w, "OUTAGE (the %s was down for %.1fs)\n", o.Dependency, float64(o.DurationMS)/1000)
		tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		d := r.dep
		row("records that waited", o.RecordsWaited, d.waited)
		row(d.failed, int(o.FailedCalls), d.failedNote)
		if o.RegistryRequests != nil {
			row("registry requests", int(*o.RegistryRequests), fmt.Sprintf("the circuit breaker let one probe through every %v: no busy loop", registryProbe))
		}
		row("dead-lettered by it", o.DeadLettered, "a transient failure is retried, not dead-lettered")
		if o.RecoveredMS > 0 || o.FailedCalls > 0 {
			fmt.Fprintf(tw, "  recovered in\t%.2fs\t  after the %s came back\n", float64(o.RecoveredMS)/1000, d.short)
		}
		_ = tw.Flush()
	}

	fmt.Fprintln(w)
	if r.cluster == "kfake" && !r.opts.keep {
		fmt.Fprintf(w, "Done in %.1fs. The in-process cluster stops with the demo; to keep it up and inspect the dead letters:\n  %s\n", float64(s.DurationMS)/1000, s.Inspect)
		return
	}
	if r.cluster == "kfake" {
		// --keep: the commands to try follow.
		fmt.Fprintf(w, "Done in %.1fs.\n", float64(s.DurationMS)/1000)
		return
	}
	fmt.Fprintf(w, "Done in %.1fs. Inspect the dead letters:\n  %s\n", float64(s.DurationMS)/1000, s.Inspect)
}

// inspectCommand is the command that shows the dead letters: dlq ls on a
// cluster that stays up, else the demo again with --keep.
func (r *demoRun) inspectCommand() string {
	if r.cluster == "kfake" && !r.opts.keep {
		return cli.SelfCommand() + " demo --keep"
	}
	return fmt.Sprintf("%s dlq ls --brokers %s --topic %s", cli.SelfCommand(), strings.Join(r.brokers, ","), r.dlq)
}

// outcomeText is the table's wording of an outcome key of [kindResult].
func outcomeText(o string) string {
	switch o {
	case "processed-after-retry":
		return "processed after retrying"
	case "processed-in-place":
		return "processed on a quick try in place"
	case "processed-and-dead-lettered":
		return "processed AND dead-lettered (a bug)"
	case "unsettled":
		return "not settled (lost or skipped)"
	case "skipped":
		return "skipped: no Go type for them (consumer.Config.SkipIf)"
	}
	if rest, ok := strings.CutPrefix(o, "processed-from-tier/"); ok {
		return "processed from the " + rest + " tier"
	}
	if rest, ok := strings.CutPrefix(o, "dead-lettered/"); ok {
		return "dead-lettered: " + strings.ReplaceAll(rest, "/", ", ")
	}
	return o
}

// retryTier is the tier a processed record came from, 0 if none (or
// without --retry-topics).
func (r *demoRun) retryTier(k recKey) int {
	if r.retry == nil {
		return 0
	}
	r.retry.mu.Lock()
	defer r.retry.mu.Unlock()
	return r.retry.tierOf[k]
}
