package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/deadletter"
)

// envDLQTopic is the fallback of the dlq commands' --topic flag.
const envDLQTopic = "ANTIDOTE_DLQ_TOPIC"

func newDLQCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "dlq",
		Short: "Inspect and redrive dead-letter topics",
		Long: `Inspect and repair a dead-letter topic on any cluster.

The readers understand Antidote's dead letters and those of Spring Kafka
(kafka_dlt-*), Kafka Connect (__connect.errors.*), Kafka Streams
(__streams.errors.*) and share groups (__dlq.errors.*). Every command reads
the topic from its start up to the end offsets it finds, then stops.

Filters (ls, stats, redrive): --original-topic, --stage, --class, --reason
(text in the reason, error type or message, any case), --since and --until
(on the dead letter's timestamp: RFC 3339, or a duration ago such as 90m, 2h, 7d).`,
		Example: `  antidote dlq ls --topic orders.dlq
  antidote dlq ls --topic orders.dlq --stage deserialize-value --since 1h
  antidote dlq show --topic orders.dlq 0:17
  antidote dlq stats --topic orders.dlq -o json
  antidote dlq redrive --topic orders.dlq --dry-run
  antidote dlq redrive --topic orders.dlq --reason timeout --rate 50`,
		Args: cobra.ArbitraryArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newDLQLsCmd(), newDLQShowCmd(), newDLQStatsCmd(), newDLQRedriveCmd())
	return cmd
}

// dlqFlags are the flags shared by the dlq commands.
type dlqFlags struct {
	topic                               string
	originalTopic, stage, class, reason string
	since, until                        string
}

func (f *dlqFlags) addTopic(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.topic, "topic", "", "the dead-letter topic (required; env "+envDLQTopic+")")
}

func (f *dlqFlags) addFilters(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.originalTopic, "original-topic", "", "only letters from this original topic")
	fs.StringVar(&f.stage, "stage", "", "only letters of this stage (deserialize-key, deserialize-value, process; Connect: VALUE_CONVERTER, ...)")
	fs.StringVar(&f.class, "class", "", "only letters of this failure class (permanent, transient, unclassified)")
	fs.StringVar(&f.reason, "reason", "", "only letters whose reason, error type or message contains this text")
	fs.StringVar(&f.since, "since", "", "only letters dead-lettered at or after this time (RFC 3339, or a duration ago: 90m, 2h, 7d)")
	fs.StringVar(&f.until, "until", "", "only letters dead-lettered before this time (RFC 3339, or a duration ago)")
}

// resolveTopic applies the environment fallback and requires a topic.
func (f *dlqFlags) resolveTopic() error {
	if f.topic == "" {
		f.topic = strings.TrimSpace(os.Getenv(envDLQTopic))
	}
	if f.topic == "" {
		return usagef("--topic is required: the dead-letter topic to read (or set %s)", envDLQTopic)
	}
	return nil
}

// filter returns the filter the flags describe.
func (f *dlqFlags) filter(now time.Time) (deadletter.Filter, error) {
	since, err := parseWhen("since", f.since, now)
	if err != nil {
		return deadletter.Filter{}, err
	}
	until, err := parseWhen("until", f.until, now)
	if err != nil {
		return deadletter.Filter{}, err
	}
	if !since.IsZero() && !until.IsZero() && !since.Before(until) {
		return deadletter.Filter{}, usagef("--since %s is not before --until %s", f.since, f.until)
	}
	return deadletter.Filter{
		OriginalTopic: f.originalTopic, Stage: f.stage, Class: f.class, Reason: f.reason,
		Since: since, Until: until,
	}, nil
}

// parseWhen reads an RFC 3339 time, or a duration before now ("90m",
// "2h", "7d").
func parseWhen(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	return time.Time{}, usagef("--%s %q: want an RFC 3339 time (2026-03-14T15:00:00Z) or a duration ago (90m, 2h, 7d)", flag, s)
}

// dlqSession is a connection to the cluster of a dlq command.
type dlqSession struct {
	g     globals
	cl    *kgo.Client
	topic string
	idle  time.Duration
}

