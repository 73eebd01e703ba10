package dlq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/deadletter"
)

func newDLQPurgeCmd() *cobra.Command {
	var (
		f          dlqFlags
		partitions []int32
		offset     int64
		all        bool
		redriven   bool
		group, to  string
		maxRedrv   int
		yes        bool
	)
	cmd := &cobra.Command{
		Use:   "purge",
		Short: "Delete the dead letters below an offset (DeleteRecords)",
		Long: `Delete the dead letters of a topic below an offset, with Kafka's
DeleteRecords: the log start of each partition moves up, and the records below
it are gone for every reader. Say where with exactly one of:

  --offset N     below offset N in each --partition (or in every partition)
  --all          everything up to the current end of each partition
  --redriven     the letters a redrive redrove: give it the same filters and
                 --to as that redrive (or its --group)

Deleting below an offset removes a prefix of each partition. With --redriven,
purge reads each partition from its start up to the redrive's progress and
stops below the first letter the redrive did not redrive (one its filters
passed over, or one it refused), and says where it stopped and why: a letter
that was never redriven is never deleted. A redrive group with no progress on
the topic is an error.

The command shows what it will delete and asks for confirmation on a terminal;
elsewhere it needs --yes.`,
		Example: `  antidote dlq purge --topic orders.dlq --redriven
  antidote dlq purge --topic orders.dlq --redriven --reason timeout --since 2026-05-01T00:00:00Z
  antidote dlq purge --topic orders.dlq --partition 0 --offset 1200 --yes
  antidote dlq purge --topic orders.dlq --all`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := f.resolveTopic(cmd); err != nil {
				return err
			}
			fs := cmd.Flags()
			ways := 0
			for _, n := range []string{"offset", "all", "redriven"} {
				if fs.Changed(n) {
					ways++
				}
			}
			if ways != 1 {
				return cli.Usagef("say what to delete with exactly one of --offset, --all and --redriven")
			}
			if fs.Changed("offset") && offset < 0 {
				return cli.Usagef("--offset %d: must not be negative", offset)
			}
			var err error
			var rcfg deadletter.RedriveConfig
			if redriven {
				if rcfg, err = f.purgeSelection(cmd, to, maxRedrv, group); err != nil {
					return err
				}
			} else {
				for _, n := range []string{"group", "to", "max-redrives", "original-topic", "stage", "class", "reason", "since", "until"} {
					if fs.Changed(n) {
						return cli.Usagef("--%s goes with --redriven", n)
					}
				}
			}
			ctx := cmd.Context()
			s, err := openDLQ(ctx, cmd, f.topic)
			if err != nil {
				return err
			}
			defer s.close()
			starts, ends, err := deadletter.Bounds(ctx, s.cl, s.topic)
			if err != nil {
				return s.explain(ctx, err)
			}
			for _, p := range partitions {
				if _, ok := ends[p]; !ok {
					return fmt.Errorf("topic %q has no partition %d (it has %d)", s.topic, p, len(ends))
				}
			}
			w := cmd.OutOrStdout()
			below := map[int32]int64{}
			var stops []string
			switch {
			case all:
				below = ends
			case redriven:
				var found map[int32]int64
				if below, found, stops, err = s.redrivenPrefix(ctx, rcfg, partitions); err != nil {
					return err
				}
				maps.Copy(starts, found)
			default:
				for p := range ends {
					below[p] = offset
				}
			}
			plan := kadm.Offsets{}
			var lines []string
			var total int64
			for p, o := range below {
				if len(partitions) > 0 && !slices.Contains(partitions, p) {
					continue
				}
				o = min(o, ends[p])
				if o <= starts[p] {
					continue
				}
				plan.AddOffset(s.topic, p, o, -1)
				total += o - starts[p]
				lines = append(lines, fmt.Sprintf("  partition %d: offsets %d to %d (%d records)", p, starts[p], o-1, o-starts[p]))
			}
			sort.Strings(lines)
			sort.Strings(stops)
			for _, l := range stops {
				fmt.Fprintln(w, l)
			}
			if total == 0 {
				fmt.Fprintf(w, "nothing to delete in %s\n", s.topic)
				return nil
			}
			fmt.Fprintf(w, "delete %d records of %s:\n%s\n", total, s.topic, strings.Join(lines, "\n"))
			if !yes {
				ok, err := cli.Confirm(cmd.InOrStdin(), w, "delete them? [y/N] ", "delete")
				if err != nil {
					return err
				}
				if !ok {
					fmt.Fprintln(w, "nothing deleted")
					return nil
				}
			}
			resp, err := kadm.NewClient(s.cl).DeleteRecords(ctx, plan)
			if err == nil {
				err = resp.Error()
			}
			if err != nil {
				return fmt.Errorf("deleting records of %s: %w", s.topic, err)
			}
			fmt.Fprintf(w, "deleted %d records of %s\n", total, s.topic)
			return nil
		},
	}
	f.addTopic(cmd)
	fl := cmd.Flags()
	fl.Int32SliceVar(&partitions, "partition", nil, "only these partitions (default all)")
	fl.Int64Var(&offset, "offset", 0, "delete the records below this offset")
	fl.BoolVar(&all, "all", false, "delete every record up to the current end")
	fl.BoolVar(&redriven, "redriven", false, "delete the records below the progress of the redrive group")
	fl.StringVar(&group, "group", "", "the redrive group of --redriven (default: the group of the redrive with these filters and --to)")
	fl.StringVar(&to, "to", "", "with --redriven: the --to of the redrive")
	fl.IntVar(&maxRedrv, "max-redrives", deadletter.DefaultMaxRedrives, "with --redriven: the --max-redrives of the redrive")
	f.addFilters(cmd)
	fl.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// purgeSelection is the redrive whose letters purge --redriven deletes:
