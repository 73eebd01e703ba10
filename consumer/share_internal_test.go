package consumer

import (
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKeyRuns: a poll splits into runs handled at once; a run is the
// records of one partition and key, in offset order, and a record without
// a key is a run alone.
func TestKeyRuns(t *testing.T) {
	rec := func(p int32, key string, off int64) *kgo.Record {
		r := &kgo.Record{Topic: "t", Partition: p, Offset: off}
		if key != "" {
			r.Key = []byte(key)
		}
		return r
	}
	recs := []*kgo.Record{rec(0, "a", 0), rec(0, "b", 1), rec(0, "", 2), rec(0, "a", 3), rec(1, "a", 0), rec(0, "", 4), rec(0, "b", 5)}
	var got []string
	for _, run := range keyRuns(recs) {
		var s []string
		for _, r := range run {
			s = append(s, fmt.Sprintf("%d/%s@%d", r.Partition, r.Key, r.Offset))
		}
		got = append(got, strings.Join(s, " "))
	}
	want := []string{"0/a@0 0/a@3", "0/b@1 0/b@5", "0/@2", "1/a@0", "0/@4"}
	if strings.Join(got, " | ") != strings.Join(want, " | ") {
		t.Errorf("runs %q, want %q", got, want)
	}
}