// openDLQ connects within --timeout and checks that the topic exists.
func openDLQ(ctx context.Context, cmd *cobra.Command, topic string) (*dlqSession, error) {
	g := readGlobals(cmd)
	cl, err := dialCluster(ctx, g.brokers, g.timeout, kgo.FetchMaxWait(500*time.Millisecond))
	if err != nil {
		return nil, err
	}
	s := &dlqSession{g: g, cl: cl, topic: topic, idle: min(max(g.timeout, 2*time.Second), 10*time.Second)}
	mctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if _, _, err := deadletter.Bounds(mctx, cl, topic); err != nil {
		cl.Close()
		return nil, s.explain(ctx, err)
	}
	return s, nil
}

func (s *dlqSession) close() { s.cl.Close() }

// explain turns library errors into the command's one-line errors.
func (s *dlqSession) explain(ctx context.Context, err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, deadletter.ErrUnknownTopic):
		return fmt.Errorf("topic %q does not exist", s.topic)
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return unreachable(s.g.brokers, s.g.timeout, err)
	}
	return errors.New(strings.ReplaceAll(err.Error(), "deadletter: ", ""))
}

// scan reads the selected letters of the topic, in offset order per
// partition.
func (s *dlqSession) scan(ctx context.Context, cfg deadletter.ScanConfig, fn func(*deadletter.Letter, error) error) error {
	cfg.Topic = s.topic
	cfg.IdleTimeout = s.idle
	err := deadletter.Scan(ctx, s.cl, cfg, func(r *kgo.Record) error {
		l, err := deadletter.ParseRecord(r)
		return fn(l, err)
	})
	return s.explain(ctx, err)
}

// letters reads every letter the filter selects.
// load connects to the cluster and reads the letters the flags select, as of
// now. The caller closes the session.
func (f *dlqFlags) load(cmd *cobra.Command, now time.Time) (*dlqSession, []dlqEntry, error) {
	if err := f.resolveTopic(); err != nil {
		return nil, nil, err
	}
	flt, err := f.filter(now)
	if err != nil {
		return nil, nil, err
	}
	s, err := openDLQ(cmd.Context(), cmd, f.topic)
	if err != nil {
		return nil, nil, err
	}
	es, err := s.letters(cmd.Context(), flt)
	if err != nil {
		s.close()
		return nil, nil, err
	}
	return s, es, nil
}

func (s *dlqSession) letters(ctx context.Context, f deadletter.Filter) ([]dlqEntry, error) {
	var out []dlqEntry
	err := s.scan(ctx, deadletter.ScanConfig{}, func(l *deadletter.Letter, err error) error {
		if f.IsZero() || (l.Dialect != deadletter.DialectUnknown && f.Match(l)) {
			out = append(out, dlqEntry{l, err})
		}
		return nil
	})
	return out, err
}

// dlqEntry is a letter and its parse error, if any.
type dlqEntry struct {
	l   *deadletter.Letter
	err error
}