// the filters and --to of the flags, and its group.
func (f *dlqFlags) purgeSelection(cmd *cobra.Command, to string, maxRedrives int, group string) (deadletter.RedriveConfig, error) {
	if _, ago, err := deadletter.ParseWhen(f.until); err == nil && ago > 0 {
		// Relative to now, --until selects letters the redrive, which ran
		// earlier, passed over.
		return deadletter.RedriveConfig{}, cli.Usagef("--until %s: a duration ago selects other letters now than when the redrive ran: give the time (RFC 3339)", f.until)
	}
	flt, err := f.filter(time.Now())
	if err != nil {
		return deadletter.RedriveConfig{}, err
	}
	cfg := deadletter.RedriveConfig{Topic: f.topic, To: to, Filter: flt, MaxRedrives: maxRedrives}
	if err := cfg.Validate(); err != nil {
		return cfg, cli.Usage(errors.New(strings.ReplaceAll(err.Error(), "deadletter: redrive: ", "")))
	}
	own := cfg.DefaultGroup()
	if group == "" {
		group = own
	} else if group != own && strings.HasPrefix(group, "antidote-redrive-"+f.topic) {
		// The default group of another selection or limit: these flags would
		// take letters for redriven that it passed over.
		return cfg, cli.Usagef("group %s is the progress of a redrive with other filters, --to or --max-redrives than these (whose group is %s): give purge the redrive's own filters, --to and --max-redrives", group, own)
	}
	cfg.Group = group
	return cfg, nil
}

// redrivenPrefix returns, per partition, the offset below which every
// letter was redriven by cfg's redrive ([deadletter.RedrivenPrefix]), the
// log starts it found, and a line for each partition where it stops
// before the redrive's progress.
func (s *dlqSession) redrivenPrefix(ctx context.Context, cfg deadletter.RedriveConfig, only []int32) (below, starts map[int32]int64, stops []string, err error) {
	cfg.IdleTimeout = s.idle
	found, err := deadletter.RedrivenPrefix(ctx, s.cl, cfg, only...)
	if errors.Is(err, deadletter.ErrNoProgress) {
		return nil, nil, nil, fmt.Errorf("redrive group %s has no progress on %s: no redrive ran with this selection (a redrive names its group in its output; give purge its filters and --to, or its --group)", cfg.Group, s.topic)
	}
	if err != nil {
		return nil, nil, nil, s.explain(ctx, err)
	}
	below, starts = map[int32]int64{}, map[int32]int64{}
	for _, p := range found {
		below[p.Partition], starts[p.Partition] = p.Below, p.Start
		if p.Stop == "" {
			continue
		}
		reason := "the redrive refused it: " + p.Stop
		if p.Stop == deadletter.NotSelected {
			reason = "the redrive's filters passed over it"
		}
		stops = append(stops, fmt.Sprintf("partition %d: stops below offset %d, a letter that was not redriven (%s); %d letters up to the redrive's progress (%d) are kept",
			p.Partition, p.Below, reason, p.Progress-p.Below, p.Progress))
	}
	return below, starts, stops, nil
}
