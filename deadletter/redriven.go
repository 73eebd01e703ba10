package deadletter

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// RedrivenPartition is what [RedrivenPrefix] found in one partition of a
// dead-letter topic.
type RedrivenPartition struct {
	Partition int32
	// Start is the partition's log start offset.
	Start int64
	// Progress is the redrive's committed progress in the partition (the
	// next offset it would read), at most the partition's end offset.
	Progress int64
	// Below is the offset below which every letter from Start on was
	// redriven: deleting the records below it (Kafka's DeleteRecords)
	// removes only letters the redrive redrove. It is at least Start, and
	// at most Progress.
	Below int64
	// Stop says why Below falls short of Progress: the letter at Below is
	// the first that the redrive did not redrive, and Stop is
	// [NotSelected] (the redrive's filter, or its picked
	// [RedriveConfig.Letters], passed over it) or the reason the redrive
	// refused it, as [RedriveConfig.Decide] gives it. Empty when Below is
	// Progress.
	Stop string
}

// Records is how many records lie below Below: those a purge of the
// partition deletes.
func (p RedrivenPartition) Records() int64 { return max(p.Below-p.Start, 0) }

// RedrivenPrefix finds, in each partition of cfg.Topic where the redrive of
// cfg has progress, the prefix of letters that it redrove: how far a purge
// may delete (DeleteRecords removes a prefix of each partition) without
// deleting a letter that was never redriven. cfg is the redrive's
// configuration as it ran: its Group (default [RedriveConfig.DefaultGroup]),
// Filter, Letters, To and MaxRedrives. Each partition is read from its log
// start up to the redrive's progress and every letter is judged as the
// redrive judged it ([RedriveConfig.Decide], and Letters); the prefix ends
// below the first letter the redrive passed over or refused, and
// [RedrivenPartition.Stop] says why. Partitions limits the search to these
// partitions (default all).
//
// The filter's relative bounds are resolved now ([Filter.At]). Resolved
// later than a run of the redrive, a MaxAge selects fewer letters, and the
// prefix only ends sooner; but a MinAge selects letters that run passed
// over, and takes them for redriven. Refuse a relative MinAge unless every
// run of the group resolved it at the time cfg's filter is resolved at.
//
// A redrive group with no progress on the topic (or in Partitions) is an
// error wrapping [ErrNoProgress]. The result is in partition order.
// RedrivenPrefix reads with cl, which must not be a group consumer (create
// it with [ScanOpts]); cfg.IdleTimeout is the scan's
// [ScanConfig.IdleTimeout]. It deletes nothing.
func RedrivenPrefix(ctx context.Context, cl *kgo.Client, cfg RedriveConfig, partitions ...int32) ([]RedrivenPartition, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Group == "" {
		cfg.Group = cfg.DefaultGroup()
	}
	starts, ends, err := Bounds(ctx, cl, cfg.Topic)
	if err != nil {
		return nil, err
	}
	for _, p := range partitions {
		if _, ok := ends[p]; !ok {
			return nil, fmt.Errorf("deadletter: topic %q has no partition %d (it has %d)", cfg.Topic, p, len(ends))
		}
	}
	progress, err := kadm.NewClient(cl).FetchOffsetsForTopics(ctx, cfg.Group, cfg.Topic)
	if err == nil {
		err = progress.Error()
	}
	if errors.Is(err, kerr.GroupIDNotFound) {
		progress, err = nil, nil // as Kafka answers: no offsets
	}
	if err != nil {
		return nil, fmt.Errorf("deadletter: progress of redrive group %s: %w", cfg.Group, err)
	}
	found := map[int32]*RedrivenPartition{}
	upTo := map[int32]int64{} // the partitions to read, up to the progress
	var parts []int32
	for p := range ends {
		o, ok := progress.Lookup(cfg.Topic, p)
		if !ok || o.At < 0 || (len(partitions) > 0 && !slices.Contains(partitions, p)) {
			continue
		}
		rp := &RedrivenPartition{Partition: p, Start: starts[p], Progress: min(o.At, ends[p])}
		rp.Below = max(rp.Start, rp.Progress)
		found[p] = rp
		if rp.Progress > rp.Start {
			upTo[p] = rp.Progress
			parts = append(parts, p)
		}
	}
	if len(found) == 0 {
		return nil, fmt.Errorf("%w: group %s, topic %s", ErrNoProgress, cfg.Group, cfg.Topic)
	}
	var picked map[Position]bool
	if len(cfg.Letters) > 0 {
		picked = make(map[Position]bool, len(cfg.Letters))
		for _, l := range cfg.Letters {
			picked[l] = true
		}
	}
	cfg.Filter = cfg.Filter.At(time.Now())
	if len(parts) > 0 {
		slices.Sort(parts)
		open := len(parts) // partitions not yet stopped
		err = Scan(ctx, cl, ScanConfig{Topic: cfg.Topic, Partitions: parts, From: starts, To: upTo, IdleTimeout: cfg.IdleTimeout}, func(rec *kgo.Record) error {
			rp := found[rec.Partition]
			if rp.Stop != "" {
				return nil
			}
			_, why := cfg.Decide(rec)
			if picked != nil && !picked[Position{rec.Partition, rec.Offset}] {
				why = NotSelected
			}
			if why == "" {
				return nil
			}
			rp.Below, rp.Stop = rec.Offset, why
			if open--; open == 0 {
				return ErrStop
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	out := make([]RedrivenPartition, 0, len(found))
	for _, rp := range found {
		out = append(out, *rp)
	}
	slices.SortFunc(out, func(a, b RedrivenPartition) int { return cmp.Compare(a.Partition, b.Partition) })
	return out, nil
}
