package dlq

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"golang.org/x/term"

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
		group      string
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
  --redriven     below the progress of the redrive group (--group, default
                 antidote-redrive-<topic>): only letters a redrive went past

The command shows what it will delete and asks for confirmation on a terminal;
elsewhere it needs --yes.`,
		Example: `  antidote dlq purge --topic orders.dlq --redriven
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
			if fs.Changed("group") && !redriven {
				return cli.Usagef("--group goes with --redriven")
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
			below := map[int32]int64{}
			switch {
			case all:
				below = ends
			case redriven:
				if group == "" {
					group = (&deadletter.RedriveConfig{Topic: s.topic}).DefaultGroup()
				}
				os, err := kadm.NewClient(s.cl).FetchOffsetsForTopics(ctx, group, s.topic)
				if err == nil {
					err = os.Error()
				}
				if err != nil {
					return fmt.Errorf("progress of redrive group %s: %w", group, err)
				}
				for p := range ends {
					if o, ok := os.Lookup(s.topic, p); ok && o.At >= 0 {
						below[p] = o.At
					}
				}
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
			w := cmd.OutOrStdout()
			if total == 0 {
				fmt.Fprintf(w, "nothing to delete in %s\n", s.topic)
				return nil
			}
			fmt.Fprintf(w, "delete %d records of %s:\n%s\n", total, s.topic, strings.Join(lines, "\n"))
			if !yes {
				ok, err := confirm(cmd.InOrStdin(), w, "delete them? [y/N] ")
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
	fl.StringVar(&group, "group", "", "the redrive group of --redriven (default antidote-redrive-<topic>)")
	fl.BoolVarP(&yes, "yes", "y", false, "do not ask for confirmation")
	return cmd
}

// confirm asks question on a terminal and reads the answer; without a
// terminal it refuses.
func confirm(in io.Reader, out io.Writer, question string) (bool, error) {
	f, ok := in.(*os.File)
	if !ok || !term.IsTerminal(int(f.Fd())) {
		return false, cli.Usagef("not a terminal, so no one can confirm: add --yes to delete")
	}
	fmt.Fprint(out, question)
	answer, err := bufio.NewReader(in).ReadString('\n')
	if err != nil && answer == "" {
		return false, nil
	}
	a := strings.ToLower(strings.TrimSpace(answer))
	return a == "y" || a == "yes", nil
}
