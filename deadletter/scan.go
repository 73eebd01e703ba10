package deadletter

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// DefaultIdleTimeout is the default of [ScanConfig.IdleTimeout].
const DefaultIdleTimeout = 30 * time.Second

// ScanOpts are the client options a [Scan] or [Redrive] client should
// have: control records are kept, so that a scan sees the transaction
// markers and knows it reached the end offsets when the last offsets are
// markers, and only committed records are read (a transactional writer's
// aborted letters are not letters). Scan works without them, but then a
// partition whose last offsets are markers stalls (see
// [ScanConfig.IdleTimeout]). Their partitioner lets Redrive keep a
// letter's original partition ([PartitionOriginal]); other records are
// partitioned by key, as the client's default does.
func ScanOpts() []kgo.Opt {
	return []kgo.Opt{
		kgo.KeepControlRecords(), kgo.FetchIsolationLevel(kgo.ReadCommitted()),
		kgo.RecordPartitioner(partitioner{byKey: kgo.StickyKeyPartitioner(nil)}),
	}
}

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
	// To ends the scan of a partition before this offset. Optional; a
	// partition without one, or with one past its end, is read up to the
	// end offset it has when Scan starts.
	To map[int32]int64
	// Follow reads on past the end offsets: Scan waits for new records
	// until ctx ends (or fn stops it), and To is ignored.
	Follow bool
	// IdleTimeout bounds a stall: when no record comes for this long
	// while records are still due, Scan returns an error wrapping
	// [ErrStalled] that names each partition's position and end. A stall
	// is never taken for the end. Optional; default [DefaultIdleTimeout];
	// it does not apply with Follow.
	IdleTimeout time.Duration
	// Started, when set, is called once before the first record with the
	// number of offsets the scan has to read (0 with Follow).
	Started func(due int64)
}

