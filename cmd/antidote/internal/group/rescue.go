package group

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/cmd/antidote/internal/framed"
	"github.com/antidote-kafka/antidote/consumer"
	"github.com/antidote-kafka/antidote/deadletter"
	"github.com/antidote-kafka/antidote/failure"
	"github.com/antidote-kafka/antidote/serde/registry"
)

// rescueFlags are the flags of group rescue.
type rescueFlags struct {
	group, topic, dlq, who string
	partition              int32
	offset                 int64
	force, txn, yes        bool
	registry               string
	dec                    *framed.Decoder // of --registry, or nil
}

func newRescueCmd() *cobra.Command {
	var f rescueFlags
	cmd := &cobra.Command{
		Use:   "rescue",
		Short: "Move a consumer group past the record it is stuck on, keeping the record",
		Long: `Take the record a consumer group is stuck on out of its way without losing it.
The group may be any client's: a Spring, Java, Python or Go consumer that
fails on the same record again and again.

rescue reads the group's committed offset of the partition, shows the record
there, copies it byte for byte (key, value, headers, timestamp) into a
dead-letter topic in Antidote's format (reason operator-rescue, who asked,
the group), waits until Kafka acknowledges the copy, and only then commits
the offset after it for the group. The group then goes on with the next
record, and the rescued one waits in the dead-letter topic, for antidote dlq
ls, show and redrive, like any other dead letter.

Kafka takes a commit from outside a group only while the group has no
members, so stop the group's consumers first: rescue refuses while the group
has members. --force names them and tries anyway: the broker then refuses a
plain commit, after the copy has been written. With --transactional the copy
and the commit are one transaction: both happen, or neither; Kafka takes a
transaction's offsets for a group with members, and a member that commits
its own offset afterwards moves the group back onto the record.

--offset names the record when the group has no committed offset for the
partition; with one, it must be the committed offset (the record the group
is stuck on), so that no record before it is passed over.

The dead-letter topic (default: the topic's name with .dlq) is created when
it is missing, with the source topic's partition count. The copy goes to the
record's own partition when the dead-letter topic has it.

It shows what it will do and asks for confirmation on a terminal; elsewhere
it needs --yes. A key or value in the schema registry's wire format (magic
byte 0, schema id) is shown with its schema id; with --registry, decoded
into JSON with its schema (Avro, JSON Schema, Protobuf). A record that does
not decode is shown as it is, with why: the rescue goes on.`,
		Example: `  antidote group rescue --group payments --topic orders --partition 3
  antidote group rescue --group payments --topic orders --partition 3 --transactional --yes --who alice
  antidote group rescue --group payments --topic orders --partition 3 --registry http://localhost:8081`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.group == "" || f.topic == "" || !cmd.Flags().Changed("partition") {
				return cli.Usagef("group rescue: --group, --topic and --partition are required")
			}
			if f.partition < 0 {
				return cli.Usagef("--partition %d: must not be negative", f.partition)
			}
			if cmd.Flags().Changed("offset") && f.offset < 0 {
				return cli.Usagef("--offset %d: must not be negative", f.offset)
			}
			if !cmd.Flags().Changed("offset") {
				f.offset = -1
			}
			if f.dlq == "" {
				f.dlq = f.topic + ".dlq"
			}
			if f.who == "" {
				f.who = os.Getenv("USER")
			}
			if f.registry != "" {
				reg, err := registry.New(f.registry)
				if err != nil {
					return cli.Usagef("--registry %q: %v", f.registry, err)
				}
				if f.dec, err = framed.New(reg); err != nil {
					return err
				}
			}
			return rescue(cmd, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.group, "group", "", "the consumer group that is stuck (required)")
	fl.StringVar(&f.topic, "topic", "", "the topic it is stuck on (required)")
	fl.Int32Var(&f.partition, "partition", 0, "the partition it is stuck on (required)")
	fl.Int64Var(&f.offset, "offset", 0, "the record to rescue (default: the group's committed offset)")
	fl.StringVar(&f.dlq, "dlq-topic", "", "the dead-letter topic to copy the record into (default TOPIC.dlq)")
	fl.StringVar(&f.who, "who", "", "who asks, written into the letter (default $USER)")
	fl.StringVar(&f.registry, "registry", "", "schema registry URL: show a key and value in its wire format (Avro, JSON Schema, Protobuf) decoded")
	fl.BoolVar(&f.force, "force", false, "go on although the group has members (the broker then refuses a plain commit)")
	fl.BoolVar(&f.txn, "transactional", false, "write the copy and commit the offset in one transaction")
	fl.BoolVarP(&f.yes, "yes", "y", false, "do not ask for confirmation")
	_ = cmd.RegisterFlagCompletionFunc("topic", cli.CompleteTopics)
	_ = cmd.RegisterFlagCompletionFunc("dlq-topic", cli.CompleteTopics)
	return cmd
}

// rescued is what a rescue did, as -o json prints it.
type rescued struct {
	Group         string `json:"group"`
	Topic         string `json:"topic"`
	Partition     int32  `json:"partition"`
	Offset        int64  `json:"offset"`
	DLQTopic      string `json:"dlq_topic"`
	DLQPartition  int32  `json:"dlq_partition"`
	DLQOffset     int64  `json:"dlq_offset"`
	Committed     int64  `json:"committed"`
	Transactional bool   `json:"transactional"`
}

func rescue(cmd *cobra.Command, f rescueFlags) error {
	ctx := cmd.Context()
	g := cli.ReadGlobals(cmd)
	w := cmd.OutOrStdout()
	cl, err := g.Dial(ctx)
	if err != nil {
		return err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	actx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()

	if err := checkIdle(actx, cmd.ErrOrStderr(), adm, f); err != nil {
		return err
	}
	committed, err := committedOffset(actx, adm, f.group, f.topic, f.partition)
	if err != nil {
		return err
	}
	off := f.offset
	switch {
	case committed < 0 && off < 0:
		return fmt.Errorf("group %q has no committed offset for %s partition %d: name the record with --offset", f.group, f.topic, f.partition)
	case committed >= 0 && off >= 0 && off != committed:
		return fmt.Errorf("group %q is at offset %d of %s partition %d, not %d: rescuing %d would pass over the records before it (leave --offset out to rescue %d)",
			f.group, committed, f.topic, f.partition, off, off, committed)
	case off < 0:
		off = committed
	}
	rec, err := readAt(ctx, cl, adm, g.Timeout, f.topic, f.partition, off)
	if err != nil {
		return err
	}
	if !g.JSON() {
		dctx, dcancel := context.WithTimeout(ctx, g.Timeout)
		show(dctx, w, f, rec)
		dcancel()
	}
	if !f.yes {
		ok, err := cli.Confirm(cmd.InOrStdin(), w, fmt.Sprintf("copy it into %s and commit offset %d for group %s? [y/N] ", f.dlq, off+1, f.group), "rescue")
		if err != nil {
			return err
		}
		if !ok {
			fmt.Fprintln(w, "nothing done")
			return nil
		}
	}
	parts, err := ensureDLQ(actx, adm, f.topic, f.dlq)
	if err != nil {
		return err
	}
	letter := letterOf(rec, f, parts)

	var out rescued
	if f.txn {
		out, err = writeTxn(ctx, g, f, letter, off+1)
		if err == nil {
			err = awaitCommitted(ctx, adm, max(g.Timeout, 10*time.Second), f, off+1)
		}
	} else {
		out, err = writePlain(ctx, cl, adm, g.Timeout, f, letter, off+1)
	}
	if err != nil {
		return err
	}
	out.Group, out.Topic, out.Partition, out.Offset, out.Committed, out.Transactional = f.group, f.topic, f.partition, off, off+1, f.txn
	if g.JSON() {
		return cli.WriteJSON(w, out)
	}
	fmt.Fprintf(w, "rescued: the record is at %s partition %d offset %d; group %s now starts at offset %d of %s partition %d\n",
		out.DLQTopic, out.DLQPartition, out.DLQOffset, f.group, off+1, f.topic, f.partition)
	fmt.Fprintf(w, "see it with: antidote dlq show --topic %s --partition %d --offset %d\n", out.DLQTopic, out.DLQPartition, out.DLQOffset)
	return nil
}

// checkIdle refuses a group with members unless --force: Kafka takes a
// commit from outside a group only while it is empty. With --force it
// names the members on warn and goes on.
func checkIdle(ctx context.Context, warn io.Writer, adm *kadm.Client, f rescueFlags) error {
	groups, err := adm.DescribeGroups(ctx, f.group)
	if err != nil {
		return fmt.Errorf("describing group %q: %w", f.group, err)
	}
	d, ok := groups[f.group]
	if !ok {
		return fmt.Errorf("describing group %q: no answer for it", f.group)
	}
	if d.Err != nil && !errors.Is(d.Err, kerr.GroupIDNotFound) {
		return fmt.Errorf("describing group %q: %w", f.group, d.Err)
	}
	if len(d.Members) == 0 {
		return nil
	}
	var who []string
	for _, m := range d.Members {
		who = append(who, cli.Safe(m.ClientID)+"@"+cli.Safe(m.ClientHost))
	}
	if f.force {
		fmt.Fprintf(warn, "warning: group %q has %d members (%s): going on (--force); the broker refuses a plain commit while it has them\n",
			f.group, len(d.Members), strings.Join(who, ", "))
		return nil
	}
	return fmt.Errorf("group %q has %d members (%s): Kafka takes a commit from outside a group only while it has none; stop its consumers, then rescue (--force tries anyway)",
		f.group, len(d.Members), strings.Join(who, ", "))
}

// committedOffset is the group's committed offset of a partition, -1 when
// it has none.
func committedOffset(ctx context.Context, adm *kadm.Client, group, topic string, part int32) (int64, error) {
	offs, err := adm.FetchOffsets(ctx, group)
	if err == nil {
		err = offs.Error()
	}
	if err != nil {
		return 0, fmt.Errorf("reading the committed offsets of group %q: %w", group, err)
	}
	if o, ok := offs.Lookup(topic, part); ok && o.At >= 0 {
		return o.At, nil
	}
	return -1, nil
}

// awaitCommitted waits until the group's offset of the partition reads next.
// A transaction's offset commit is applied when the group coordinator gets
// the transaction's commit marker, which Kafka writes after EndTxn has
// answered: a consumer that joined at once could still read the old offset
// and stop on the same record again.
func awaitCommitted(ctx context.Context, adm *kadm.Client, timeout time.Duration, f rescueFlags, next int64) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		at, err := committedOffset(ctx, adm, f.group, f.topic, f.partition)
		if err == nil && at == next {
			return nil
		}
		select {
		case <-ctx.Done():
			if err != nil {
				return fmt.Errorf("the transaction committed, but the offsets of group %q could not be read back within %v: %w (check with antidote group describe)", f.group, timeout, err)
			}
			return fmt.Errorf("the transaction committed, but group %q still reads offset %d of %q partition %d after %v, not %d (check again with antidote group describe)",
				f.group, at, f.topic, f.partition, timeout, next)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// readAt reads the record at offset off of a partition (read_committed).
func readAt(ctx context.Context, cl *kgo.Client, adm *kadm.Client, timeout time.Duration, topic string, part int32, off int64) (*kgo.Record, error) {
	lctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	starts, err := adm.ListStartOffsets(lctx, topic)
	if err == nil {
		err = starts.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	ends, err := adm.ListEndOffsets(lctx, topic)
	if err == nil {
		err = ends.Error()
	}
	if err != nil {
		return nil, fmt.Errorf("topic %s: %w", topic, err)
	}
	s, ok1 := starts.Lookup(topic, part)
	e, ok2 := ends.Lookup(topic, part)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("topic %s has no partition %d", topic, part)
	}
	switch {
	case off >= e.Offset:
		return nil, fmt.Errorf("offset %d of %s partition %d is at or past its end (%d): the group is not stuck on a record there", off, topic, part, e.Offset)
	case off < s.Offset:
		return nil, fmt.Errorf("offset %d of %s partition %d is gone (the partition starts at %d)", off, topic, part, s.Offset)
	}
	rd, err := kgo.NewClient(append(cl.Opts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{topic: {part: kgo.NewOffset().At(off)}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	rctx, rcancel := context.WithTimeout(ctx, max(timeout, 10*time.Second))
	defer rcancel()
	for {
		fs := rd.PollFetches(rctx)
		if rctx.Err() != nil {
			return nil, fmt.Errorf("reading offset %d of %s partition %d: no record within %v", off, topic, part, max(timeout, 10*time.Second))
		}
		if err := fs.Err0(); err != nil {
			return nil, fmt.Errorf("reading offset %d of %s partition %d: %w", off, topic, part, err)
		}
		for _, r := range fs.Records() {
			if r.Offset == off {
				return r, nil
			}
			if r.Offset > off {
				return nil, fmt.Errorf("%s partition %d has no record at offset %d (the next is at %d: a transaction marker, or an aborted or compacted record); the group is not stuck on a record there",
					topic, part, off, r.Offset)
			}
		}
	}
}

// show prints the record to rescue, its bytes made harmless; a key or
// value in the registry's wire format with its schema id, and decoded with
// --registry. ctx bounds the registry requests.
func show(ctx context.Context, w io.Writer, f rescueFlags, r *kgo.Record) {
	fmt.Fprintf(w, "group %s is at %s partition %d offset %d:\n", f.group, f.topic, r.Partition, r.Offset)
	fmt.Fprintf(w, "  timestamp  %s\n", r.Timestamp.UTC().Format(deadletter.TimeLayout))
	showBytes(ctx, w, f.dec, "key", r.Key, false)
	showBytes(ctx, w, f.dec, "value", r.Value, true)
	for _, h := range r.Headers {
		fmt.Fprintf(w, "  header     %s: %s\n", cli.Safe(h.Key), preview(h.Value))
	}
}

// maxDecoded is how much of a decoded key or value show prints, in runes.
const maxDecoded = 1000

// showBytes prints a key or value (size: with its length) on one line. In
// the registry's wire format it is decoded when dec is not nil; when it is
// nil or the bytes do not decode, the line shows the schema id and the
// preview of the payload, and a second line says why it is not decoded.
func showBytes(ctx context.Context, w io.Writer, dec *framed.Decoder, name string, b []byte, size bool) {
	var notes []string
	id, ok := framed.SchemaID(b)
	shown := preview(b)
	var why error
	switch {
	case !ok:
	case dec == nil:
		shown = fmt.Sprintf("schema id %d: %s", id, preview(framed.Payload(b)))
	default:
		v, err := dec.Decode(ctx, b)
		if err != nil {
			shown, why = fmt.Sprintf("schema id %d: %s", id, preview(framed.Payload(b))), err
			break
		}
		shown = cli.Safe(cli.Clip(v.JSON, maxDecoded))
		notes = append(notes, v.Format+", schema id "+strconv.Itoa(id))
	}
	if size {
		notes = append(notes, strconv.Itoa(len(b))+" bytes")
	}
	if len(notes) > 0 {
		shown += " (" + strings.Join(notes, ", ") + ")"
	}
	fmt.Fprintf(w, "  %-10s %s\n", name, shown)
	if why != nil {
		fmt.Fprintf(w, "  %-10s not decoded: %s\n", "", cli.Safe(cli.Clip(why.Error(), 300)))
	}
}

// preview is bytes as text when they are UTF-8, else as hex, cut short.
func preview(b []byte) string {
	switch {
	case b == nil:
		return "(null)"
	case utf8.Valid(b):
		return cli.Safe(cli.Clip(string(b), 120))
	default:
		n := min(len(b), 48)
		s := fmt.Sprintf("hex %x", b[:n])
		if n < len(b) {
			s += "…"
		}
		return s
	}
}

// ensureDLQ creates the dead-letter topic when it is missing, as the
// consumer does (the source's partition count, its max.message.bytes plus
// consumer.LetterHeadroom), and returns its partition count.
func ensureDLQ(ctx context.Context, adm *kadm.Client, topic, dlq string) (int32, error) {
	td, err := adm.ListTopics(ctx, topic, dlq)
	if err != nil {
		return 0, fmt.Errorf("reading topics %s and %s: %w", topic, dlq, err)
	}
	if d, ok := td[dlq]; ok && d.Err == nil {
		return int32(len(d.Partitions)), nil
	}
	src, ok := td[topic]
	if !ok || src.Err != nil {
		return 0, fmt.Errorf("topic %s: cannot read it to create %s like it", topic, dlq)
	}
	cfg := map[string]*string{}
	if rc, err := adm.DescribeTopicConfigs(ctx, topic); err == nil {
		if c, err := rc.On(topic, nil); err == nil {
			for _, kv := range c.Configs {
				if kv.Key == "max.message.bytes" && kv.Value != nil {
					if n, err := strconv.ParseInt(*kv.Value, 10, 32); err == nil {
						v := strconv.FormatInt(min(n+consumer.LetterHeadroom, 1<<30), 10)
						cfg["max.message.bytes"] = &v
					}
				}
			}
		}
	}
	parts := int32(len(src.Partitions))
	resp, err := adm.CreateTopic(ctx, parts, -1, cfg, dlq)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("creating dead-letter topic %s: %w", dlq, err)
	}
	return parts, nil
}

// letterOf is the record's copy in Antidote's letter format: its key,
// value, timestamp and headers, then the failure headers; in the record's
// own partition when the dead-letter topic has it.
func letterOf(r *kgo.Record, f rescueFlags, dlqParts int32) *kgo.Record {
	who := f.who
	if who == "" {
		who = "an operator"
	}
	now := time.Now()
	fl := &deadletter.Failure{
		Stage: deadletter.StageProcess, Reason: deadletter.ReasonRescue, Class: failure.ClassUnclassified.String(),
		ErrorType: "rescue",
		Message:   fmt.Sprintf("rescued by %s: consumer group %s was stuck on this record", who, f.group),
		Topic:     r.Topic, Partition: r.Partition, Offset: r.Offset, Timestamp: r.Timestamp,
		OriginalHeaders: len(r.Headers), Group: f.group, ClientID: "antidote-group-rescue",
		First: now, Last: now,
	}
	hs := make([]deadletter.Header, 0, len(r.Headers)+16)
	for _, h := range r.Headers {
		hs = append(hs, deadletter.Header{Key: h.Key, Value: h.Value})
	}
	hs = fl.AppendHeaders(hs)
	l := &kgo.Record{Topic: f.dlq, Key: r.Key, Value: r.Value, Timestamp: r.Timestamp, Partition: r.Partition}
	for _, h := range hs {
		l.Headers = append(l.Headers, kgo.RecordHeader{Key: h.Key, Value: h.Value})
	}
	if r.Partition >= dlqParts {
		// Fewer partitions than the source: by key, as Kafka's Java
		// client would (murmur2).
		l.Partition = int32(kgo.StickyKeyPartitioner(nil).ForTopic(f.dlq).Partition(l, int(dlqParts)))
	}
	return l
}

// partitionOpts: a letter goes to the partition letterOf chose.
func partitionOpts() []kgo.Opt { return []kgo.Opt{kgo.RecordPartitioner(kgo.ManualPartitioner())} }

// writePlain writes the letter, waits for its acknowledgement, then
// commits next for the group.
func writePlain(ctx context.Context, cl *kgo.Client, adm *kadm.Client, timeout time.Duration, f rescueFlags, letter *kgo.Record, next int64) (rescued, error) {
	pr, err := kgo.NewClient(append(cl.Opts(), partitionOpts()...)...)
	if err != nil {
		return rescued{}, err
	}
	defer pr.Close()
	pctx, cancel := context.WithTimeout(ctx, max(timeout, 10*time.Second))
	defer cancel()
	r, err := pr.ProduceSync(pctx, letter).First()
	if err != nil {
		return rescued{}, fmt.Errorf("writing the copy to %s: %w (nothing was committed: the group is still at the record)", f.dlq, err)
	}
	out := rescued{DLQTopic: r.Topic, DLQPartition: r.Partition, DLQOffset: r.Offset}
	var offs kadm.Offsets
	offs.AddOffset(f.topic, f.partition, next, -1)
	cctx, ccancel := context.WithTimeout(ctx, timeout)
	defer ccancel()
	resp, err := adm.CommitOffsets(cctx, f.group, offs)
	if err == nil {
		err = resp.Error()
	}
	if err != nil {
		return out, fmt.Errorf("the copy is at %s partition %d offset %d, but committing offset %d for group %s failed: %w (a group with members refuses it: stop them and run rescue again, which writes a second copy; or use --transactional)",
			r.Topic, r.Partition, r.Offset, next, f.group, err)
	}
	return out, nil
}

// writeTxn writes the letter and commits next for the group in one
// transaction. The group is not joined: the offsets are committed with
// generation -1, as Kafka allows for a group without members.
func writeTxn(ctx context.Context, g cli.Globals, f rescueFlags, letter *kgo.Record, next int64) (rescued, error) {
	txnID := "antidote-group-rescue-" + f.group
	cl, err := g.Dial(ctx, append(partitionOpts(), kgo.TransactionalID(txnID), kgo.TransactionTimeout(max(g.Timeout, 10*time.Second)))...)
	if err != nil {
		return rescued{}, err
	}
	defer cl.Close()
	tctx, cancel := context.WithTimeout(ctx, max(g.Timeout, 10*time.Second))
	defer cancel()
	if err := cl.BeginTransaction(); err != nil {
		return rescued{}, err
	}
	abort := func(err error) (rescued, error) {
		actx, acancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer acancel()
		if aerr := cl.EndTransaction(actx, kgo.TryAbort); aerr != nil {
			return rescued{}, fmt.Errorf("%w; aborting the transaction: %v", err, aerr)
		}
		return rescued{}, fmt.Errorf("%w (the transaction was aborted: nothing was written or committed)", err)
	}
	r, err := cl.ProduceSync(tctx, letter).First()
	if err != nil {
		return abort(fmt.Errorf("writing the copy to %s: %w", f.dlq, err))
	}
	id, epoch, err := cl.ProducerID(tctx)
	if err != nil {
		return abort(err)
	}
	add := kmsg.NewPtrAddOffsetsToTxnRequest()
	add.TransactionalID, add.ProducerID, add.ProducerEpoch, add.Group = txnID, id, epoch, f.group
	addResp, err := add.RequestWith(tctx, cl)
	if err == nil {
		err = kerr.ErrorForCode(addResp.ErrorCode)
	}
	if err != nil {
		return abort(fmt.Errorf("adding group %s to the transaction: %w", f.group, err))
	}
	// TxnOffsetCommit v6 names topics by id (KIP-1319), earlier versions
	// by name: both are set, the client sends what the version has.
	td, err := kadm.NewClient(cl).ListTopics(tctx, f.topic)
	if err == nil {
		err = td.Error()
	}
	if err != nil {
		return abort(fmt.Errorf("topic %s: %w", f.topic, err))
	}
	commit := kmsg.NewPtrTxnOffsetCommitRequest()
	commit.TransactionalID, commit.Group, commit.ProducerID, commit.ProducerEpoch = txnID, f.group, id, epoch
	commit.Generation, commit.MemberID = -1, ""
	t := kmsg.NewTxnOffsetCommitRequestTopic()
	t.Topic, t.TopicID = f.topic, td[f.topic].ID
	p := kmsg.NewTxnOffsetCommitRequestTopicPartition()
	p.Partition, p.Offset, p.LeaderEpoch = f.partition, next, -1
	t.Partitions = append(t.Partitions, p)
	commit.Topics = append(commit.Topics, t)
	commitResp, err := commit.RequestWith(tctx, cl)
	if err == nil {
		for _, rt := range commitResp.Topics {
			for _, rp := range rt.Partitions {
				if e := kerr.ErrorForCode(rp.ErrorCode); e != nil && err == nil {
					err = e
				}
			}
		}
	}
	if err != nil {
		return abort(fmt.Errorf("committing offset %d for group %s: %w (a group with members refuses it: stop them first)", next, f.group, err))
	}
	if err := cl.EndTransaction(tctx, kgo.TryCommit); err != nil {
		return rescued{}, fmt.Errorf("committing the transaction: %w (its outcome is not known: check the group's offset and %s)", err, f.dlq)
	}
	return rescued{DLQTopic: r.Topic, DLQPartition: r.Partition, DLQOffset: r.Offset}, nil
}
