package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/internal/sharegroup"
)

func newDescribeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "describe GROUP",
		Short: "Show a group: its type, state, members, assignment, offsets and lag",
		Long: `Show a group of any client: its type (classic, consumer or share), its state,
its members and what each is assigned, and per partition the group's offset
and lag: the committed offset of a consumer group, the share-partition start
offset of a share group (the records before it are settled).

For a share group it also reads what decides its poison pills: the delivery
limit (the group's share.delivery.count.limit, else the brokers'
group.share.delivery.count.limit, else 5), and the broker's own dead-letter
topic of the group (Kafka 4.4). The broker takes a wrong
errors.deadletterqueue.topic.name without complaint and, when it comes to
write, archives the record instead: it is lost. So the topic must exist,
start with the brokers' prefix ("dlq.") and have the topic config
errors.deadletterqueue.group.enable=true. A broken setup is reported with
what to change, and the command then exits with 1.`,
		Example: `  antidote group describe payments
  antidote group describe workers -o json`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return describe(cmd, args[0])
		},
	}
	return cmd
}

// Described is a group, as -o json prints it.
type Described struct {
	Group string `json:"group"`
	// Type is classic, consumer or share.
	Type    string   `json:"type"`
	State   string   `json:"state"`
	Members []Member `json:"members"`
	// Partitions are the group's partitions: those with an offset, and
	// those assigned.
	Partitions []PartitionState `json:"partitions"`
	// Lag is the sum of the known lags.
	Lag   int64       `json:"lag"`
	Share *ShareSetup `json:"share,omitempty"`
}

// Member is a member of a group.
type Member struct {
	ID       string   `json:"id"`
	ClientID string   `json:"client_id"`
	Host     string   `json:"host"`
	Assigned []string `json:"assigned"` // topic/partition
}

// PartitionState is a partition of a group.
type PartitionState struct {
	Topic     string `json:"topic"`
	Partition int32  `json:"partition"`
	// Offset is the committed offset of a consumer group, the
	// share-partition start offset of a share group; -1 when it has none.
	Offset int64 `json:"offset"`
	// End is the partition's end offset, -1 when unknown.
	End int64 `json:"end"`
	// Lag is the records after Offset (for a share group, the broker's
	// count of records not yet settled when it gives one); -1 when unknown.
	Lag     int64    `json:"lag"`
	Members []string `json:"members,omitempty"` // the client ids assigned it
}

// ShareSetup is what decides a share group's poison pills.
type ShareSetup struct {
	DeliveryLimit int `json:"delivery_limit"`
	// LimitSource is group, broker or default (see sharegroup.Limit).
	LimitSource string `json:"limit_source"`
	LimitError  string `json:"limit_error,omitempty"`
	// DLQTopic is the broker's dead-letter topic of the group, empty when
	// none is set.
	DLQTopic  string `json:"dlq_topic,omitempty"`
	DLQCopies bool   `json:"dlq_copies"`
	// CheckError says why the setup could not be checked.
	CheckError string   `json:"check_error,omitempty"`
	Problems   []string `json:"problems,omitempty"`
}

func describe(cmd *cobra.Command, group string) error {
	ctx := cmd.Context()
	g := cli.ReadGlobals(cmd)
	cl, err := g.Dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	actx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	d, err := describeGroup(actx, cl, group)
	if err != nil {
		return err
	}
	if g.JSON() {
		if err := cli.WriteJSON(cmd.OutOrStdout(), d); err != nil {
			return err
		}
	} else {
		printDescribed(cmd.OutOrStdout(), d)
	}
	if d.Share != nil && len(d.Share.Problems) > 0 {
		return fmt.Errorf("share group %s: %d problem(s) in its setup, above: fix them before records are lost", cli.Safe(group), len(d.Share.Problems))
	}
	return nil
}

// describeGroup reads a group of any type.
func describeGroup(ctx context.Context, cl *kgo.Client, group string) (*Described, error) {
	adm := kadm.NewClient(cl)
	listed, err := adm.ListGroups(ctx)
	if err != nil && len(listed) == 0 {
		return nil, fmt.Errorf("listing groups: %w", err)
	}
	l, ok := listed[group]
	if !ok {
		return nil, fmt.Errorf("no group %q in the cluster", cli.Safe(group))
	}
	d := &Described{Group: group, Type: l.GroupType, State: l.State}
	if d.Type == "" { // before Kafka 3.8: every group is classic
		d.Type = "classic"
	}
	switch d.Type {
	case "share":
		err = describeShare(ctx, cl, adm, d)
	case "consumer":
		err = describeConsumer(ctx, adm, d)
	default:
		err = describeClassic(ctx, adm, d)
	}
	if err != nil {
		return nil, err
	}
	slices.SortFunc(d.Partitions, func(a, b PartitionState) int {
		return cmpTP(a.Topic, a.Partition, b.Topic, b.Partition)
	})
	for _, p := range d.Partitions {
		if p.Lag > 0 {
			d.Lag += p.Lag
		}
	}
	return d, nil
}

