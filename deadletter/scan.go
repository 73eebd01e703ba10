package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultIdleTimeout is the default of [ScanConfig.IdleTimeout].
const DefaultIdleTimeout = 10 * time.Second

// ScanConfig says what [Scan] reads.
type ScanConfig struct {
	// Topic is the topic to read. Required.
	Topic string
	// Partitions limits the scan to these partitions. Optional; default
	// all.
	Partitions []int32
	// From is the first offset to read per partition. Optional; a
	// partition without one, or with one below its log start, is read
	// from its log start.
	From map[int32]int64
	// IdleTimeout bounds a wait for records that do not come: when the
	// offsets left before the end are not records (transaction markers),
	// the scan ends after this long without records. Optional; default
	// [DefaultIdleTimeout].
	IdleTimeout time.Duration
}

// Scan reads cfg.Topic up to the end offsets it has when Scan starts, and
// calls fn with every record in offset order within each partition, from
// the calling goroutine. Records produced after the start are not read, so
// Scan ends, also on an empty topic. fn may return [ErrStop] to end the
// scan early without an error; any other error ends it and is returned.
//
// Scan consumes with cl as a direct (groupless) consumer: cl must not be a
// group consumer, and only one Scan may use cl at a time. It returns an
// error wrapping [ErrUnknownTopic] when the topic does not exist, and
// ctx's error when ctx ends.
func Scan(ctx context.Context, cl *kgo.Client, cfg ScanConfig, fn func(*kgo.Record) error) error {
	if cfg.Topic == "" {
		return errors.New("deadletter: scan: no topic")
	}
	idle := cfg.IdleTimeout
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	starts, ends, err := Bounds(ctx, cl, cfg.Topic)
	if err != nil {
		return err
	}
	pending := map[int32]int64{} // partition -> end offset
	consume := map[int32]kgo.Offset{}
	for p, end := range ends {
		if len(cfg.Partitions) > 0 && !slices.Contains(cfg.Partitions, p) {
			continue
		}
		from := starts[p]
		if o, ok := cfg.From[p]; ok && o > from {
			from = o
		}
		if from < end {
			pending[p] = end
			consume[p] = kgo.NewOffset().At(from)
		}
	}
	for _, p := range cfg.Partitions {
		if _, ok := ends[p]; !ok {
			return fmt.Errorf("deadletter: topic %q has no partition %d", cfg.Topic, p)
		}
	}
	if len(pending) == 0 {
		return nil
	}
	topic := cfg.Topic
	cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume})
	defer func() {
		ps := make([]int32, 0, len(consume))
		for p := range consume {
			ps = append(ps, p)
		}
		cl.RemoveConsumePartitions(map[string][]int32{topic: ps})
		cl.ResumeFetchPartitions(map[string][]int32{topic: ps})
	}()

	var lastErr error
	for len(pending) > 0 {
		pctx, cancel := context.WithTimeout(ctx, idle)
		fs := cl.PollFetches(pctx)
		timedOut := pctx.Err() != nil
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
		got := 0
		var stop error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			lastErr = fmt.Errorf("deadletter: reading %s[%d]: %w", t, p, err)
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			end, ok := pending[fp.Partition]
			if fp.Topic != topic || !ok {
				return
			}
			for _, r := range fp.Records {
				if stop != nil || r.Offset >= end {
					break
				}
				got++
				if err := fn(r); err != nil {
					stop = err
					break
				}
				if r.Offset+1 >= end {
					delete(pending, fp.Partition)
					cl.PauseFetchPartitions(map[string][]int32{topic: {fp.Partition}})
				}
			}
		})
		if stop != nil {
			if errors.Is(stop, ErrStop) {
				return nil
			}
			return stop
		}
		if got == 0 && timedOut {
			if lastErr != nil {
				return lastErr
			}
			// Nothing came for a whole idle period and nothing failed: the
			// offsets left are not records.
			return nil
		}
	}
	return nil
}

// Bounds returns the log start and end offsets of every partition of
// topic, or an error wrapping [ErrUnknownTopic] when it does not exist.
func Bounds(ctx context.Context, cl *kgo.Client, topic string) (starts, ends map[int32]int64, err error) {
	adm := kadm.NewClient(cl)
	topics, err := adm.ListTopics(ctx, topic)
	if err != nil {
		return nil, nil, fmt.Errorf("deadletter: metadata of %q: %w", topic, err)
	}
	td, ok := topics[topic]
	if !ok || errors.Is(td.Err, kerr.UnknownTopicOrPartition) {
		return nil, nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
	}
	if td.Err != nil {
		return nil, nil, fmt.Errorf("deadletter: metadata of %q: %w", topic, td.Err)
	}
	list := func(f func(context.Context, ...string) (kadm.ListedOffsets, error)) (map[int32]int64, error) {
		los, err := f(ctx, topic)
		if err != nil {
			return nil, fmt.Errorf("deadletter: offsets of %q: %w", topic, err)
		}
		out := make(map[int32]int64, len(td.Partitions))
		for p, lo := range los[topic] {
			if lo.Err != nil {
				if errors.Is(lo.Err, kerr.UnknownTopicOrPartition) && p < 0 {
					return nil, fmt.Errorf("%w: %q", ErrUnknownTopic, topic)
				}
				return nil, fmt.Errorf("deadletter: offsets of %s[%d]: %w", topic, p, lo.Err)
			}
			out[p] = lo.Offset
		}
		return out, nil
	}
	if starts, err = list(adm.ListStartOffsets); err != nil {
		return nil, nil, err
	}
	if ends, err = list(adm.ListEndOffsets); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}
