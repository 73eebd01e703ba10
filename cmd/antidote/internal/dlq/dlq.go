// Package dlq is antidote dlq: ls, show, stats, redrive and purge of
// dead-letter topics of every dialect.
package dlq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/deadletter"
)

// EnvTopic is the fallback of the dlq commands' --topic flag.
const EnvTopic = "ANTIDOTE_DLQ_TOPIC"

// NewCommand builds antidote dlq and its subcommands: ls, show, stats,
// redrive and purge of a dead-letter topic.
func NewCommand() *cobra.Command {
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
				return cli.UnknownCommand(cmd, args[0])
			}
			return cmd.Help()
		},
	}
	cmd.AddCommand(newDLQLsCmd(), newDLQShowCmd(), newDLQStatsCmd(), newDLQRedriveCmd(), newDLQPurgeCmd())
	return cmd
}

// dlqFlags are the flags shared by the dlq commands.
type dlqFlags struct {
	topic                               string
	originalTopic, stage, class, reason string
	since, until                        string
}

// Values of the enum filter flags, for help and completion.
var (
	dlqStages  = []string{"deserialize-key", "deserialize-value", "process", "KEY_CONVERTER", "VALUE_CONVERTER", "HEADER_CONVERTER", "TRANSFORMATION", "TASK_PUT", "TASK_POLL", "KAFKA_PRODUCE", "KAFKA_CONSUME"}
	dlqClasses = []string{"permanent", "transient", "unclassified"}
)

func (f *dlqFlags) addTopic(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.topic, "topic", "", "the dead-letter topic (required; env "+EnvTopic+", or the context's topic)")
	_ = cmd.RegisterFlagCompletionFunc("topic", cli.CompleteTopics)
}

