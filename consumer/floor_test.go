package consumer

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestFloors: what the poll loop hands out of fetched records as the
// client's position goes back, and when it may.
func TestFloors(t *testing.T) {
	f := newFloors(slog.New(slog.DiscardHandler))
	id, newID := [16]byte{1}, [16]byte{2}
	recs := func(from, to int64) []*kgo.Record {
		var rs []*kgo.Record
		for o := from; o < to; o++ {
			rs = append(rs, &kgo.Record{Offset: o})
		}
		return rs
	}
	offsets := func(rs []*kgo.Record) []int64 {
		var os []int64
		for _, r := range rs {
			os = append(os, r.Offset)
		}
		return os
	}
	take := func(id [16]byte, from, to int64) []int64 { return offsets(f.take("t", id, 0, 100, recs(from, to))) }
	want := func(what string, got []int64, from, to int64) {
		t.Helper()
		if w := offsets(recs(from, to)); !slices.Equal(got, w) {
			t.Errorf("%s: handed out %v, want %v", what, got, w)
		}
	}
	want("first fetch", take(id, 0, 10), 0, 10)
	want("back to the start", take(id, 0, 12), 10, 12)
	f.committed(map[tp]kgo.EpochOffset{{"t", 0}: {Offset: 5}})
	f.aborted()
	want("after an abort: from the committed offset", take(id, 5, 12), 5, 12)
	want("before the committed offset after the abort", take(id, 0, 5), 0, 0)
	want("a new topic id", take(newID, 0, 3), 0, 3)
	f.dataLoss("t", 0)
	want("after a truncation", take(newID, 1, 3), 1, 3)
	f.forget(map[string][]int32{"t": {0}})
	want("after an assignment", take(newID, 0, 3), 0, 3)
	f.forgetTopic("t")
	f.at("t", newID, 0, 20)
	want("below the committed offset at the assignment", take(newID, 0, 25), 20, 25)
	f.aborted()
	want("after an abort with no commit of its own", take(newID, 20, 22), 20, 22)
	f.at("t", newID, 0, 150)
	want("a committed offset past the log's end", take(newID, 0, 5), 0, 5)
	f.forgetTopic("t")
	want("without a topic id", take([16]byte{}, 0, 2), 0, 2)
	want("without a topic id, again", take([16]byte{}, 0, 2), 0, 2)
}