func cmpTP(at string, ap int32, bt string, bp int32) int {
	if c := strings.Compare(at, bt); c != 0 {
		return c
	}
	return int(ap) - int(bp)
}

// parts collects the partitions of a group by topic and partition.
type parts map[string]map[int32]*PartitionState

func (ps parts) at(topic string, p int32) *PartitionState {
	if ps[topic] == nil {
		ps[topic] = map[int32]*PartitionState{}
	}
	s := ps[topic][p]
	if s == nil {
		s = &PartitionState{Topic: topic, Partition: p, Offset: -1, End: -1, Lag: -1}
		ps[topic][p] = s
	}
	return s
}

func (ps parts) assign(m *Member, set kadm.TopicsSet) {
	for _, t := range set.Sorted() {
		if t.Topic == "" {
			continue // a broker that named the topic by its id alone (kfake)
		}
		for _, p := range t.Partitions {
			m.Assigned = append(m.Assigned, fmt.Sprintf("%s/%d", t.Topic, p))
			s := ps.at(t.Topic, p)
			s.Members = append(s.Members, m.ClientID)
		}
	}
}

func (ps parts) topics() []string {
	out := make([]string, 0, len(ps))
	for t := range ps {
		out = append(out, t)
	}
	return out
}

// committed fills in the committed offsets of a consumer group and the lag
// after them.
func (ps parts) committed(ctx context.Context, adm *kadm.Client, group string) error {
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return fmt.Errorf("reading the committed offsets of group %q: %w", cli.Safe(group), err)
	}
	offs.Each(func(o kadm.OffsetResponse) {
		ps.at(o.Topic, o.Partition).Offset = o.At
	})
	return ps.ends(ctx, adm, func(s *PartitionState) {
		if s.Offset >= 0 && s.End >= 0 {
			s.Lag = max(s.End-s.Offset, 0)
		}
	})
}

// ends fills in the end offsets, then calls lag on each partition.
func (ps parts) ends(ctx context.Context, adm *kadm.Client, lag func(*PartitionState)) error {
	if len(ps) == 0 {
		return nil
	}
	ends, err := adm.ListEndOffsets(ctx, ps.topics()...)
	if err != nil {
		return fmt.Errorf("reading the end offsets: %w", err)
	}
	for _, byPart := range ps {
		for _, s := range byPart {
			if e, ok := ends.Lookup(s.Topic, s.Partition); ok && e.Err == nil {
				s.End = e.Offset
			}
			lag(s)
		}
	}
	return nil
}

func (ps parts) into(d *Described) {
	for _, byPart := range ps {
		for _, s := range byPart {
			d.Partitions = append(d.Partitions, *s)
		}
	}
}

func describeClassic(ctx context.Context, adm *kadm.Client, d *Described) error {
	groups, err := adm.DescribeGroups(ctx, d.Group)
	if err != nil {
		return fmt.Errorf("describing group %q: %w", cli.Safe(d.Group), err)
	}
	g := groups[d.Group]
	if g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("describing group %q: %w", cli.Safe(d.Group), g.Err)
	}
	if g.State != "" {
		d.State = g.State
	}
	ps := parts{}
	for _, gm := range g.Members {
		m := Member{ID: gm.MemberID, ClientID: gm.ClientID, Host: gm.ClientHost}
		if c, ok := gm.Assigned.AsConsumer(); ok {
			set := kadm.TopicsSet{}
			for _, t := range c.Topics {
				set.Add(t.Topic, t.Partitions...)
			}
			ps.assign(&m, set)
		}
		d.Members = append(d.Members, m)
	}
	if err := ps.committed(ctx, adm, d.Group); err != nil {
		return err
	}
	ps.into(d)
	return nil
}

func describeConsumer(ctx context.Context, adm *kadm.Client, d *Described) error {
	groups, err := adm.DescribeConsumerGroups(ctx, d.Group)
	if err != nil {
		return fmt.Errorf("describing consumer group %q: %w", cli.Safe(d.Group), err)
	}
	g := groups[d.Group]
	if g.Err != nil {
		return fmt.Errorf("describing consumer group %q: %w", cli.Safe(d.Group), g.Err)
	}
	d.State = g.State
	ps := parts{}
	for _, gm := range g.Members {
		m := Member{ID: gm.MemberID, ClientID: gm.ClientID, Host: gm.ClientHost}
		ps.assign(&m, gm.Assignment)
		d.Members = append(d.Members, m)
	}
	if err := ps.committed(ctx, adm, d.Group); err != nil {
		return err
	}
	ps.into(d)
	return nil
}