func (f *dlqFlags) addFilters(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&f.originalTopic, "original-topic", "", "only letters from this original topic")
	fs.StringVar(&f.stage, "stage", "", "only letters of this stage (deserialize-key, deserialize-value, process; Connect: VALUE_CONVERTER, ...)")
	fs.StringVar(&f.class, "class", "", "only letters of this failure class (permanent, transient, unclassified)")
	fs.StringVar(&f.reason, "reason", "", "only letters whose reason, error type or message contains this text")
	fs.StringVar(&f.since, "since", "", "only letters dead-lettered at or after this time (RFC 3339, or a duration ago: 90m, 2h, 7d)")
	fs.StringVar(&f.until, "until", "", "only letters dead-lettered before this time (RFC 3339, or a duration ago)")
	_ = cmd.RegisterFlagCompletionFunc("stage", cobra.FixedCompletions(dlqStages, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("class", cobra.FixedCompletions(dlqClasses, cobra.ShellCompDirectiveNoFileComp))
	_ = cmd.RegisterFlagCompletionFunc("original-topic", cli.CompleteTopics)
}

// resolveTopic applies the environment fallback and requires a topic.
func (f *dlqFlags) resolveTopic(cmd *cobra.Command) error {
	if f.topic == "" {
		f.topic = strings.TrimSpace(os.Getenv(EnvTopic))
	}
	if f.topic == "" {
		f.topic = cli.ConnOf(cmd).Topic
	}

	if f.topic == "" {
		return cli.Usagef("--topic is required: the dead-letter topic to read (or set %s, or a topic in the --context)", EnvTopic)
	}
	return nil
}

// filter returns the filter the flags describe. A duration ago ("7d")
// stays relative (MaxAge, MinAge), so that a redrive's group does not
// change from run to run; the readers resolve it with At.
func (f *dlqFlags) filter(now time.Time) (deadletter.Filter, error) {
	if err := cli.CheckEnum("stage", f.stage, dlqStages); err != nil {
		return deadletter.Filter{}, err
	}
	if err := cli.CheckEnum("class", f.class, dlqClasses); err != nil {
		return deadletter.Filter{}, err
	}
	flt := deadletter.Filter{OriginalTopic: f.originalTopic, Stage: f.stage, Class: f.class, Reason: f.reason}
	var err error
	if flt.Since, flt.MaxAge, err = parseWhen("since", f.since); err != nil {
		return deadletter.Filter{}, err
	}
	if flt.Until, flt.MinAge, err = parseWhen("until", f.until); err != nil {
		return deadletter.Filter{}, err
	}
	if r := flt.At(now); !r.Since.IsZero() && !r.Until.IsZero() && !r.Since.Before(r.Until) {
		return deadletter.Filter{}, cli.Usagef("--since %s is not before --until %s", f.since, f.until)
	}
	return flt, nil
}

// parseWhen reads an RFC 3339 time, or a duration before now ("90m",
// "2h", "7d"): [deadletter.ParseWhen], as a usage error naming the flag.
func parseWhen(flag, s string) (time.Time, time.Duration, error) {
	at, ago, err := deadletter.ParseWhen(s)
	if err != nil {
		return time.Time{}, 0, cli.Usagef("--%s %s", flag, err)
	}
	return at, ago, nil
}

// dlqSession is a connection to the cluster of a dlq command.
type dlqSession struct {
	g        cli.Globals
	cl       *kgo.Client
	topic    string
	idle     time.Duration
	memLimit int64 // the memory limit to restore on close, or -1
}

// dlqMemoryLimit is the soft memory limit of the dlq commands when
// GOMEMLIMIT does not set one: with the bounded fetches, it keeps the
// resident size of a scan of any topic under 100 MB.
const dlqMemoryLimit = 64 << 20

// dlqReadOpts bound what a reading client buffers: a few MB of fetched
// records whatever the topic's size.
func dlqReadOpts() []kgo.Opt {
	return append(deadletter.ScanOpts(),
		kgo.FetchMaxWait(500*time.Millisecond),
		kgo.FetchMaxBytes(1<<20),
		kgo.FetchMaxPartitionBytes(512<<10),
	)
}

// openDLQ connects within --timeout and checks that the topic exists.
func openDLQ(ctx context.Context, cmd *cobra.Command, topic string, opts ...kgo.Opt) (*dlqSession, error) {
	g := cli.ReadGlobals(cmd)
	cl, err := g.Dial(ctx, append(dlqReadOpts(), opts...)...)
	if err != nil {
		return nil, err
	}
	s := &dlqSession{g: g, cl: cl, topic: topic, idle: max(g.Timeout, 10*time.Second), memLimit: -1}
	if os.Getenv("GOMEMLIMIT") == "" {
		s.memLimit = debug.SetMemoryLimit(dlqMemoryLimit)
	}
	mctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	if _, _, err := deadletter.Bounds(mctx, cl, topic); err != nil {
		err = s.explain(ctx, err)
		s.close()
		return nil, err
	}
	return s, nil
}

func (s *dlqSession) close() {
	s.cl.Close()
	if s.memLimit >= 0 {
		debug.SetMemoryLimit(s.memLimit)
	}
}

// explain turns library errors into the command's one-line errors.
func (s *dlqSession) explain(ctx context.Context, err error) error {
	var ute *deadletter.UnknownTargetError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &ute):
		n := "3"
		if _, ends, berr := deadletter.Bounds(ctx, s.cl, s.topic); berr == nil {
			n = strconv.Itoa(len(ends))
		}
		return fmt.Errorf("target topic %q does not exist: nothing was produced to it; create it first (kafka-topics.sh --bootstrap-server %s --create --topic %s --partitions %s), or redrive elsewhere with --to",
			ute.Topic, s.g.Brokers[0], ute.Topic, n)
	case errors.Is(err, deadletter.ErrUnknownTopic):
		return fmt.Errorf("topic %q does not exist", s.topic)
	case ctx.Err() != nil:
		return ctx.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return cli.Unreachable(s.g.Brokers, s.g.Timeout, err)
	}
	return errors.New(strings.ReplaceAll(err.Error(), "deadletter: ", ""))
}

