// Package poison is antidote poison: the poison pills of every kind, and
// the command that produces them to a topic.
package poison

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/antidote-kafka/antidote/cmd/antidote/internal/cli"
	"github.com/antidote-kafka/antidote/internal/pills"
)

// poisonKind is one kind of poison pill (a kind of internal/pills, whose
// list the randomized fault runs draw from too).
type poisonKind struct {
	name string
	help string
	// value returns the i-th pill (0-based). It is deterministic, so that
	// tests can check what was written.
	value func(i, size int) []byte
}

// poisonHeader names the kind of each pill, so that pills can be told from
// real records downstream.
const poisonHeader = pills.Header

// UnknownSchemaID is a Confluent schema id no registry hands out in
// practice: the largest positive int32.
const UnknownSchemaID = pills.UnknownSchemaID

// AvroBody is a small Avro binary record {id: long 42, name: string
// "poison"}, as a producer without a schema registry writes it.
var AvroBody = pills.AvroBody

// ConfluentFrame prefixes body with the Confluent wire format: the 0x00
// magic byte and a 4-byte big-endian schema id.
func ConfluentFrame(id int, body []byte) []byte { return pills.ConfluentFrame(id, body) }

var poisonKinds = func() []poisonKind {
	var ks []poisonKind
	for _, k := range pills.Kinds() {
		ks = append(ks, poisonKind{k.Name, k.Help, k.Value})
	}
	return ks
}()

func findPoisonKind(name string) (poisonKind, bool) {
	for _, k := range poisonKinds {
		if k.name == name {
			return k, true
		}
	}
	return poisonKind{}, false
}

func KindNames() []string {
	names := make([]string, len(poisonKinds))
	for i, k := range poisonKinds {
		names[i] = k.name
	}
	return names
}

// defaultHugeSize stays under the broker's default message.max.bytes
// (1 MiB plus batch overhead).
const defaultHugeSize = 1000000