// Scan reads cfg.Topic up to the end offsets (the last stable offsets) it
// has when Scan starts, and calls fn with every record in offset order
// within each partition, from the calling goroutine. Partitions are read
// one after the other, in order, so that memory stays bounded whatever
// the topic's size (with Follow, all at once). Records produced
// after the start are not read (unless cfg.Follow), so Scan ends, also on
// an empty topic. fn may return [ErrStop] to end the scan early without an
// error; any other error ends it and is returned.
//
// Scan ends only when every partition reached its end offset: a broker
// that stops answering makes it return an error wrapping [ErrStalled]
// after cfg.IdleTimeout, never success with records unread. Create cl
// with [ScanOpts] so that transaction markers count as read.
//
// Scan consumes with cl as a direct (groupless) consumer: cl must not be a
// group consumer, and only one Scan may use cl at a time. It returns an
// error wrapping [ErrUnknownTopic] when the topic does not exist, and
// ctx's error when ctx ends. fn must not keep the record's byte slices
// past its return unless it copies them: they belong to the fetch.
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
	for _, p := range cfg.Partitions {
		if _, ok := ends[p]; !ok {
			return fmt.Errorf("deadletter: topic %q has no partition %d (it has %d)", cfg.Topic, p, len(ends))
		}
	}
	next := map[int32]int64{}    // partition -> next offset due
	pending := map[int32]int64{} // partition -> end offset (exclusive)
	consume := map[int32]kgo.Offset{}
	var due int64
	for p, end := range ends {
		if len(cfg.Partitions) > 0 && !slices.Contains(cfg.Partitions, p) {
			continue
		}
		from := starts[p]
		if o, ok := cfg.From[p]; ok && o > from {
			from = o
		}
		if to, ok := cfg.To[p]; ok && to < end && !cfg.Follow {
			end = to
		}
		if from < end || cfg.Follow {
			next[p] = from
			consume[p] = kgo.NewOffset().At(from)
			if from < end {
				pending[p] = end
				due += end - from
			}
		}
	}
	if cfg.Started != nil {
		if cfg.Follow {
			due = 0
		}
		cfg.Started(due)
	}
	if len(consume) == 0 {
		return nil
	}
	topic := cfg.Topic
	// A bounded scan reads one partition after the other: a fetch then
	// holds the batches of one partition, not of every partition, which
	// bounds memory however many partitions there are.
	var queue []int32
	if cfg.Follow {
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: consume})
	} else {
		for p := range pending {
			queue = append(queue, p)
		}
		sort.Slice(queue, func(i, j int) bool { return queue[i] < queue[j] })
		cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {queue[0]: consume[queue[0]]}})
	}
	defer func() {
		ps := make([]int32, 0, len(consume))
		for p := range consume {
			ps = append(ps, p)
		}
		cl.RemoveConsumePartitions(map[string][]int32{topic: ps})
	}()
	done := func(p int32) {
		delete(pending, p)
		if cfg.Follow {
			return
		}
		// A fetch of p polled before the removal is not read.
		delete(next, p)
		cl.RemoveConsumePartitions(map[string][]int32{topic: {p}})
		if len(queue) > 0 && queue[0] == p {
			queue = queue[1:]
		}
		if len(queue) > 0 {
			cl.AddConsumePartitions(map[string]map[int32]kgo.Offset{topic: {queue[0]: consume[queue[0]]}})
		}
	}

	// One goroutine polls while this one hands records to fn, so that
	// the next fetch is decoded while fn works on this one.
	fetches := make(chan kgo.Fetches)
	pctx, stopPolling := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Add(1)
	go func() {
		defer polling.Done()
		for {
			fs := cl.PollFetches(pctx)
			if pctx.Err() != nil {
				return
			}
			select {
			case fetches <- fs:
			case <-pctx.Done():
				return
			}
			if fs.IsClientClosed() {
				return
			}
		}
	}()
	defer func() {
		stopPolling()
		polling.Wait()
	}()

	var lastErr error
	lastProgress := time.Now()
	idleTimer := time.NewTimer(idle)
	defer idleTimer.Stop()
	for cfg.Follow || len(pending) > 0 {
		var fs kgo.Fetches
		if !cfg.Follow {
			idleTimer.Reset(max(time.Until(lastProgress.Add(idle)), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case fs = <-fetches:
		case <-idleTimer.C:
		}
		if fs.IsClientClosed() {
			return kgo.ErrClientClosed
		}
		var stop error
		fs.EachError(func(t string, p int32, err error) {
			if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
				return
			}
			lastErr = fmt.Errorf("reading %s[%d]: %w", t, p, err)
		})
		fs.EachPartition(func(fp kgo.FetchTopicPartition) {
			at, ok := next[fp.Partition]
			if fp.Topic != topic || !ok || stop != nil {
				return
			}
			end, bounded := pending[fp.Partition]
			for _, r := range fp.Records {
				if r.Offset < at {
					continue // a record seen before a retried fetch
				}
				if bounded && r.Offset >= end {
					break
				}
				at = r.Offset + 1
				next[fp.Partition] = at
				lastProgress = time.Now()
				if !r.Attrs.IsControl() {
					if err := fn(r); err != nil {
						stop = err
						break
					}
				}
				if bounded && at >= end {
					done(fp.Partition)
					break
				}
			}
		})
		if stop != nil {
			if errors.Is(stop, ErrStop) {
				return nil
			}
			return stop
		}
		if !cfg.Follow && len(pending) > 0 && time.Since(lastProgress) >= idle {
			return stalled(topic, idle, next, pending, lastErr)
		}
	}
	return nil
}

// stalled describes the partitions a stalled scan did not finish.
func stalled(topic string, idle time.Duration, next, pending map[int32]int64, lastErr error) error {
	ps := make([]int32, 0, len(pending))
	for p := range pending {
		ps = append(ps, p)
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i] < ps[j] })
	var b strings.Builder
	for i, p := range ps {
		if i == 8 {
			fmt.Fprintf(&b, ", and %d more", len(ps)-i)
			break
		}
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%d at %d of %d", p, next[p], pending[p])
	}
	err := fmt.Errorf("%w: no record of %s for %v with records due (partition %s)", ErrStalled, topic, idle, b.String())
	if lastErr != nil {
		err = fmt.Errorf("%w; last error: %w", err, lastErr)
	}
	return err
}

// Bounds returns the log start and end offsets of every partition of
// topic, or an error wrapping [ErrUnknownTopic] when it does not exist.
// The end offsets are the last stable offsets: the end for a reader of
// committed records.
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
	if ends, err = list(adm.ListCommittedOffsets); err != nil {
		return nil, nil, err
	}
	return starts, ends, nil
}