func describeShare(ctx context.Context, cl *kgo.Client, adm *kadm.Client, d *Described) error {
	groups, err := adm.DescribeShareGroups(ctx, d.Group)
	if err != nil {
		return fmt.Errorf("describing share group %q: %w", cli.Safe(d.Group), err)
	}
	g := groups[d.Group]
	if g.Err != nil {
		return fmt.Errorf("describing share group %q: %w", cli.Safe(d.Group), g.Err)
	}
	d.State = g.GroupState
	ps := parts{}
	for _, gm := range g.Members {
		m := Member{ID: gm.MemberID, ClientID: gm.ClientID, Host: gm.ClientHost}
		ps.assign(&m, gm.Assignment)
		d.Members = append(d.Members, m)
	}
	offs, err := adm.DescribeShareGroupOffsets(ctx, d.Group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return fmt.Errorf("reading the share-partition offsets of group %q: %w", cli.Safe(d.Group), err)
	}
	brokerLag := map[*PartitionState]bool{}
	offs[d.Group].Offsets.Each(func(o kadm.ShareOffset) {
		if o.Err != nil {
			return
		}
		s := ps.at(o.Topic, o.Partition)
		s.Offset = o.StartOffset
		if o.Lag >= 0 {
			s.Lag, brokerLag[s] = o.Lag, true
		}
	})
	if err := ps.ends(ctx, adm, func(s *PartitionState) {
		if !brokerLag[s] && s.Offset >= 0 && s.End >= 0 {
			s.Lag = max(s.End-s.Offset, 0)
		}
	}); err != nil {
		return err
	}
	ps.into(d)

	sh := &ShareSetup{}
	if l, err := sharegroup.ReadLimit(ctx, cl, d.Group); err != nil {
		sh.LimitError = err.Error()
	} else {
		sh.DeliveryLimit, sh.LimitSource = l.Limit, l.Source
	}
	if setup, err := sharegroup.Check(ctx, cl, d.Group); err != nil {
		sh.CheckError = err.Error()
	} else {
		sh.DLQTopic, sh.DLQCopies, sh.Problems = setup.DLQTopic, setup.DLQCopies, setup.Problems
	}
	d.Share = sh
	return nil
}

// printDescribed writes d for a person.
func printDescribed(w io.Writer, d *Described) {
	fmt.Fprintf(w, "group %s (%s group), state %s, %d member(s), lag %d\n", cli.Safe(d.Group), d.Type, cli.Dash(d.State), len(d.Members), d.Lag)
	if len(d.Members) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "MEMBER\tCLIENT\tHOST\tASSIGNED")
		for _, m := range d.Members {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", cli.Clip(cli.Safe(m.ID), 24), cli.Safe(m.ClientID), cli.Safe(m.Host), cli.Dash(strings.Join(m.Assigned, " ")))
		}
		tw.Flush()
	}
	if len(d.Partitions) > 0 {
		fmt.Fprintln(w)
		offset := "COMMITTED"
		if d.Type == "share" {
			offset = "START-OFFSET"
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintf(tw, "TOPIC\tPARTITION\t%s\tEND\tLAG\tMEMBERS\n", offset)
		num := func(n int64) string {
			if n < 0 {
				return "-"
			}
			return fmt.Sprint(n)
		}
		for _, p := range d.Partitions {
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%d\n", cli.Safe(p.Topic), p.Partition, num(p.Offset), num(p.End), num(p.Lag), len(p.Members))
		}
		tw.Flush()
	}
	sh := d.Share
	if sh == nil {
		return
	}
	fmt.Fprintln(w)
	switch {
	case sh.LimitError != "":
		fmt.Fprintf(w, "delivery limit: cannot be read (%s); a member then dead-letters records from their second delivery on\n", cli.SafeText(sh.LimitError))
	default:
		from := map[string]string{"group": "the group's share.delivery.count.limit", "broker": "the brokers' group.share.delivery.count.limit", "default": "Kafka's default"}[sh.LimitSource]
		fmt.Fprintf(w, "delivery limit: %d (%s)\n", sh.DeliveryLimit, from)
	}
	switch {
	case sh.CheckError != "":
		fmt.Fprintf(w, "broker dead-letter topic: not checked: %s\n", cli.SafeText(sh.CheckError))
	case sh.DLQTopic == "":
		fmt.Fprintln(w, "broker dead-letter topic: none (errors.deadletterqueue.topic.name): a record the broker gives up on (its lock ran out on its last delivery, its member died holding it) is archived and gone")
	default:
		copies := "holds only metadata"
		if sh.DLQCopies {
			copies = "copies key and value"
		}
		fmt.Fprintf(w, "broker dead-letter topic: %s (%s)\n", cli.Safe(sh.DLQTopic), copies)
	}
	for _, p := range sh.Problems {
		fmt.Fprintf(w, "PROBLEM: %s\n", cli.SafeText(p))
	}
}