// scan reads the letters of the topic, in offset order per partition.
func (s *dlqSession) scan(ctx context.Context, cfg deadletter.ScanConfig, fn func(*deadletter.Letter, error) error) error {
	cfg.Topic = s.topic
	cfg.IdleTimeout = s.idle
	err := deadletter.Scan(ctx, s.cl, cfg, func(r *kgo.Record) error {
		l, err := deadletter.ParseRecord(r)
		return fn(l, err)
	})
	return s.explain(ctx, err)
}

// dlqEntry is a letter and its parse error, if any.
type dlqEntry struct {
	l   *deadletter.Letter
	err error
}

// selects reports whether the filter selects e ([deadletter.Filter.Selects]).
func selects(f deadletter.Filter, e dlqEntry) bool { return f.Selects(e.l) }

// unreadable counts the records read and those that are no readable
// letter, to warn about a topic that is probably not a dead-letter topic.
type unreadable struct{ read, bad int }

func (u *unreadable) add(e dlqEntry) {
	u.read++
	if e.err != nil {
		u.bad++
	}
}

// warn prints the warning when every record read is unreadable.
func (u *unreadable) warn(w io.Writer, topic string) {
	if u.read > 0 && u.bad == u.read {
		fmt.Fprintf(w, "antidote: warning: none of the %d records read from %s is a readable dead letter (no or malformed failure headers): it is probably not a dead-letter topic\n", u.read, topic)
	}
}

// lsFlags are the flags of dlq ls.
type lsFlags struct {
	dlqFlags
	limit      int
	partitions []int32
	offsets    string
	key        string
	follow     bool
	noHeaders  bool
}

// scanConfig returns the range the flags select.
func (f *lsFlags) scanConfig(cmd *cobra.Command) (deadletter.ScanConfig, error) {
	cfg := deadletter.ScanConfig{Partitions: f.partitions, Follow: f.follow}
	for _, p := range f.partitions {
		if p < 0 {
			return cfg, cli.Usagef("--partition %d: must not be negative", p)
		}
	}
	if f.limit < 0 {
		return cfg, cli.Usagef("--limit %d: must not be negative", f.limit)
	}
	if f.offsets == "" {
		return cfg, nil
	}
	from, to, err := parseOffsets(f.offsets)
	if err != nil {
		return cfg, err
	}
	if !cmd.Flags().Changed("partition") {
		return cfg, cli.Usagef("--offset needs --partition: offsets are per partition")
	}
	cfg.From, cfg.To = map[int32]int64{}, map[int32]int64{}
	for _, p := range f.partitions {
		cfg.From[p] = from
		if to >= 0 {
			cfg.To[p] = to + 1
		}
	}
	return cfg, nil
}

// parseOffsets reads FROM or FROM-TO (TO inclusive; -1 for no TO).
func parseOffsets(s string) (from, to int64, err error) {
	a, b, ranged := strings.Cut(strings.TrimSpace(s), "-")
	from, ferr := strconv.ParseInt(a, 10, 64)
	to = -1
	var terr error
	if ranged {
		to, terr = strconv.ParseInt(b, 10, 64)
	}
	if ferr != nil || terr != nil || from < 0 || (ranged && to < from) {
		return 0, 0, cli.Usagef("--offset %q: want FROM or FROM-TO, offsets with FROM <= TO (such as 100 or 100-199)", s)
	}
	return from, to, nil
}

