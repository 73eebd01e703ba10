package integration_test

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/antidote-kafka/antidote/deadletter"
)

// redrivenText is the result of RedrivenPrefix as one line per partition.
func redrivenText(ps []deadletter.RedrivenPartition) string {
	var s string
	for _, p := range ps {
		s += fmt.Sprintf("%d: start %d below %d progress %d records %d stop %q\n", p.Partition, p.Start, p.Below, p.Progress, p.Records(), p.Stop)
	}
	return s
}

// RedrivenPrefix ends each partition's prefix below the first letter the
// redrive did not redrive: one it refused, one outside its picked letters
// (which Decide alone does not know), and nothing without progress.
func TestIntegrationRedrivenPrefix(t *testing.T) {
	fx := newFixture(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// Each partition's prefix ends below its first refused letter.
	refusal := map[string]string{
		"looping":   "redriven 3 times already (max 3)",
		"stranger":  "not a dead letter: no known failure headers",
		"malformed": "header kafka_dlt-original-partition",
	}
	type stop struct {
		below, end int64
		why        string
	}
	stops := map[int32]*stop{}
	at := map[string]deadletter.Position{}
	for _, r := range readAll(t, fx.cl, fx.dlq) {
		at[string(r.Value)] = deadletter.Position{Partition: r.Partition, Offset: r.Offset}
		s := stops[r.Partition]
		if s == nil {
			s = &stop{below: -1}
			stops[r.Partition] = s
		}
		s.end = r.Offset + 1
		if why, ok := refusal[string(r.Value)]; ok && s.below < 0 {
			s.below, s.why = r.Offset, why
		}
	}
	all := deadletter.RedriveConfig{Topic: fx.dlq, IdleTimeout: 3 * time.Second}
	if _, err := deadletter.RedrivenPrefix(ctx, fx.cl, all); !errors.Is(err, deadletter.ErrNoProgress) {
		t.Fatalf("before any redrive: %v, want ErrNoProgress", err)
	}
	if _, err := deadletter.Redrive(ctx, fx.cl, all); err != nil {
		t.Fatal(err)
	}
	got, err := deadletter.RedrivenPrefix(ctx, fx.cl, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(stops) {
		t.Fatalf("after the redrive of every letter:\n%swant %d partitions", redrivenText(got), len(stops))
	}
	for _, p := range got {
		s := stops[p.Partition]
		if s.below < 0 || p.Below != s.below || p.Progress != s.end || p.Start != 0 || p.Records() != s.below || !strings.HasPrefix(p.Stop, s.why) {
			t.Errorf("after the redrive of every letter:\n%swant partition %d below %d (%s), progress %d", redrivenText(got), p.Partition, s.below, s.why, s.end)
		}
	}
	if got, err := deadletter.RedrivenPrefix(ctx, fx.cl, all, 1); err != nil || len(got) != 1 || got[0].Partition != 1 {
		t.Errorf("partition 1 only: %s%v", redrivenText(got), err)
	}
	if _, err := deadletter.RedrivenPrefix(ctx, fx.cl, all, 7); err == nil {
		t.Error("a partition the topic does not have: no error")
	}

	// Picked letters: the first and the third Antidote letter of one
	// partition. The one between passes the filter but was not picked.
	var same []deadletter.Position
	for _, v := range []string{"antidote-0", "antidote-1", "antidote-2", "antidote-3"} {
		if at[v].Partition == at["antidote-0"].Partition {
			same = append(same, at[v])
		}
	}
	if len(same) < 3 {
		t.Fatalf("the fixture's antidote letters %v: want three in one partition", at)
	}
	slices.SortFunc(same, func(a, b deadletter.Position) int { return cmp.Compare(a.Offset, b.Offset) })
	first, between, last := same[0], same[1], same[2]
	if first.Offset != 0 || between.Offset != 1 {
		t.Fatalf("the fixture's antidote letters %v: want the first two at offsets 0 and 1", same)
	}
	pick := deadletter.RedriveConfig{Topic: fx.dlq, IdleTimeout: 3 * time.Second, Letters: []deadletter.Position{first, last}}
	if res, err := deadletter.Redrive(ctx, fx.cl, pick); err != nil || res.Redriven != 2 {
		t.Fatalf("redrive of the picked letters: %+v, %v", res, err)
	}
	got, err = deadletter.RedrivenPrefix(ctx, fx.cl, pick)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("%d: start 0 below 1 progress %d records 1 stop %q\n", first.Partition, last.Offset+1, deadletter.NotSelected)
	if s := redrivenText(got); s != want {
		t.Errorf("after the redrive of picked letters:\n%swant\n%s", s, want)
	}
}