func newDLQLsCmd() *cobra.Command {
	var f dlqFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the dead letters of a topic",
		Long: `List the dead letters of a topic: where each is, its dialect, the original
record's topic, partition and offset, the stage and class of the failure, the
error, and its age. Malformed failure headers are noted in the REASON column
(and in "error" with -o json).`,
		Example: `  antidote dlq ls --topic orders.dlq
  antidote dlq ls --topic orders.dlq --original-topic orders --class permanent -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			now := time.Now()
			s, es, err := f.load(cmd, now)
			if err != nil {
				return err
			}
			defer s.close()
			if s.g.json() {
				return writeDLQJSON(cmd.OutOrStdout(), dlqListJSON(es))
			}
			return printDLQList(cmd.OutOrStdout(), es, now)
		},
	}
	f.addTopic(cmd)
	f.addFilters(cmd)
	return cmd
}

func newDLQShowCmd() *cobra.Command {
	var (
		f         dlqFlags
		partition int32
		offset    int64
		as        string
	)
	cmd := &cobra.Command{
		Use:   "show [PARTITION:OFFSET]",
		Short: "Show one dead letter, every header decoded",
		Long: `Show one dead letter: its failure, every header decoded (Spring's binary
ints as numbers), and the key and value as text when they are printable
UTF-8, as JSON when they are JSON, else as a hex dump (--as forces one).`,
		Example: `  antidote dlq show --topic orders.dlq 0:17
  antidote dlq show --topic orders.dlq --partition 0 --offset 17 --as hex`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.resolveTopic(); err != nil {
				return err
			}
			fs := cmd.Flags()
			if len(args) == 1 {
				if fs.Changed("partition") || fs.Changed("offset") {
					return usagef("give the record as PARTITION:OFFSET or with --partition and --offset, not both")
				}
				p, o, ok := strings.Cut(args[0], ":")
				pn, perr := strconv.ParseInt(p, 10, 32)
				on, oerr := strconv.ParseInt(o, 10, 64)
				if !ok || perr != nil || oerr != nil || pn < 0 || on < 0 {
					return usagef("%q: want PARTITION:OFFSET, such as 0:17", args[0])
				}
				partition, offset = int32(pn), on
			} else if !fs.Changed("partition") || !fs.Changed("offset") {
				return usagef("which record? give PARTITION:OFFSET (such as 0:17), or --partition and --offset")
			}
			if partition < 0 || offset < 0 {
				return usagef("--partition and --offset must not be negative")
			}
			switch as {
			case "auto", "text", "json", "hex":
			default:
				return usagef("--as %q: must be auto, text, json or hex", as)
			}
			ctx := cmd.Context()
			s, err := openDLQ(ctx, cmd, f.topic)
			if err != nil {
				return err
			}
			defer s.close()
			e, err := s.one(ctx, partition, offset)
			if err != nil {
				return err
			}
			if s.g.json() {
				return writeDLQJSON(cmd.OutOrStdout(), dlqShowJSON(e, as))
			}
			return printDLQShow(cmd.OutOrStdout(), e, as, time.Now())
		},
	}
	f.addTopic(cmd)
	cmd.Flags().Int32Var(&partition, "partition", 0, "partition of the dead letter")
	cmd.Flags().Int64Var(&offset, "offset", 0, "offset of the dead letter")
	cmd.Flags().StringVar(&as, "as", "auto", "show key and value as auto, text, json or hex")
	return cmd
}

// one reads the record at partition:offset.
func (s *dlqSession) one(ctx context.Context, partition int32, offset int64) (dlqEntry, error) {
	mctx, cancel := context.WithTimeout(ctx, s.g.timeout)
	starts, ends, err := deadletter.Bounds(mctx, s.cl, s.topic)
	cancel()
	if err != nil {
		return dlqEntry{}, s.explain(ctx, err)
	}
	end, ok := ends[partition]
	switch {
	case !ok:
		return dlqEntry{}, fmt.Errorf("topic %q has no partition %d (it has %d)", s.topic, partition, len(ends))
	case offset < starts[partition]:
		return dlqEntry{}, fmt.Errorf("no record at %d:%d: the log of partition %d starts at offset %d", partition, offset, partition, starts[partition])
	case offset >= end:
		return dlqEntry{}, fmt.Errorf("no record at %d:%d: partition %d ends before offset %d", partition, offset, partition, end)
	}
	var e *dlqEntry
	err = s.scan(ctx, deadletter.ScanConfig{Partitions: []int32{partition}, From: map[int32]int64{partition: offset}},
		func(l *deadletter.Letter, err error) error {
			e = &dlqEntry{l, err}
			return deadletter.ErrStop
		})
	if err != nil {
		return dlqEntry{}, err
	}
	if e == nil || e.l.Record.Offset != offset {
		return dlqEntry{}, fmt.Errorf("no record at %d:%d (compacted away, or a transaction marker)", partition, offset)
	}
	return *e, nil
}

func newDLQStatsCmd() *cobra.Command {
	var f dlqFlags
	cmd := &cobra.Command{
		Use:   "stats",
		Short: "Count the dead letters by dialect, reason, stage, class, error and original topic",
		Example: `  antidote dlq stats --topic orders.dlq
  antidote dlq stats --topic orders.dlq --since 24h -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, es, err := f.load(cmd, time.Now())
			if err != nil {
				return err
			}
			defer s.close()
			st := countDLQ(f.topic, es)
			if s.g.json() {
				return writeDLQJSON(cmd.OutOrStdout(), st)
			}
			return printDLQStats(cmd.OutOrStdout(), st)
		},
	}
	f.addTopic(cmd)
	f.addFilters(cmd)
	return cmd
}