func newDLQLsCmd() *cobra.Command {
	var f lsFlags
	cmd := &cobra.Command{
		Use:   "ls",
		Short: "List the dead letters of a topic",
		Long: `List the dead letters of a topic as they are read: where each is, its
dialect, the original record's topic, partition and offset, the stage and class
of the failure, the error, how often it was redriven already, and its age.
Malformed failure headers are noted in the REASON column (and in "error" with
-o json). The list streams: the first letters show at once, whatever the size
of the topic.

-o json prints JSON Lines (one letter per line), -o yaml one YAML document per
letter, -o wide more columns.`,
		Example: `  antidote dlq ls --topic orders.dlq --limit 20
  antidote dlq ls --topic orders.dlq --original-topic orders --class permanent -o json
  antidote dlq ls --topic orders.dlq --partition 2 --offset 1200-1299
  antidote dlq ls --topic orders.dlq --follow`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolveTopic(cmd); err != nil {
				return err
			}
			now := time.Now()
			flt, err := f.filter(now)
			if err != nil {
				return err
			}
			flt = flt.At(now)
			cfg, err := f.scanConfig(cmd)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			s, err := openDLQ(ctx, cmd, f.topic)
			if err != nil {
				return err
			}
			defer s.close()
			out := newLetterSink(cmd.OutOrStdout(), s.g.Output, f.noHeaders, now)
			var u unreadable
			n := 0
			err = s.scan(ctx, cfg, func(l *deadletter.Letter, perr error) error {
				e := dlqEntry{l, perr}
				u.add(e)
				if !selects(flt, e) || (f.key != "" && string(l.Record.Key) != f.key) {
					return nil
				}
				if err := out.letter(e); err != nil {
					return err
				}
				if n++; f.limit > 0 && n >= f.limit {
					return deadletter.ErrStop
				}
				return nil
			})
			if cerr := out.close(n); err == nil {
				err = cerr
			}
			if f.follow && ctx.Err() != nil {
				err = nil // Ctrl-C is how --follow ends
			}
			u.warn(cmd.ErrOrStderr(), f.topic)
			return err
		},
	}
	f.addTopic(cmd)
	f.addFilters(cmd)
	fs := cmd.Flags()
	fs.IntVar(&f.limit, "limit", 0, "stop after this many letters (0: no limit)")
	fs.Int32SliceVar(&f.partitions, "partition", nil, "only these partitions (comma-separated or repeated)")
	fs.StringVar(&f.offsets, "offset", "", "only offsets FROM or FROM-TO (inclusive) of the --partition given")
	fs.StringVar(&f.key, "key", "", "only letters whose record key is this text")
	fs.BoolVarP(&f.follow, "follow", "f", false, "keep listing new letters as they arrive (Ctrl-C ends)")
	fs.BoolVar(&f.noHeaders, "no-headers", false, "leave out the header line of the table")
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
			if err := f.resolveTopic(cmd); err != nil {
				return err
			}
			fs := cmd.Flags()
			if len(args) == 1 {
				if fs.Changed("partition") || fs.Changed("offset") {
					return cli.Usagef("give the record as PARTITION:OFFSET or with --partition and --offset, not both")
				}
				p, o, ok := strings.Cut(args[0], ":")
				pn, perr := strconv.ParseInt(p, 10, 32)
				on, oerr := strconv.ParseInt(o, 10, 64)
				if !ok || perr != nil || oerr != nil || pn < 0 || on < 0 {
					return cli.Usagef("%q: want PARTITION:OFFSET, such as 0:17", args[0])
				}
				partition, offset = int32(pn), on
			} else if !fs.Changed("partition") || !fs.Changed("offset") {
				return cli.Usagef("which record? give PARTITION:OFFSET (such as 0:17), or --partition and --offset")
			}
			if partition < 0 || offset < 0 {
				return cli.Usagef("--partition and --offset must not be negative")
			}
			switch as {
			case "auto", "text", "json", "hex":
			default:
				return cli.Usagef("--as %q: must be auto, text, json or hex", as)
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
			switch s.g.Output {
			case "json":
				return writeDLQJSON(cmd.OutOrStdout(), dlqShowJSON(e, as))
			case "yaml":
				return writeDLQYAML(cmd.OutOrStdout(), dlqShowJSON(e, as))
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
	mctx, cancel := context.WithTimeout(ctx, s.g.Timeout)
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
	err = s.scan(ctx, deadletter.ScanConfig{Partitions: []int32{partition}, From: map[int32]int64{partition: offset}, To: map[int32]int64{partition: offset + 1}},
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
		Short: "Count the dead letters by dialect, reason, stage, class, error, original topic and redrives",
		Long: `Count the dead letters by dialect, reason, stage, class, error type, original
topic and redrive count. The counts are kept as the letters are read, so the
memory used does not grow with the topic; on a terminal a progress line on
stderr shows how far the read is.`,
		Example: `  antidote dlq stats --topic orders.dlq
  antidote dlq stats --topic orders.dlq --since 24h -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolveTopic(cmd); err != nil {
				return err
			}
			now := time.Now()
			flt, err := f.filter(now)
			if err != nil {
				return err
			}
			flt = flt.At(now)
			ctx := cmd.Context()
			s, err := openDLQ(ctx, cmd, f.topic)
			if err != nil {
				return err
			}
			defer s.close()
			st := newDLQStats(f.topic)
			var disp *cli.Live
			if cli.IsTerminal(cmd.ErrOrStderr()) {
				disp = cli.NewLive(cmd.ErrOrStderr(), true)
			}
			var due int64
			read := 0
			var u unreadable
			last := time.Now()
			err = s.scan(ctx, deadletter.ScanConfig{Started: func(n int64) { due = n }}, func(l *deadletter.Letter, perr error) error {
				e := dlqEntry{l, perr}
				u.add(e)
				if read++; disp != nil && read%1024 == 0 && time.Since(last) > 100*time.Millisecond {
					last = time.Now()
					disp.Status(fmt.Sprintf("stats %s: %d of %d read (%d%%)", f.topic, read, due, int64(read)*100/max(due, 1)), false)
				}
				if selects(flt, e) {
					st.add(e)
				}
				return nil
			})
			disp.Clear()
			if err != nil {
				return err
			}
			u.warn(cmd.ErrOrStderr(), f.topic)
			st.finish()
			switch s.g.Output {
			case "json":
				return writeDLQJSON(cmd.OutOrStdout(), st)
			case "yaml":
				return writeDLQYAML(cmd.OutOrStdout(), st)
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

Each record goes back to the partition it came from when the target topic has
it (--partitioner original, the default), so that the consumers of the original
topic see a key's records in order whatever client produced them (librdkafka,
kcat and Python hash keys with CRC32, Java and franz-go with murmur2). A letter
whose partition the target does not have, or does not name, goes by murmur2 of
its key; --partitioner murmur2 sends every record by its key.

Each redriven record carries two more headers: antidote.redrive.count (how many
times it was redriven) and antidote.redrive.from (topic/partition/offset of the
dead letter). A record already redriven --max-redrives times is refused, which
breaks loops. Records that cannot be redriven (malformed headers, no original
topic) are refused too, and listed. Every target topic is checked before the
first record goes to it.

The redrive is resumable: records are produced in pipelined batches, and the
progress is committed as the offsets of a consumer group on the dead-letter
topic once a batch is acknowledged. Run an interrupted redrive again (the same
command line, also with a relative --since such as 7d) and it continues where
it stopped. A crash repeats at most the batch in flight; with --exactly-once,
each batch and its progress are one Kafka transaction, and a crash repeats
nothing for consumers that read with isolation.level=read_committed. The group
is antidote-redrive-<topic>, with a hash of --to and the filters when given, or
--group.`,
		Example: `  antidote dlq redrive --topic orders.dlq --dry-run
  antidote dlq redrive --topic orders.dlq --stage process --since 7d --rate 100
  antidote dlq redrive --topic orders.dlq --exactly-once
  antidote dlq redrive --topic orders.dlq --to orders-replay --max-redrives 5
  antidote dlq redrive --topic orders.dlq --partitioner murmur2`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolveTopic(cmd); err != nil {
				return err
			}
			flt, err := f.filter(time.Now())
			if err != nil {
				return err
			}
			cfg.Topic, cfg.Filter = f.topic, flt
			switch {
			case cfg.MaxRedrives == 0 || cfg.MaxRedrives < -1:
				return cli.Usagef("--max-redrives %d: must be at least 1 (or -1: no limit)", cfg.MaxRedrives)
			case cfg.Rate < 0:
				return cli.Usagef("--rate %v: must not be negative", cfg.Rate)
			case cfg.Limit < 0:
				return cli.Usagef("--limit %d: must not be negative", cfg.Limit)
			case cfg.BatchRecords < 1:
				return cli.Usagef("--batch %d: must be at least 1", cfg.BatchRecords)
			case cfg.Partitioning != deadletter.PartitionOriginal && cfg.Partitioning != deadletter.PartitionMurmur2:
				return cli.Usagef("--partitioner %q: want original or murmur2", cfg.Partitioning)
			}
			if err := cfg.Validate(); err != nil {
				return cli.Usage(errors.New(strings.ReplaceAll(err.Error(), "deadletter: redrive: ", "")))
			}
			if cfg.Group == "" {
				cfg.Group = cfg.DefaultGroup()
			}
			var opts []kgo.Opt
			if cfg.ExactlyOnce {
				opts = deadletter.RedriveTxnOpts(cfg.Group)
			}
			ctx := cmd.Context()
			s, err := openDLQ(ctx, cmd, f.topic, opts...)
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
	fs.StringVar((*string)(&cfg.Partitioning), "partitioner", string(deadletter.PartitionOriginal), "original: each record to its original partition when the target has it, else by key; murmur2: by key")
	_ = cmd.RegisterFlagCompletionFunc("partitioner", cobra.FixedCompletions([]string{string(deadletter.PartitionOriginal), string(deadletter.PartitionMurmur2)}, cobra.ShellCompDirectiveNoFileComp))
	fs.BoolVar(&cfg.DryRun, "dry-run", false, "decide and report, but produce and commit nothing")
	fs.BoolVar(&cfg.ExactlyOnce, "exactly-once", false, "produce each batch and commit its progress in one Kafka transaction")
	fs.Float64Var(&cfg.Rate, "rate", 0, "at most this many records per second (0: no limit)")
	fs.IntVar(&cfg.BatchRecords, "batch", deadletter.DefaultBatchRecords, "records produced before their acknowledgements and progress are awaited")
	fs.IntVar(&cfg.MaxRedrives, "max-redrives", deadletter.DefaultMaxRedrives, "refuse records already redriven this many times (-1: no limit)")
	fs.StringVar(&cfg.Group, "group", "", "consumer group holding the progress (default antidote-redrive-<topic>[-<hash of --to and filters>])")
	fs.IntVar(&cfg.Limit, "limit", 0, "stop after redriving this many records (0: no limit); run again to continue")
	_ = cmd.RegisterFlagCompletionFunc("to", cli.CompleteTopics)
	return cmd
}

func (s *dlqSession) redrive(ctx context.Context, stdout, stderr io.Writer, cfg deadletter.RedriveConfig) error {
	cfg.IdleTimeout = s.idle
	disp := cli.NewLive(stderr, true)
	verb := "redriven"
	if cfg.DryRun {
		verb = "would redrive"
	}
	line := func(r deadletter.RedriveResult) string {
		return fmt.Sprintf("redrive %s: %d/%d read · %d %s · %d refused · %d skipped",
			s.topic, r.Scanned, r.Remaining, r.Redriven, verb, r.Refused, r.Skipped)
	}
	last := time.Time{}
	cfg.Progress = func(r deadletter.RedriveResult) {
		if time.Since(last) >= 100*time.Millisecond {
			last = time.Now()
			disp.Status(line(r), false)
		}
	}
	res, err := deadletter.Redrive(ctx, s.cl, cfg)
	if err != nil && res.Scanned == 0 && ctx.Err() == nil {
		// Failed before reading anything.
		disp.Clear()
		return s.explain(ctx, err)
	}
	disp.Event(line(res))
	if perr := printRedrive(stdout, s.g.Output, s.topic, res); perr != nil && err == nil {
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