// NewCommand builds antidote poison: poison pills of one kind, produced to
// an existing topic.
func NewCommand() *cobra.Command {
	var (
		topic       string
		kind        string
		count       int
		partition   int32
		key         string
		size        int
		create      bool
		createParts int32
	)
	var kindsHelp strings.Builder
	for _, k := range poisonKinds {
		fmt.Fprintf(&kindsHelp, "  %-17s %s\n", k.name, k.help)
	}
	cmd := &cobra.Command{
		Use:   "poison --topic TOPIC --kind KIND [--count N]",
		Short: "Produce poison pills to a topic, to test a consumer",
		Long: "Produce poison pills of one kind to an existing topic, so that you can see what\n" +
			"your consumer does with them. The topic must exist, unless --create creates it.\n\nKinds:\n" + kindsHelp.String(),
		Example: `  antidote poison --brokers localhost:9092 --topic orders --kind garbage --count 10
  antidote poison --topic orders --kind unknown-schema --partition 0 --key order-42
  antidote poison --topic orders --kind huge --size 500000 -o json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			k, ok := findPoisonKind(kind)
			if !ok {
				return cli.Usagef("--kind %q: unknown kind; one of %s", kind, strings.Join(KindNames(), ", "))
			}
			if count < 1 {
				return cli.Usagef("--count %d: must be at least 1", count)
			}
			if size < 1 {
				return cli.Usagef("--size %d: must be positive", size)
			}
			if cmd.Flags().Changed("size") && k.name != "huge" {
				return cli.Usagef("--size applies only to --kind huge")
			}
			if createParts < 1 {
				return cli.Usagef("--create-partitions %d: must be at least 1", createParts)
			}
			if !create {
				createParts = 0
			}
			if partition < -1 {
				return cli.Usagef("--partition %d: must be 0 or more (or -1: let the partitioner choose)", partition)
			}
			var keyBytes []byte
			if cmd.Flags().Changed("key") {
				keyBytes = []byte(key)
			}
			g := cli.ReadGlobals(cmd)
			res, err := producePoison(cmd.Context(), g, poisonRequest{
				topic: topic, kind: k, count: count, partition: partition, key: keyBytes, size: size, create: createParts,
			})
			if err != nil {
				return err
			}
			return printPoison(cmd.OutOrStdout(), g, res)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&topic, "topic", "t", "", "topic to produce to (required; must exist)")
	f.StringVarP(&kind, "kind", "k", "", "kind of poison pill (required): "+strings.Join(KindNames(), ", "))
	f.IntVarP(&count, "count", "n", 1, "number of poison pills")
	f.Int32VarP(&partition, "partition", "p", -1, "partition to produce to (-1: by key, or spread when there is no key)")
	f.StringVar(&key, "key", "", "record key (default: no key)")
	f.BoolVar(&create, "create", false, "create the topic when it does not exist")
	f.Int32Var(&createParts, "create-partitions", 3, "partitions of the topic --create creates")
	f.IntVar(&size, "size", defaultHugeSize, "value size in bytes, for --kind huge")
	_ = cmd.MarkFlagRequired("topic")
	_ = cmd.MarkFlagRequired("kind")
	_ = cmd.RegisterFlagCompletionFunc("kind", cobra.FixedCompletions(KindNames(), cobra.ShellCompDirectiveNoFileComp))
	return cmd
}

type poisonRequest struct {
	create    int32 // partitions of the topic to create when it is missing; 0: do not
	created   bool
	topic     string
	kind      poisonKind
	count     int
	partition int32 // -1: partitioner
	key       []byte
	size      int
}

// poisonPartition is the offsets written to one partition.
type poisonPartition struct {
	Partition   int32 `json:"partition"`
	Count       int   `json:"count"`
	FirstOffset int64 `json:"first_offset"`
	LastOffset  int64 `json:"last_offset"`
}

type poisonResult struct {
	Brokers    []string          `json:"brokers"`
	Topic      string            `json:"topic"`
	Kind       string            `json:"kind"`
	Count      int               `json:"count"`
	Bytes      int64             `json:"bytes"`
	Partitions []poisonPartition `json:"partitions"`
	Created    bool              `json:"created,omitempty"` // by --create
}

func producePoison(ctx context.Context, g cli.Globals, req poisonRequest) (*poisonResult, error) {
	maxBytes := int32(max(req.size+4096, 1<<20))
	part := kgo.RoundRobinPartitioner()
	switch {
	case req.partition >= 0:
		part = kgo.ManualPartitioner()
	case req.key != nil:
		part = kgo.StickyKeyPartitioner(nil) // murmur2, as the Java client
	}
	cl, err := g.Dial(ctx,
		kgo.RecordPartitioner(part),
		kgo.ProducerBatchMaxBytes(maxBytes),
		kgo.ProducerLinger(0),
		// Pills go out as they are: a huge one stays huge on the wire.
		kgo.ProducerBatchCompression(kgo.NoCompression()),
		kgo.RecordDeliveryTimeout(max(g.Timeout, 10*time.Second)),
	)
	if err != nil {
		return nil, err
	}
	defer cl.Close()
	adm := kadm.NewClient(cl)
	parts, err := cli.TopicPartitions(ctx, adm, g.Brokers, g.Timeout, req.topic)
	if errors.Is(err, cli.ErrNoTopic) {
		if req.create < 1 {
			return nil, fmt.Errorf("%w; add --create to create it (3 partitions, or --create-partitions N), or create it with your cluster's tools", err)
		}
		if parts, err = createTopic(ctx, adm, g, req.topic, req.create); err != nil {
			return nil, err
		}
		req.created = true
	}
	if err != nil {
		return nil, err
	}
	if req.partition >= parts {
		return nil, fmt.Errorf("topic %q has %d partitions (0-%d); partition %d does not exist", req.topic, parts, parts-1, req.partition)
	}

	recs := make([]*kgo.Record, req.count)
	res := &poisonResult{Brokers: g.Brokers, Topic: req.topic, Kind: req.kind.name, Count: req.count, Created: req.created}
	for i := range recs {
		v := req.kind.value(i, req.size)
		res.Bytes += int64(len(v))
		recs[i] = &kgo.Record{
			Topic: req.topic, Key: req.key, Value: v,
			Partition: max(req.partition, 0),
			Headers:   []kgo.RecordHeader{{Key: poisonHeader, Value: []byte(req.kind.name)}},
		}
	}
	results := cl.ProduceSync(ctx, recs...)
	if err := results.FirstErr(); err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		written := 0
		for _, r := range results {
			if r.Err == nil {
				written++
			}
		}
		hint := ""
		if errors.Is(err, kerr.MessageTooLarge) || errors.Is(err, kerr.RecordListTooLarge) {
			hint = "; use a smaller --size, or raise the topic's max.message.bytes"
		}
		return nil, fmt.Errorf("produce to %q: %w (%d of %d written)%s", req.topic, err, written, req.count, hint)
	}
	byPart := map[int32]*poisonPartition{}
	for _, r := range results {
		p := byPart[r.Record.Partition]
		if p == nil {
			p = &poisonPartition{Partition: r.Record.Partition, FirstOffset: r.Record.Offset, LastOffset: r.Record.Offset}
			byPart[r.Record.Partition] = p
		}
		p.Count++
		p.FirstOffset = min(p.FirstOffset, r.Record.Offset)
		p.LastOffset = max(p.LastOffset, r.Record.Offset)
	}
	for _, p := range byPart {
		res.Partitions = append(res.Partitions, *p)
	}
	slices.SortFunc(res.Partitions, func(a, b poisonPartition) int { return int(a.Partition - b.Partition) })
	return res, nil
}

func printPoison(w io.Writer, g cli.Globals, res *poisonResult) error {
	if g.JSON() {
		enc := json.NewEncoder(w)
		return enc.Encode(res)
	}
	if res.Created {
		fmt.Fprintf(w, "Created topic %s.\n", res.Topic)
	}
	fmt.Fprintf(w, "Produced %d %s poison pill(s) (%s) to %s on %s.\n\n", res.Count, res.Kind, humanBytes(res.Bytes), res.Topic, strings.Join(res.Brokers, ","))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "PARTITION\tCOUNT\tOFFSETS")
	for _, p := range res.Partitions {
		offs := fmt.Sprint(p.FirstOffset)
		if p.LastOffset != p.FirstOffset {
			offs += "-" + fmt.Sprint(p.LastOffset)
		}
		fmt.Fprintf(tw, "%d\t%d\t%s\n", p.Partition, p.Count, offs)
	}
	return tw.Flush()
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// createTopic creates topic with parts partitions (and the cluster's
// default replication) and waits until its metadata shows them.
func createTopic(ctx context.Context, adm *kadm.Client, g cli.Globals, topic string, parts int32) (int32, error) {
	cctx, cancel := context.WithTimeout(ctx, g.Timeout)
	defer cancel()
	resp, err := adm.CreateTopic(cctx, parts, -1, nil, topic)
	if err == nil {
		err = resp.Err
	}
	if err != nil && !errors.Is(err, kerr.TopicAlreadyExists) {
		return 0, fmt.Errorf("creating topic %q: %w", topic, err)
	}
	for {
		n, err := cli.TopicPartitions(cctx, adm, g.Brokers, g.Timeout, topic)
		if err == nil && n > 0 {
			return n, nil
		}
		if !errors.Is(err, cli.ErrNoTopic) && err != nil {
			return 0, err
		}
		select {
		case <-cctx.Done():
			return 0, fmt.Errorf("topic %q was created but does not show in the metadata within %v", topic, g.Timeout)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