func newDLQRedriveCmd() *cobra.Command {
	var (
		f   dlqFlags
		cfg deadletter.RedriveConfig
	)
	cmd := &cobra.Command{
		Use:   "redrive",
		Short: "Re-produce dead letters to their original topic",
		Long: `Re-produce the original record of every selected dead letter (key, value
and original headers, byte for byte) to its original topic, or to --to.

Each redriven record carries two more headers: antidote.redrive.count (how many
times it was redriven) and antidote.redrive.from (topic/partition/offset of the
dead letter). A record already redriven --max-redrives times is refused, which
breaks loops. Records that cannot be redriven (malformed headers, no original
topic) are refused too, and listed.

The redrive is resumable: progress is committed as the offsets of a consumer
group on the dead-letter topic, record by record after each re-produce is
acknowledged. Run an interrupted redrive again (the same command line) and it
continues where it stopped, neither repeating nor skipping a record. The group
is antidote-redrive-<topic>, with a hash of --to and the filters when given,
or --group.`,
		Example: `  antidote dlq redrive --topic orders.dlq --dry-run
  antidote dlq redrive --topic orders.dlq --stage process --rate 100
  antidote dlq redrive --topic orders.dlq --to orders-replay --max-redrives 5`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolveTopic(); err != nil {
				return err
			}
			flt, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			cfg.Topic, cfg.Filter = f.topic, flt
			switch {
			case cfg.MaxRedrives == 0 || cfg.MaxRedrives < -1:
				return usagef("--max-redrives %d: must be at least 1 (or -1: no limit)", cfg.MaxRedrives)
			case cfg.Rate < 0:
				return usagef("--rate %v: must not be negative", cfg.Rate)
			case cfg.Limit < 0:
				return usagef("--limit %d: must not be negative", cfg.Limit)
			}
			if err := cfg.Validate(); err != nil {
				return usageError{errors.New(strings.ReplaceAll(err.Error(), "deadletter: redrive: ", ""))}
			}
			ctx := cmd.Context()
			s, err := openDLQ(ctx, cmd, f.topic)
			if err != nil {
				return err
			}
			defer s.close()
			return s.redrive(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), cfg)
		},
	}
	f.addTopic(cmd)
	f.addFilters(cmd)
	fs := cmd.Flags()
	fs.StringVar(&cfg.To, "to", "", "produce every record to this topic instead of its original topic")
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "decide and report, but produce and commit nothing")
	fs.Float64Var(&cfg.Rate, "rate", 0, "at most this many records per second (0: no limit)")
	fs.IntVar(&cfg.MaxRedrives, "max-redrives", deadletter.DefaultMaxRedrives, "refuse records already redriven this many times (-1: no limit)")
	fs.StringVar(&cfg.Group, "group", "", "consumer group holding the progress (default antidote-redrive-<topic>[-<hash of --to and filters>])")
	fs.IntVar(&cfg.Limit, "limit", 0, "stop after redriving this many records (0: no limit); run again to continue")
	return cmd
}

func (s *dlqSession) redrive(ctx context.Context, stdout, stderr io.Writer, cfg deadletter.RedriveConfig) error {
	cfg.IdleTimeout = s.idle
	disp := newLive(stderr, true)
	verb := "redriven"
	if cfg.DryRun {
		verb = "would redrive"
	}
	line := func(r deadletter.RedriveResult) string {
		return fmt.Sprintf("redrive %s: %d/%d read · %d %s · %d refused · %d skipped",
			s.topic, r.Scanned, r.Remaining, r.Redriven, verb, r.Refused, r.Skipped)
	}
	cfg.Progress = func(r deadletter.RedriveResult) { disp.status(line(r), false) }
	res, err := deadletter.Redrive(ctx, s.cl, cfg)
	disp.event(line(res))
	if res.Group == "" {
		// Failed before reading anything.
		return s.explain(ctx, err)
	}
	if perr := printRedrive(stdout, s.g.json(), s.topic, res); perr != nil && err == nil {
		err = perr
	}
	if err != nil {
		if ctx.Err() != nil {
			fmt.Fprintf(stderr, "redrive interrupted; progress is committed in group %s: run the same command again to continue\n", res.Group)
			return ctx.Err()
		}
		return s.explain(ctx, err)
	}
	return nil
}
